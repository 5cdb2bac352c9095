"""Table 1's report: the Markdown tables of ``table1.md``, built one table at a time, and the plots."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from transformer.experiments.common.markdown import markdown_table
from transformer.experiments.table1.analysis import crossover, flops_crossover, point, slopes
from transformer.experiments.table1.settings import (
    FLOPS_PLOT_FILE,
    LAYER_KINDS,
    SLOPE_POINTS,
    TIME_PLOT_FILE,
    TIMED_KINDS,
    Table1Settings,
)


def _format_slope(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _format_si(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _format_bytes(value: int | None) -> str:
    if value is None:
        return "-"
    for factor, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if value >= factor:
            return f"{value / factor:.3g} {unit}"
    return f"{value} B"


def _format_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} µs"


def complexity_table(records: Sequence[dict[str, Any]], settings: Table1Settings) -> list[str]:
    """Build the "Complexity per layer" section: fitted exponents and the costs at the reference point.

    Parameters
    ----------
    records : sequence of dict
        Measurement records.
    settings : Table1Settings
        The grid and its reference point.

    Returns
    -------
    list of str
        The section's lines: heading, what was fitted, and a row per timed layer type.

    Notes
    -----
    Table 1's first column made measurable: a cost O(n^a d^b) shows as a slope a in n and b in d of both
    time and FLOPs (:func:`~transformer.experiments.table1.analysis.slopes`).
    """
    widths = " / ".join(str(d) for d in settings.widths)
    n_ref, d_ref = settings.reference_length, settings.reference_width
    rows = []
    for kind in LAYER_KINDS:
        if not kind.timed:
            continue
        fitted = slopes(records, kind.name, settings)
        reference = point(records, kind.name, n_ref, d_ref) or {}
        rows.append(
            [
                kind.label,
                kind.complexity,
                kind.exponents,
                " / ".join(_format_slope(fitted["time_n"][d]) for d in settings.widths),
                " / ".join(_format_slope(fitted["flops_n"][d]) for d in settings.widths),
                _format_slope(fitted["time_d"]),
                _format_slope(fitted["flops_d"]),
                _format_si(reference.get("flops"), "FLOP"),
                _format_seconds(reference.get("seconds")),
                _format_bytes(reference.get("memory_bytes")),
            ]
        )
    headings = [
        "Layer type",
        "Paper: complexity",
        "Paper: exponents of n, d",
        "Time slope in n",
        "FLOP slope in n",
        "Time slope in d",
        "FLOP slope in d",
        "FLOPs",
        "Time",
        "Memory",
    ]
    return [
        "## Complexity per layer",
        "",
        f"Slopes of log(time) and log(FLOPs) against log(n) at d = {widths} (fitted on the {SLOPE_POINTS} "
        f"largest n measured) and against log(d) at n = {n_ref}; FLOPs (forward+backward) and activation "
        f"memory kept for backward at n = {n_ref}, d = {d_ref}.",
        "",
        *markdown_table(headings, rows),
    ]


def structure_table(structure: dict[str, dict[str, Any]], settings: Table1Settings) -> list[str]:
    """Build the "Sequential operations and maximum path length" section.

    Parameters
    ----------
    structure : dict
        :func:`~transformer.experiments.table1.paths.measure_structure`'s results, by layer type.
    settings : Table1Settings
        The length and width the structure was measured at.

    Returns
    -------
    list of str
        The section's lines: heading, how it was measured, and a row per layer type.

    Notes
    -----
    Table 1's second and third columns; the recurrent layer's sequential operations grow with n by a fixed
    number of graph nodes per position, which the table states.
    """
    rows = []
    for kind in LAYER_KINDS:
        found = structure[kind.name]
        sequential = (
            "O(1)"
            if found["sequential"] == 1
            else f"O(n): +{found['depth_per_position']:.3g} nodes per position"
        )
        rows.append(
            [
                kind.label,
                kind.sequential,
                sequential,
                f"{found['depth_short']}, {found['depth_long']}",
                kind.path,
                f"{found['path'] if found['path'] is not None else 'not connected'} {found['path_unit']}",
                str(found["path_expected"]),
            ]
        )
    headings = [
        "Layer type",
        "Paper: sequential ops",
        "Measured sequential ops",
        "Graph depth (n/2, n)",
        "Paper: max path length",
        "Measured path length",
        "Expected",
    ]
    return [
        "## Sequential operations and maximum path length",
        "",
        f"Measured at n = {settings.path_length}, d = {settings.path_width}. Path length: layers stacked (for "
        "the LSTM, recurrent steps within one layer) before output position n - 1 gets a non-zero gradient "
        "from input position 0. Sequential operations: depth of one layer's autograd graph (nodes that must "
        f"run one after another) at n = {settings.path_length // 2} and n = {settings.path_length}; the LSTM "
        "is unrolled into cell steps, since its fused kernel is a single node.",
        "",
        *markdown_table(headings, rows),
    ]


def crossover_table(records: Sequence[dict[str, Any]], settings: Table1Settings) -> list[str]:
    """Build the "Where self-attention stops being cheaper than recurrence" section, a row per width.

    Parameters
    ----------
    records : sequence of dict
        Measurement records.
    settings : Table1Settings
        The widths and lengths.

    Returns
    -------
    list of str
        The section's lines.

    Notes
    -----
    The paper's claim (section 4: faster when n < d) beside the measured crossover in time, in FLOPs on the
    grid and in FLOPs at every n (:func:`~transformer.experiments.table1.analysis.flops_crossover`).
    """
    rows = []
    for d_model in settings.widths:
        found = crossover(records, d_model, settings)
        measured = [record for record in records if record["d"] == d_model and record["seconds"] is not None]
        longest = max((record["n"] for record in measured), default=None)
        largest = found["time_largest"]
        rows.append(
            [
                str(d_model),
                str(found["paper"] if found["paper"] is not None else "-"),
                "-" if largest is None else str(largest),
                ", ".join(str(n) for n in found["time_slower"]) or f"none up to n = {longest}",
                str(found["flops_largest"] if found["flops_largest"] is not None else "-"),
                str(flops_crossover(d_model, settings)),
            ]
        )
    headings = [
        "d",
        "Paper: largest n < d",
        "Largest n with attention faster (time)",
        "n where attention was slower",
        "Largest n with fewer attention FLOPs (grid)",
        "the same, every n",
    ]
    return [
        "## Where self-attention stops being cheaper than recurrence",
        "",
        "Self-attention against the LSTM, forward+backward. The paper: self-attention is faster when n < d.",
        "",
        *markdown_table(headings, rows),
    ]


def skipped_table(records: Sequence[dict[str, Any]], settings: Table1Settings) -> list[str]:
    """Build the "Skipped points" section: the lengths not timed per layer and width, and why.

    Parameters
    ----------
    records : sequence of dict
        Measurement records; a skipped one has the reason in ``skipped``.
    settings : Table1Settings
        The time budgets, quoted in the explanation.

    Returns
    -------
    list of str
        The section's lines; "None: every point was timed." when nothing was skipped.

    Notes
    -----
    A skipped point still has its FLOPs, counted on the meta device; only its time is missing.
    """
    skipped: dict[tuple[str, int], list[int]] = {}
    reasons: dict[tuple[str, int], str] = {}
    for record in records:
        if record.get("skipped"):
            skipped.setdefault((record["layer"], record["d"]), []).append(record["n"])
            reasons.setdefault((record["layer"], record["d"]), record["skipped"])
    lines = ["## Skipped points", ""]
    if not skipped:
        return [*lines, "None: every point was timed."]
    rows = [
        [layer, d_model, ", ".join(str(n) for n in lengths), reasons[(layer, d_model)]]
        for (layer, d_model), lengths in skipped.items()
    ]
    return [
        *lines,
        "Timing stops for a layer at a width once one pass is predicted (from the last two lengths) or "
        f"measured to take over {settings.point_budget_seconds:g} s, or when the run's "
        f"{settings.total_budget_seconds / 60:.0f}-minute timing budget is spent; their FLOPs are still "
        "counted.",
        "",
        *markdown_table(["Layer", "d", "n not timed", "Why"], rows),
    ]


def method_notes(settings: Table1Settings, recurrent_check: tuple[int, int]) -> list[str]:
    """Write the "How it was measured" section.

    Parameters
    ----------
    settings : Table1Settings
        The repetitions and the structure's length and width.
    recurrent_check : (int, int)
        :func:`~transformer.experiments.table1.flops.check_recurrent_formula`'s counted and analytic LSTM
        FLOPs.

    Returns
    -------
    list of str
        The section's lines, ending with a blank line.

    Notes
    -----
    States every correction made to the FLOP counter's figures (fused kernels counting 0, the grouped
    convolution's weight gradient), so the table's numbers can be checked by hand.
    """
    counted, analytic = recurrent_check
    return [
        "## How it was measured",
        "",
        f"* Time: median of {settings.min_repeats} to {settings.max_repeats} forward+backward passes after one "
        "warm-up, `time.perf_counter` (with `torch.cuda.synchronize` on a GPU); the backward pass "
        "propagates a random gradient of the output to the input and the weights.",
        "* FLOPs: `torch.utils.flop_counter.FlopCounterMode` on the meta device (a multiply-add counts 2; "
        "element-wise work is not counted). Attention is counted on its explicit path, since the fused CPU "
        "kernel has no formula there and counts 0; the fused `nn.LSTM` kernel also counts 0, so the LSTM "
        f"has the analytic 48nd² - 8d², which the counter confirms on the unrolled cell ({counted} counted, "
        f"{analytic} analytic at n = {settings.path_length}, d = {settings.path_width}); the counter's "
        "formula for a grouped convolution's weight gradient counts it as ungrouped (d times too many for "
        "the depthwise layer), so that term is replaced by the forward count.",
        "* Memory: bytes of the distinct storages autograd saves for backward "
        "(`torch.autograd.graph.saved_tensors_hooks`), parameters excluded; on a GPU `measurements.jsonl` "
        "also has `cuda_peak_bytes`. The fused attention kernel saves O(n) statistics, not the n² weights "
        "(the window-masked variant also keeps its n x n boolean mask).",
        "* The window-masked restricted attention is the package's module with `build_window_mask`: the mask "
        "hides scores but all n² are still computed, so its time and FLOPs grow like full attention's; the "
        "banded variant multiplies each block of r queries with the 3r keys around it only (masked to the "
        "window) and shows the O(r·n·d) of the table.",
        "* Convolutions are causal (left-padded), as in the paper's references; the dilated stack uses "
        "dilations 1, k, k², ....",
        "",
    ]


def render_report(
    settings: Table1Settings,
    scale: str,
    records: Sequence[dict[str, Any]],
    structure: dict[str, dict[str, Any]],
    recurrent_check: tuple[int, int],
    elapsed_seconds: float,
) -> str:
    """Write ``table1.md``: the measured Table 1 beside the paper's.

    Parameters
    ----------
    settings : Table1Settings
        The grid.
    scale : str
        Its name.
    records : sequence of dict
        Measurement records.
    structure : dict
        :func:`~transformer.experiments.table1.paths.measure_structure`'s results.
    recurrent_check : (int, int)
        :func:`~transformer.experiments.table1.flops.check_recurrent_formula`'s counted and analytic LSTM
        FLOPs.
    elapsed_seconds : float
        Wall-clock time of the whole measurement.

    Returns
    -------
    str
        Markdown.

    Notes
    -----
    Four tables (complexity, sequential operations and path length, crossover, skipped points) and the
    methods, so the file stands on its own in EXPERIMENTS.md; each is built by its own function above.
    """
    first = records[0] if records else {}
    title = [
        "# Table 1, measured",
        "",
        f"Scale `{scale}`: n in {{{', '.join(str(n) for n in settings.lengths)}}}, d in "
        f"{{{', '.join(str(d) for d in settings.widths)}}}, "
        f"batch {settings.batch}, {settings.num_heads} heads, window r = {settings.window}, kernel k = "
        f"{settings.kernel}. Device `{first.get('device', '-')}` ({first.get('machine', '-')}, "
        f"{first.get('threads', '-')} threads), torch {torch.__version__}; {elapsed_seconds / 60:.1f} minutes.",
        "",
    ]
    sections = [
        complexity_table(records, settings),
        structure_table(structure, settings),
        crossover_table(records, settings),
        skipped_table(records, settings),
        method_notes(settings, recurrent_check),
    ]
    lines = title + sections[0]
    for section in sections[1:]:
        lines += ["", *section]
    return "\n".join(lines)


def plot_measurements(
    records: Sequence[dict[str, Any]], settings: Table1Settings, output_dir: Path
) -> list[Path]:
    """Plot time and FLOPs against n per layer type, log-log, one panel per d.

    Parameters
    ----------
    records : sequence of dict
        Measurement records.
    settings : Table1Settings
        The widths.
    output_dir : Path
        Where ``time_vs_n.png`` and ``flops_vs_n.png`` go.

    Returns
    -------
    list of Path
        The two figures.

    Notes
    -----
    Only timed points are drawn on the time plot; every point has FLOPs.
    """
    from matplotlib.figure import Figure

    from transformer.visualization.attention_plot import save_figure_atomically

    labels = {kind.name: kind.label for kind in LAYER_KINDS}
    paths = []
    for key, file_name, ylabel in (
        ("seconds", TIME_PLOT_FILE, "forward+backward seconds"),
        ("flops", FLOPS_PLOT_FILE, "forward+backward FLOPs"),
    ):
        figure = Figure(figsize=(4.5 * len(settings.widths), 4.2))
        axes = figure.subplots(1, len(settings.widths), squeeze=False)[0]
        for panel, d_model in zip(axes, settings.widths, strict=True):
            for name in TIMED_KINDS:
                found = sorted(
                    (record["n"], record[key])
                    for record in records
                    if record["layer"] == name and record["d"] == d_model and record[key] is not None
                )
                if found:
                    panel.plot(
                        [n for n, _ in found], [y for _, y in found], marker="o", ms=3, label=labels[name]
                    )
            panel.set_xscale("log", base=2)
            panel.set_yscale("log")
            panel.set(title=f"d = {d_model}", xlabel="sequence length n", ylabel=ylabel)
            panel.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=7)
        figure.tight_layout()
        path = output_dir / file_name
        save_figure_atomically(figure, path)
        paths.append(path)
    return paths
