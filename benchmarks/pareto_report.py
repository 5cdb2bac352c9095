"""The quality-speed benchmark's report: its targets beside their figures, the tables and a PNG of the front.

Repeats of a row are summarised by their median (column ``n``: how many). Speed ratios are of sentences/s on the same sentences in the
same batches (the inverse ratio of the times); BLEU is lowercased sacreBLEU 13a, the Multi30k convention.
"""

import re
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.pareto_record import ParetoRecord

#: The issue's targets (#49), checked by :func:`target_lines`.
INT8_TARGET = 1.3
FP32_TARGET = 1.0
SHORTLIST_SPEED_TARGET = 1.4
SHORTLIST_BLEU_TOLERANCE = 0.1
COVERAGE_TARGET = 0.99
#: The peer each of our precisions is compared with.
PEER_OF = {"int8": "CTranslate2 int8", "fp32": "CTranslate2 fp32"}
#: Issue #50's targets for a distilled student (int8 + shortlist, greedy) against its teacher at beam 4.
STUDENT_OVER_TEACHER_TARGET = 4.0
STUDENT_OVER_CT2_TARGET = 2.0
STUDENT_BLEU_TOLERANCE = 1.0
#: Fields summarised across repeats.
MEASURED = (
    "seconds", "sentences_per_second", "target_tokens", "tokens_per_second", "bleu", "bleu_cased", "chrf",
    "p50_ms", "p90_ms", "mean_ms",
)  # fmt: skip


@dataclass(frozen=True)
class Cell:
    """One system's summarised figures in one condition.

    Parameters
    ----------
    system, engine, precision : str
        As the rows name them.
    shortlist : bool
        Restricted output vocabulary.
    search : str
        ``greedy`` or ``beam 4``.
    threads : int
        Intra-op threads.
    mode : str
        ``throughput`` or ``latency``.
    values : dict of str to float
        Medians over repeats of the measured fields.
    repeats : int
        Rows summarised.

    Notes
    -----
    What the tables and the plot read; the JSON keeps every row.
    """

    system: str
    engine: str
    precision: str
    shortlist: bool
    search: str
    threads: int
    mode: str
    values: dict[str, float]
    repeats: int


def summarise(record: ParetoRecord) -> list[Cell]:
    """Group the record's rows by (system, search, threads, mode) and take medians.

    Parameters
    ----------
    record : ParetoRecord
        The record.

    Returns
    -------
    list of Cell
        In the order the rows first appear.

    Notes
    -----
    The median of two repeats is their mean.
    """
    groups: dict[tuple[str, str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for row in record.rows:
        groups[(row["system"], row["search"], row["threads"], row["mode"])].append(row)
    cells = []
    for (system, search, threads, mode), rows in groups.items():
        values = {
            field: statistics.median(row[field] for row in rows) for field in MEASURED if field in rows[0]
        }
        first = rows[0]
        cells.append(
            Cell(
                system,
                first["engine"],
                first["precision"],
                first["shortlist"],
                search,
                threads,
                mode,
                values,
                len(rows),
            )
        )
    return cells


def render_markdown(record: ParetoRecord) -> str:
    """The report: machine and runs, targets, throughput and latency tables, coverage, skipped systems.

    Parameters
    ----------
    record : ParetoRecord
        The record.

    Returns
    -------
    str
        Markdown.

    Notes
    -----
    Every figure names its CPU through the header: the record belongs to one machine.
    """
    cells = summarise(record)
    environment, settings = record.data["environment"], record.data["settings"]
    lines = ["# Quality-speed front (`python -m benchmarks.pareto`)", ""]
    lines += [
        f"- CPU: {environment['cpu']['summary']}; all flags: `{' '.join(environment['cpu']['isa_flags'])}`"
    ]
    lines += [f"- torch {environment['torch']}; allocator: {environment['allocator']}"]
    lines += [
        f"- model: `{settings['checkpoint']}`; {settings['sentences']} sentences of `{settings['source']}`"
    ]
    for index, run in enumerate(record.data["runs"]):
        lines += [f"- run {index}: {run['date_utc']}, commit {run['git_commit']}: `{run['command']}`"]
    lines += ["", "## Targets (issue #49)", "", *target_lines(cells, record.coverage), ""]
    lines += [f"## Throughput: batches of {settings['batch_size']}, every sentence", ""]
    lines += throughput_lines([cell for cell in cells if cell.mode == "throughput"])
    lines += ["", f"## Latency: one sentence at a time, {settings['latency_sentences']} sentences", ""]
    lines += latency_lines([cell for cell in cells if cell.mode == "latency"])
    measured = [(name, record.data.get(key)) for name, key in (("the shortlist", "coverage"),
                                                                  ("the student's shortlist", "student_coverage"))]  # fmt: skip
    if any(coverage is not None for _, coverage in measured):
        lines += ["", "## Shortlist step coverage", ""]
    for name, coverage in measured:
        if coverage is None:
            continue
        lines += [
            f"Greedy over the whole vocabulary (fp32): {name} held the chosen token on {coverage['covered']:,} "
            f"of {coverage['steps']:,} steps ({coverage['fraction']:.2%}), scoring {coverage['mean_shortlist_size']:.0f} "
            f"of {coverage['vocabulary']:,} pieces per sentence on average."
        ]
    if record.data["skipped"]:
        lines += ["", "## Not measured", ""]
        lines += [f"- {name}: {reason}" for name, reason in sorted(record.data["skipped"].items())]
    return "\n".join(lines) + "\n"


def _find(cells: list[Cell], system: str, search: str, threads: int, mode: str) -> Cell | None:
    """The cell of a system in a condition, if measured."""
    return next(
        (c for c in cells if (c.system, c.search, c.threads, c.mode) == (system, search, threads, mode)), None
    )


def _ratio_line(
    cells: list[Cell],
    label: str,
    ours: str,
    peer: str,
    field: str,
    better: Callable[[float, float], float],
    goal: float,
) -> list[str]:
    """One table row per (search, threads, mode) where both systems were measured."""
    rows = []
    conditions = sorted(
        {(c.search, c.threads, c.mode) for c in cells}, key=lambda item: (item[2], item[1], item[0])
    )
    for search, threads, mode in conditions:
        mine, theirs = _find(cells, ours, search, threads, mode), _find(cells, peer, search, threads, mode)
        if mine is None or theirs is None or field not in mine.values:
            continue
        ratio = better(mine.values[field], theirs.values[field])
        verdict = "met" if round(ratio, 2) >= goal else "**not met**"  # as printed
        rows.append(f"| {label} | {search}, {threads} thr | {ratio:.2f}x (goal {goal:g}x) | {verdict} |")
    return rows


def _best_thread_lines(cells: list[Cell], ours: str, peer: str, goal: float) -> list[str]:
    """Per search, each system at its fastest measured thread count against the other at its own."""
    rows = []
    for search in sorted({cell.search for cell in cells}, key=lambda label: label != "greedy"):
        mine = [c for c in cells if c.system == ours and c.search == search]
        theirs = [c for c in cells if c.system == peer and c.search == search]
        if len({c.threads for c in mine} | {c.threads for c in theirs}) < 2 or not mine or not theirs:
            continue  # one thread count: the per-condition row says it all
        best_mine = max(mine, key=lambda c: c.values["sentences_per_second"])
        best_theirs = max(theirs, key=lambda c: c.values["sentences_per_second"])
        ratio = best_mine.values["sentences_per_second"] / best_theirs.values["sentences_per_second"]
        verdict = "met" if round(ratio, 2) >= goal else "**not met**"  # as printed
        condition = f"{search}, best thread count ({best_mine.threads} / {best_theirs.threads} thr)"
        rows.append(
            f"| {ours} / {peer}, sentences/s | {condition} | {ratio:.2f}x (goal {goal:g}x) | {verdict} |"
        )
    return rows


def _workers_of(system: str) -> int:
    """Return the batches a row searched at once: N for a name ending in "(N workers)", else 1."""
    found = re.search(r" \((\d+) workers\)$", system)
    return int(found.group(1)) if found else 1


def _fastest_lines(cells: list[Cell], ours: str, peer: str, goal: float) -> list[str]:
    """Per search, each system's fastest row, its ``--workers`` rows (CTranslate2's inter_threads) included.

    Emitted only where a workers row was measured: it is then the comparison a user running either engine
    at its best on this machine gets.
    """
    rows = []
    for search in sorted({cell.search for cell in cells}, key=lambda label: label != "greedy"):
        family = [c for c in cells if c.search == search]
        mine = [c for c in family if re.sub(r" \(\d+ workers\)$", "", c.system) == ours]
        theirs = [c for c in family if re.sub(r" \(\d+ workers\)$", "", c.system) == peer]
        if not mine or not theirs or all(_workers_of(c.system) == 1 for c in mine + theirs):
            continue
        best_mine = max(mine, key=lambda c: c.values["sentences_per_second"])
        best_theirs = max(theirs, key=lambda c: c.values["sentences_per_second"])
        ratio = best_mine.values["sentences_per_second"] / best_theirs.values["sentences_per_second"]
        verdict = "met" if round(ratio, 2) >= goal else "**not met**"  # as printed

        def where(cell: Cell) -> str:
            workers = _workers_of(cell.system)
            return f"{cell.threads} thr" + (f" as {workers} workers" if workers > 1 else "")

        condition = f"{search}, each at its fastest ({where(best_mine)} / {where(best_theirs)})"
        rows.append(
            f"| {ours} / {peer}, sentences/s | {condition} | {ratio:.2f}x (goal {goal:g}x) | {verdict} |"
        )
    return rows


def target_lines(cells: list[Cell], coverage: dict[str, Any] | None) -> list[str]:
    """The targets table: each target, the condition, the figure and whether it is met.

    Parameters
    ----------
    cells : list of Cell
        Summarised figures.
    coverage : dict or None
        The shortlist's step coverage.

    Returns
    -------
    list of str
        Markdown table lines.

    Notes
    -----
    A target whose systems were not both measured has no row: the "Not measured" list says why. Besides each
    thread count, the speed targets compare each system at its own fastest thread count: on a 2-core machine
    one engine's threads can fight the hypervisor or each other (CTranslate2 at 2 threads ran greedy 3x slower
    than at 1 on the AMD EPYC of 2026-12-02, 6x on the AMX Xeon of 2026-12-04), and a user would run it at its
    best. With ``--workers`` rows, a last pair compares each engine's fastest row of all, our workers against
    CTranslate2's ``inter_threads``: on two cores, two batches of one thread each is how either is fastest.
    """

    def speed(mine: float, theirs: float) -> float:
        return mine / theirs

    def latency(mine: float, theirs: float) -> float:
        return theirs / mine  # >= 1 when ours is at or below theirs

    lines = ["| target | condition | figure | verdict |", "|---|---|---|---|"]
    throughput = [cell for cell in cells if cell.mode == "throughput"]
    for precision, goal in (("int8", INT8_TARGET), ("fp32", FP32_TARGET)):
        label = f"ours {precision} / {PEER_OF[precision]}, sentences/s"
        lines += _ratio_line(
            throughput, label, f"ours {precision}", PEER_OF[precision], "sentences_per_second", speed, goal
        )
    for precision, goal in (("int8", INT8_TARGET), ("fp32", FP32_TARGET)):
        lines += _best_thread_lines(throughput, f"ours {precision}", PEER_OF[precision], goal)
    for precision, goal in (("int8", INT8_TARGET), ("fp32", FP32_TARGET)):
        lines += _fastest_lines(throughput, f"ours {precision}", PEER_OF[precision], goal)
    label = "shortlist speed-up, fp32 greedy"
    greedy = [cell for cell in throughput if cell.search == "greedy"]
    lines += _ratio_line(
        greedy,
        label,
        "ours fp32 + shortlist",
        "ours fp32",
        "sentences_per_second",
        speed,
        SHORTLIST_SPEED_TARGET,
    )
    for cell in throughput:
        if cell.engine == "ours" and cell.shortlist and cell.threads == min(c.threads for c in throughput):
            full = _find(
                throughput, cell.system.removesuffix(" + shortlist"), cell.search, cell.threads, "throughput"
            )
            if full is not None:
                delta = cell.values["bleu"] - full.values["bleu"]
                verdict = "met" if abs(delta) <= SHORTLIST_BLEU_TOLERANCE + 1e-9 else "**not met**"
                lines.append(
                    f"| shortlist BLEU - full BLEU, {cell.precision} | {cell.search} | {delta:+.2f} "
                    f"(goal within {SHORTLIST_BLEU_TOLERANCE}) | {verdict} |"
                )
    if coverage is not None:
        verdict = "met" if coverage["fraction"] >= COVERAGE_TARGET else "**not met**"
        lines.append(
            f"| shortlist step coverage | greedy, fp32 | {coverage['fraction']:.2%} (goal 99%) | {verdict} |"
        )
    lines += student_target_lines(throughput)
    one_thread = [cell for cell in cells if cell.mode == "latency" and cell.threads == 1]
    for precision in ("int8", "fp32"):
        label = f"batch-1 p50, {PEER_OF[precision]} / ours {precision}"
        lines += _ratio_line(
            one_thread, label, f"ours {precision}", PEER_OF[precision], "p50_ms", latency, 1.0
        )
    return lines


def student_target_lines(throughput: list[Cell]) -> list[str]:
    """The distilled student's targets: its shipped search against the teacher's beam 4, per thread count.

    Parameters
    ----------
    throughput : list of Cell
        Throughput cells (a run with ``--student``).

    Returns
    -------
    list of str
        Markdown rows: student int8 + shortlist greedy against ours int8 and CTranslate2 int8 at beam 4
        (sentences/s), and its BLEU against the teacher in fp32 at beam 4; none without student rows.

    Notes
    -----
    Across searches on purpose: the student is meant to translate greedy, the teacher with its beam, and
    the question is what a user gains by shipping one instead of the other.
    """
    lines = []
    # Rows of ours with --workers compare with the teacher run the same way ("... (2 workers)").
    layouts = sorted({cell.system[len("student int8 + shortlist") :] for cell in throughput
                      if cell.system.startswith("student int8 + shortlist")})  # fmt: skip
    for threads in sorted({cell.threads for cell in throughput}):
        student = _find(throughput, "student int8 + shortlist", "greedy", threads, "throughput")
        if student is None:
            continue
        for layout in layouts:
            workers_student = _find(
                throughput, f"student int8 + shortlist{layout}", "greedy", threads, "throughput"
            )
            peers = [(f"ours int8{layout}", STUDENT_OVER_TEACHER_TARGET)]
            peers += [] if layout else [("CTranslate2 int8", STUDENT_OVER_CT2_TARGET)]
            for peer, goal in peers:
                teacher = _find(throughput, peer, "beam 4", threads, "throughput")
                if teacher is not None and workers_student is not None:
                    ratio = (
                        workers_student.values["sentences_per_second"]
                        / teacher.values["sentences_per_second"]
                    )
                    verdict = "met" if round(ratio, 2) >= goal else "**not met**"
                    lines.append(
                        f"| student int8 + shortlist{layout} greedy / teacher {peer} beam 4, sentences/s "
                        f"| {threads} thr | {ratio:.2f}x (goal {goal:g}x) | {verdict} |"
                    )
        teacher = _find(throughput, "ours fp32", "beam 4", threads, "throughput")
        if teacher is not None:
            delta = student.values["bleu"] - teacher.values["bleu"]
            verdict = "met" if delta >= -STUDENT_BLEU_TOLERANCE - 1e-9 else "**not met**"
            lines.append(
                f"| student BLEU - teacher fp32 beam 4 BLEU | {threads} thr | {delta:+.2f} (goal within "
                f"{STUDENT_BLEU_TOLERANCE:g}) | {verdict} |"
            )
    return lines


def throughput_lines(cells: list[Cell]) -> list[str]:
    """The throughput table, with each row's speed against CTranslate2 int8 in its condition.

    Parameters
    ----------
    cells : list of Cell
        Throughput cells.

    Returns
    -------
    list of str
        Markdown table lines.

    Notes
    -----
    Sorted by thread count, search, then speed.
    """
    lines = [
        "| threads | search | system | BLEU (lc) | BLEU | chrF | sentences/s | target tokens/s | vs CT2 int8 | n |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in sorted(
        cells, key=lambda c: (c.threads, c.search != "greedy", -c.values["sentences_per_second"])
    ):
        peer = _find(cells, "CTranslate2 int8", cell.search, cell.threads, "throughput")
        ratio = (
            f"{cell.values['sentences_per_second'] / peer.values['sentences_per_second']:.2f}x"
            if peer
            else "-"
        )
        values = cell.values
        lines.append(
            f"| {cell.threads} | {cell.search} | {cell.system} | {values['bleu']:.2f} | {values['bleu_cased']:.2f} | "
            f"{values['chrf']:.1f} | {values['sentences_per_second']:.1f} | {values['tokens_per_second']:,.0f} | {ratio} | "
            f"{cell.repeats} |"
        )
    return lines


def latency_lines(cells: list[Cell]) -> list[str]:
    """The latency table, with each row's p50 against CTranslate2 int8's in its condition.

    Parameters
    ----------
    cells : list of Cell
        Latency cells.

    Returns
    -------
    list of str
        Markdown table lines.

    Notes
    -----
    "CT2 int8 p50 / p50" is theirs over ours: above 1 means ours answers sooner.
    """
    lines = [
        "| threads | search | system | p50 ms | p90 ms | CT2 int8 p50 / p50 | n |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell in sorted(cells, key=lambda c: (c.threads, c.search != "greedy", c.values["p50_ms"])):
        peer = _find(cells, "CTranslate2 int8", cell.search, cell.threads, "latency")
        ratio = f"{peer.values['p50_ms'] / cell.values['p50_ms']:.2f}x" if peer else "-"
        lines.append(
            f"| {cell.threads} | {cell.search} | {cell.system} | {cell.values['p50_ms']:.1f} | "
            f"{cell.values['p90_ms']:.1f} | {ratio} | {cell.repeats} |"
        )
    return lines


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats in both speed and quality, fastest first.

    Parameters
    ----------
    points : list of (float, float)
        (speed, quality) pairs.

    Returns
    -------
    list of (float, float)
        The front, by decreasing speed (and so increasing quality).

    Notes
    -----
    A point is on the front when every faster point has lower quality; ties in speed keep the better one.
    """
    front: list[tuple[float, float]] = []
    for speed, quality in sorted(points, key=lambda point: (-point[0], -point[1])):
        if not front or quality > front[-1][1]:
            front.append((speed, quality))
    return front


def write_plot(record: ParetoRecord) -> None:
    """Draw BLEU against sentences/s (batch 32), one panel per thread count and search, front drawn.

    Parameters
    ----------
    record : ParetoRecord
        The record.

    Returns
    -------
    None

    Notes
    -----
    Written atomically to :attr:`ParetoRecord.plot_path` (matplotlib's Agg backend: no display needed).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from transformer.visualization.attention_plot import save_figure_atomically

    cells = [cell for cell in summarise(record) if cell.mode == "throughput"]
    conditions = sorted(
        {(cell.threads, cell.search) for cell in cells}, key=lambda item: (item[0], item[1] != "greedy")
    )
    if not conditions:
        return
    columns = 2 if len(conditions) > 1 else 1
    rows = (len(conditions) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, 4.5 * rows), squeeze=False)
    colours = {
        "ours": "tab:blue",
        "onnxruntime": "tab:purple",
        "ctranslate2": "tab:orange",
        "hf": "tab:green",
        "student": "tab:red",
    }
    for axis, (threads, search) in zip(axes.flat, conditions, strict=False):
        shown = [cell for cell in cells if (cell.threads, cell.search) == (threads, search)]
        for cell in shown:
            x, y = cell.values["sentences_per_second"], cell.values["bleu"]
            axis.scatter(x, y, color=colours[cell.engine], marker="s" if cell.shortlist else "o")
            axis.annotate(cell.system, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        front = pareto_front([(cell.values["sentences_per_second"], cell.values["bleu"]) for cell in shown])
        axis.plot([p[0] for p in front], [p[1] for p in front], color="grey", linestyle="--", linewidth=1)
        axis.set_title(f"{search}, {threads} thread{'s' if threads > 1 else ''}, batch 32")
        axis.set_xlabel("sentences / s")
        axis.set_ylabel("BLEU (lowercased)")
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(conditions) :]:
        axis.set_visible(False)
    figure.suptitle(record.data["environment"]["cpu"]["summary"], fontsize=9)
    figure.tight_layout()
    save_figure_atomically(figure, record.plot_path)
    plt.close(figure)


def write_report(record: ParetoRecord) -> None:
    """Write the Markdown report and the PNG beside the record.

    Parameters
    ----------
    record : ParetoRecord
        The record.

    Returns
    -------
    None

    Notes
    -----
    Both are rewritten whole after every row, so they always match the JSON.
    """
    from transformer.atomic_files import write_text_atomically

    write_text_atomically(record.markdown_path, render_markdown(record))
    write_plot(record)


def main(argv: list[str] | None = None) -> None:
    """Rewrite a record's Markdown report and PNG from its JSON: ``python -m benchmarks.pareto_report FILE``.

    Parameters
    ----------
    argv : list of str or None
        The record's path (None: ``sys.argv[1:]``).

    Returns
    -------
    None

    Notes
    -----
    Measures nothing and adds no run to the record: for a report whose rules changed after the run.
    """
    import argparse
    import json
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m benchmarks.pareto_report", description=main.__doc__)
    parser.add_argument("record", type=Path)
    path = parser.parse_args(argv).record
    write_report(ParetoRecord(path.absolute(), json.loads(path.read_text(encoding="utf-8"))))
    print(f"report: {path.with_suffix('.md')} and {path.with_suffix('.png')}")


if __name__ == "__main__":
    main()
