"""Compare decoding methods on one validation set: beam search, MBR and ensembles (issue #28).

    python -m benchmarks.compare_decoding --checkpoint runs/m30k-s1 --source VALID.en --reference VALID.de \
        --mbr 8 16 32 --ensemble runs/m30k-s2 runs/m30k-s3 runs/m30k-s4 \
        --output experiments/decoding-28/comparison.json

(from the repository root: a module of the ``benchmarks`` package).

Each row translates the sources with one method and records BLEU (sacreBLEU 13a, cased and lowercased),
chrF2 and seconds per sentence (wall clock, model loaded beforehand):

- ``beam 4``: each --checkpoint and --ensemble member alone (the baseline of every other row);
- ``MBR N (sampling, chrF)`` and ``MBR N (beam, chrF)`` for each N of --mbr and each --checkpoint;
  sampled candidates use epsilon sampling (epsilon 0.02, Freitag et al. 2023);
- ``ensemble of K (prob)``: the first checkpoint with the first K - 1 --ensemble members, for K = 2 and 4
  (as many as given), averaging probabilities; beam 4.

Each row's translations are kept beside the JSON (``sentences/``, named by their hash, as the experiments keep
theirs), and every MBR or ensemble row is tested against its baseline on the same sentences: sacreBLEU's
paired bootstrap test (1,000 resamples) of BLEU and of chrF. An MBR row's baseline is beam 4 with the same
model; an ensemble's is the best of its members alone (the harder comparison). With ``--against-previous``
each checkpoint's beam row is also tested against the previous checkpoint's (models trained on different
data, e.g. half the pairs, half plus back-translation, all the pairs).

Rows are written to the JSON file as they finish, and a rerun skips the rows already there: a run of hours
can be stopped and resumed. The report (Markdown, printed and written beside the JSON) lists each run that
added rows (its command, date, thread count and CPU) and names the run of every row: seconds compare only
within one run.
"""

import argparse
import dataclasses
import itertools
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import torch

from transformer.atomic_files import write_json_atomically, write_text_atomically
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_files import read_parallel_files
from transformer.decoding.translator import Translator
from transformer.device import describe_cpu
from transformer.evaluation.bleu import PAIRED_METRICS, paired_bootstrap_test, score_translations
from transformer.experiments.common.results import load_sentences, store_sentences

#: How this script runs, for the command its report records.
MODULE = "benchmarks.compare_decoding"
#: The baseline search of every row: the paper's beam size with the power length penalty of configs/multi30k.
BEAM_4 = DecodeConfig(beam_size=4, length_penalty=1.0, length_penalty_form="power")
#: Sentences translated before the clock starts.
WARM_UP_SENTENCES = 8


@dataclasses.dataclass(frozen=True)
class Method:
    """One row of the comparison: a name, the checkpoints it decodes with and its search.

    Parameters
    ----------
    name : str
        The row's label, also its key for resuming.
    checkpoints : tuple of str
        One checkpoint, or an ensemble.
    config : DecodeConfig
        The search.
    baselines : tuple of str
        Names of the rows it is tested against: the one with the highest BLEU is used (empty: a baseline
        itself).

    Notes
    -----
    Two rows with one name are one row: the name must say everything that changes the result.
    """

    name: str
    checkpoints: tuple[str, ...]
    config: DecodeConfig
    baselines: tuple[str, ...] = ()


def plan_methods(
    checkpoints: list[str], ensemble: list[str], mbr_sizes: list[int], against_previous: bool = False
) -> list[Method]:
    """List the rows to measure, baselines first.

    Parameters
    ----------
    checkpoints : list of str
        The models compared (the first one is MBR's and the ensembles' first member).
    ensemble : list of str
        Further models for the ensembles.
    mbr_sizes : list of int
        The N of the MBR rows.
    against_previous : bool
        Test each checkpoint's beam row against the previous checkpoint's (models trained on different
        data, listed in order: half the pairs, half plus back-translation, all the pairs).

    Returns
    -------
    list of Method
        The rows.

    Notes
    -----
    Each single model's beam row is the baseline its MBR and ensemble rows are read against.
    """
    singles = list(dict.fromkeys([*checkpoints, *ensemble]))  # a model listed twice is measured once
    ordered = list(dict.fromkeys(checkpoints)) if against_previous else []
    previous = {path: (beam_row_name(before),) for before, path in itertools.pairwise(ordered)}
    methods = [Method(beam_row_name(path), (path,), BEAM_4, previous.get(path, ())) for path in singles]
    for size in mbr_sizes:
        for path in dict.fromkeys(checkpoints):
            baseline = (beam_row_name(path),)
            sampled = dataclasses.replace(BEAM_4, mbr=size, mbr_candidates="sampling", epsilon=0.02)
            methods.append(
                Method(f"MBR {size} (sampling eps 0.02, chrF): {path}", (path,), sampled, baseline)
            )
            beam = dataclasses.replace(BEAM_4, mbr=size, mbr_candidates="beam")
            methods.append(Method(f"MBR {size} (beam n-best, chrF): {path}", (path,), beam, baseline))
    for size in (2, 4):
        if size - 1 <= len(ensemble):
            members = (checkpoints[0], *ensemble[: size - 1])
            name = f"ensemble of {size} (prob), beam 4: {' '.join(members)}"
            baselines = tuple(dict.fromkeys(beam_row_name(path) for path in members))
            methods.append(Method(name, members, BEAM_4, baselines))
    return methods


def beam_row_name(checkpoint: str) -> str:
    """Name the beam-4 row of one model alone.

    Parameters
    ----------
    checkpoint : str
        The model's directory, as given on the command line.

    Returns
    -------
    str
        ``"beam 4: CHECKPOINT"``.

    Notes
    -----
    The name is the row's key in the JSON and the handle other rows name as their baseline.
    """
    return f"beam 4: {checkpoint}"


def measure(
    method: Method, sources: list[str], references: list[str], device: str, experiment_dir: Path
) -> dict[str, Any]:
    """Translate with one method, score it and keep its translations.

    Parameters
    ----------
    method : Method
        The row.
    sources, references : list of str
        The validation set.
    device : str
        Where to translate.
    experiment_dir : Path
        Where the translations are kept (``sentences/`` below it).

    Returns
    -------
    dict
        The row: name, BLEU (cased and lowercased), chrF2, seconds per sentence, signature, the search, its
        baselines and the kept translations' path.

    Notes
    -----
    The clock starts after the models are loaded and have translated a few sentences untimed (the first
    calls pay for allocator growth and oneDNN kernel selection): loading is the same for every method.
    """
    translator = Translator.from_checkpoints(list(method.checkpoints), method.config, device)
    translator.translate(sources[:WARM_UP_SENTENCES])
    start = time.perf_counter()
    hypotheses = translator.translate(sources)
    seconds = time.perf_counter() - start
    cased = score_translations(hypotheses, references)
    lowercased = score_translations(hypotheses, references, lowercase=True)
    return {
        "name": method.name,
        "bleu": round(cased.bleu, 2),
        "bleu_lowercased": round(lowercased.bleu, 2),
        "chrf": round(cased.chrf, 2),
        "seconds_per_sentence": round(seconds / len(sources), 4),
        "bleu_signature": cased.bleu_signature,
        "search": dataclasses.asdict(method.config),
        "baselines": list(method.baselines),
        "hypotheses": store_sentences(experiment_dir, hypotheses),
    }


def paired_against_baseline(
    row: dict[str, Any], rows: list[dict[str, Any]], references: list[str], experiment_dir: Path
) -> dict[str, Any]:
    """Test a row against the best of its baselines on the same sentences, in BLEU and in chrF.

    Parameters
    ----------
    row : dict
        A measured row with ``baselines`` and ``hypotheses``.
    rows : list of dict
        Every measured row (its baselines among them).
    references : list of str
        The references both were scored on.
    experiment_dir : Path
        Where the translations are kept.

    Returns
    -------
    dict
        ``baseline`` (the row tested against) and, for ``"BLEU"`` and ``"chrF"``, the ``difference`` (row
        minus baseline) and the paired bootstrap ``p_value``.

    Notes
    -----
    The baseline is the candidate with the highest BLEU: for an ensemble, its best member alone, so a gain is
    not an artefact of averaging with a weaker model. The test reads the kept translations back (checked
    against their hash), so it can be run again from the committed files alone.
    """
    by_name = {candidate["name"]: candidate for candidate in rows}
    baseline = max((by_name[name] for name in row["baselines"]), key=lambda candidate: candidate["bleu"])
    variant_lines = load_sentences(experiment_dir, row["hypotheses"])
    baseline_lines = load_sentences(experiment_dir, baseline["hypotheses"])
    result: dict[str, Any] = {"baseline": baseline["name"]}
    for metric in PAIRED_METRICS:
        test = paired_bootstrap_test(baseline_lines, variant_lines, references, metric=metric)
        result[metric] = {"difference": round(test.difference, 2), "p_value": round(test.p_value, 6)}
    return result


def render_markdown(report: dict[str, Any]) -> str:
    """Format the report as a Markdown table with its command and machine.

    Parameters
    ----------
    report : dict
        The JSON report.

    Returns
    -------
    str
        The Markdown.

    Notes
    -----
    Seconds per sentence are only comparable between rows of one run (one machine, one load): each row
    names its run, and each run its command, date, thread count and CPU.
    """
    lines = []
    for number, run in enumerate(report["runs"], start=1):
        lines += [
            f"Run {number}: `{run['command']}` ({run['date']}, {run['threads']} threads, {run['cpu']})",
            "",
        ]
    lines += [
        "| method | BLEU | BLEU (lowercased) | chrF2 | s/sentence | run | against | BLEU diff. (p) "
        "| chrF diff. (p) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        paired = row.get("paired")
        tested = ["", "", ""]
        if paired:
            tested = [paired["baseline"], *(_difference(paired[metric]) for metric in PAIRED_METRICS)]
        lines.append(
            f"| {row['name']} | {row['bleu']} | {row['bleu_lowercased']} | {row['chrf']} | "
            f"{row['seconds_per_sentence']} | {row['run']} | {' | '.join(tested)} |"
        )
    lines += [
        "",
        "Paired tests: sacreBLEU's paired bootstrap resampling, 1,000 resamples, on the same sentences.",
    ]
    return "\n".join(lines) + "\n"


def _difference(test: dict[str, float]) -> str:
    """Format a paired test as ``+0.93 (p 0.004)``."""
    p_value = "p < 0.001" if test["p_value"] < 0.001 else f"p {test['p_value']:.3f}"
    return f"{test['difference']:+.2f} ({p_value})"


def load_report(path: Path) -> dict[str, Any]:
    """Read the JSON report to resume, or start an empty one.

    Parameters
    ----------
    path : Path
        The ``--output`` file; it need not exist.

    Returns
    -------
    dict
        The report, with ``rows`` and ``runs`` (empty for a new file).

    Notes
    -----
    A report written before runs were recorded kept only the last run's command, date, CPU and threads at
    its top level: it is read as one run that measured every row, which is all it can say. A file that is
    not such a report ends the script with one line naming it, before anything is measured or written.
    """
    if not path.exists():
        return {"rows": [], "runs": []}
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SystemExit(f"{path}: not a compare_decoding report ({error}); not replaced") from None
    if not isinstance(report, dict) or not isinstance(report.get("rows"), list):
        raise SystemExit(f"{path}: not a compare_decoding report (no list of rows); not replaced")
    if "runs" not in report:
        report["runs"] = [
            {key: report.pop(key) for key in ("command", "date", "cpu", "threads") if key in report}
        ]
        for row in report["rows"]:
            row.setdefault("run", 1)
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the comparison (see the module docstring).

    Parameters
    ----------
    argv : list of str or None
        Arguments; None reads ``sys.argv``.

    Returns
    -------
    int
        0.

    Notes
    -----
    Resumable: rows already in ``--output`` are kept and not measured again.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", nargs="+", required=True, help="models compared (first: MBR's)")
    parser.add_argument("--ensemble", nargs="*", default=[], help="further models for the ensemble rows")
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--mbr", nargs="*", type=int, default=[8, 16, 32], help="MBR candidate counts")
    parser.add_argument(
        "--against-previous",
        action="store_true",
        help="test each --checkpoint's beam row against the previous one's (paired bootstrap)",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", required=True, help="JSON file (Markdown written beside it)")
    args = parser.parse_args(argv)
    pairs = read_parallel_files(Path(args.source), Path(args.reference))[: args.limit]
    sources, references = [source for source, _ in pairs], [reference for _, reference in pairs]
    output = Path(args.output)
    report = load_report(output)
    report["sentences"] = len(sources)
    this_run = {
        "command": " ".join(["python", "-m", MODULE, *map(shlex.quote, argv or sys.argv[1:])]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": describe_cpu(),
        "threads": torch.get_num_threads(),
    }
    experiment_dir = output.parent
    report["references"] = store_sentences(experiment_dir, references)
    done = {row["name"] for row in report["rows"]}
    for method in plan_methods(args.checkpoint, args.ensemble, args.mbr, args.against_previous):
        if method.name in done:
            continue
        if this_run not in report["runs"]:  # a run that only re-reads finished rows is not recorded
            report["runs"].append(this_run)
        row = measure(method, sources, references, args.device, experiment_dir)
        report["rows"].append({**row, "run": len(report["runs"])})
        write_json_atomically(output, report)  # a finished row survives an interruption
        print(report["rows"][-1], flush=True)
    for row in report[
        "rows"
    ]:  # again each time (seconds): a new row may be a better baseline for an ensemble
        if row.get("baselines"):
            row["paired"] = paired_against_baseline(row, report["rows"], references, experiment_dir)
    markdown = render_markdown(report)
    write_json_atomically(output, report)
    write_text_atomically(output.with_suffix(".md"), markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
