"""Log-log slopes, the attention/recurrence crossover, the Markdown report and the plots."""

import math
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from transformer.experiments.table1.flops import analytic_flops
from transformer.experiments.table1.settings import (
    FLOPS_PLOT_FILE,
    LAYER_KINDS,
    SLOPE_POINTS,
    TIME_PLOT_FILE,
    TIMED_KINDS,
    Table1Settings,
)


def fit_loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y against log x.

    Parameters
    ----------
    xs : sequence of float
        Positive abscissae, at least two distinct.
    ys : sequence of float
        Positive ordinates, as many.

    Returns
    -------
    float
        The exponent p of the best fit y ~ c·x^p.

    Raises
    ------
    ValueError
        With fewer than two distinct x, unequal lengths or a non-positive value.

    Notes
    -----
    Ordinary least squares on the logarithms: the slope estimates the exponent of a cost such as Table 1's
    O(n^2 d) in n.
    """
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError("a slope needs at least two distinct points")
    if min(xs) <= 0 or min(ys) <= 0:
        raise ValueError("log-log slopes need positive values")
    log_x = [math.log(x) for x in xs]
    log_y = [math.log(y) for y in ys]
    mean_x, mean_y = statistics.fmean(log_x), statistics.fmean(log_y)
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in zip(log_x, log_y, strict=True))
    variance = sum((x - mean_x) ** 2 for x in log_x)
    return covariance / variance


def _slope(points: Iterable[tuple[float, float | None]], last: int | None = None) -> float | None:
    usable = sorted((x, y) for x, y in points if y is not None and y > 0)
    if last is not None:
        usable = usable[-last:]
    if len({x for x, _ in usable}) < 2:
        return None
    return fit_loglog_slope([x for x, _ in usable], [y for _, y in usable])


def point(records: Sequence[dict[str, Any]], layer: str, length: int, d_model: int) -> dict[str, Any] | None:
    """Find one point's record.

    Parameters
    ----------
    records : sequence of dict
        Measurement records.
    layer : str
        Layer kind.
    length : int
        n.
    d_model : int
        d.

    Returns
    -------
    dict or None
        The record, None when the grid has no such point.

    Notes
    -----
    Linear search: the grid has a few hundred points.
    """
    for record in records:
        if record["layer"] == layer and record["n"] == length and record["d"] == d_model:
            return record
    return None


def slopes(records: Sequence[dict[str, Any]], layer: str, settings: Table1Settings) -> dict[str, Any]:
    """Fit the log-log slopes of time and FLOPs in n (per d) and in d (at the reference n).

    Parameters
    ----------
    records : sequence of dict
        Measurement records.
    layer : str
        Layer kind.
    settings : Table1Settings
        Grid and reference length.

    Returns
    -------
    dict of str to Any
        ``time_n`` and ``flops_n`` (d -> slope or None), ``time_d`` and ``flops_d`` (slope or None).

    Notes
    -----
    Slopes in n use the :data:`SLOPE_POINTS` largest lengths measured (timed, for time; of the grid, for
    FLOPs), where fixed per-call costs matter least; slopes in d use every width at ``reference_length``.
    """
    mine = [record for record in records if record["layer"] == layer]
    time_n, flops_n = {}, {}
    for d_model in settings.widths:
        at_d = [record for record in mine if record["d"] == d_model]
        time_n[d_model] = _slope(((r["n"], r["seconds"]) for r in at_d), SLOPE_POINTS)
        flops_n[d_model] = _slope(((r["n"], r["flops"]) for r in at_d), SLOPE_POINTS)
    at_n = [record for record in mine if record["n"] == settings.reference_length]
    return {
        "time_n": time_n,
        "flops_n": flops_n,
        "time_d": _slope((r["d"], r["seconds"]) for r in at_n),
        "flops_d": _slope((r["d"], r["flops"]) for r in at_n),
    }


def flops_crossover(d_model: int, settings: Table1Settings) -> int:
    """Find the largest n at which self-attention needs fewer FLOPs than the LSTM, trying every n.

    Parameters
    ----------
    d_model : int
        d.
    settings : Table1Settings
        The batch and the other layer settings of :func:`~transformer.experiments.table1.flops.analytic_flops`.

    Returns
    -------
    int
        The largest length n (every integer tried, not only the timed grid's powers of two) where
        attention's forward+backward FLOPs are below the LSTM's.

    Notes
    -----
    Issue #29: on the power-of-two grid the last length with fewer attention FLOPs is n = d, which reads as
    the paper's "n < d"; on every n it is 2d - 1, since with the projections counted attention's
    24nd^2 + 12n^2 d first reaches the LSTM's 48nd^2 - 8d^2 at n = 2d. The paper's n < d compares the score
    and value products alone (n^2 d against n d^2).
    """
    length = 1
    while analytic_flops("self_attention", length + 1, d_model, settings) < analytic_flops(
        "recurrent", length + 1, d_model, settings
    ):
        length += 1
    return length


def crossover(records: Sequence[dict[str, Any]], d_model: int, settings: Table1Settings) -> dict[str, Any]:
    """Where self-attention stops being cheaper than the LSTM at one width.

    Parameters
    ----------
    records : sequence of dict
        Measurement records.
    d_model : int
        d.
    settings : Table1Settings
        The lengths.

    Returns
    -------
    dict of str to Any
        ``time_faster`` and ``time_slower`` (lengths, both timed, where attention's forward+backward is
        faster / slower), ``time_largest`` (the largest faster one or None), ``flops_largest`` (the largest
        length where attention needs fewer FLOPs, or None) and ``paper`` (the largest grid length below d).

    Notes
    -----
    The paper's "self-attention layers are faster than recurrent layers when the sequence length n is
    smaller than the representation dimensionality d" compares n²·d with n·d²; counting the projections,
    attention's 24nd² + 12n²d FLOPs beat the LSTM's 48nd² while n < 2d.
    """
    faster: list[int] = []
    slower: list[int] = []
    fewer: list[int] = []
    for length in settings.lengths:
        attention = point(records, "self_attention", length, d_model)
        recurrent = point(records, "recurrent", length, d_model)
        if attention is None or recurrent is None:
            continue
        if attention["flops"] < recurrent["flops"]:
            fewer.append(length)
        if attention["seconds"] is not None and recurrent["seconds"] is not None:
            (faster if attention["seconds"] < recurrent["seconds"] else slower).append(length)
    below_d = [length for length in settings.lengths if length < d_model]
    return {
        "time_faster": faster,
        "time_slower": slower,
        "time_largest": max(faster) if faster else None,
        "flops_largest": max(fewer) if fewer else None,
        "paper": max(below_d) if below_d else None,
    }


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
        :func:`measure_structure`'s results.
    recurrent_check : (int, int)
        :func:`check_recurrent_formula`'s counted and analytic LSTM FLOPs.
    elapsed_seconds : float
        Wall-clock time of the whole measurement.

    Returns
    -------
    str
        Markdown.

    Notes
    -----
    Four tables (complexity, sequential operations and path length, crossover, skipped points) and the
    methods, so the file stands on its own in EXPERIMENTS.md.
    """
    first = records[0] if records else {}
    widths = " / ".join(str(d) for d in settings.widths)
    n_ref, d_ref = settings.reference_length, settings.reference_width
    lines = [
        "# Table 1, measured",
        "",
        f"Scale `{scale}`: n in {{{', '.join(str(n) for n in settings.lengths)}}}, d in "
        f"{{{', '.join(str(d) for d in settings.widths)}}}, "
        f"batch {settings.batch}, {settings.num_heads} heads, window r = {settings.window}, kernel k = "
        f"{settings.kernel}. Device `{first.get('device', '-')}` ({first.get('machine', '-')}, "
        f"{first.get('threads', '-')} threads), torch {torch.__version__}; {elapsed_seconds / 60:.1f} minutes.",
        "",
        "## Complexity per layer",
        "",
        f"Slopes of log(time) and log(FLOPs) against log(n) at d = {widths} (fitted on the {SLOPE_POINTS} "
        f"largest n measured) and against log(d) at n = {n_ref}; FLOPs (forward+backward) and activation "
        f"memory kept for backward at n = {n_ref}, d = {d_ref}.",
        "",
        "| Layer type | Paper: complexity | Paper: exponents of n, d | Time slope in n | FLOP slope in n "
        "| Time slope in d | FLOP slope in d | FLOPs | Time | Memory |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in LAYER_KINDS:
        if not kind.timed:
            continue
        fitted = slopes(records, kind.name, settings)
        reference = point(records, kind.name, n_ref, d_ref) or {}
        cells = [
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
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Sequential operations and maximum path length",
        "",
        f"Measured at n = {settings.path_length}, d = {settings.path_width}. Path length: layers stacked (for "
        "the LSTM, recurrent steps within one layer) before output position n - 1 gets a non-zero gradient "
        "from input position 0. Sequential operations: depth of one layer's autograd graph (nodes that must "
        f"run one after another) at n = {settings.path_length // 2} and n = {settings.path_length}; the LSTM "
        "is unrolled into cell steps, since its fused kernel is a single node.",
        "",
        "| Layer type | Paper: sequential ops | Measured sequential ops | Graph depth (n/2, n) "
        "| Paper: max path length | Measured path length | Expected |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in LAYER_KINDS:
        found = structure[kind.name]
        sequential = (
            "O(1)"
            if found["sequential"] == 1
            else f"O(n): +{found['depth_per_position']:.3g} nodes per position"
        )
        cells = [
            kind.label,
            kind.sequential,
            sequential,
            f"{found['depth_short']}, {found['depth_long']}",
            kind.path,
            f"{found['path'] if found['path'] is not None else 'not connected'} {found['path_unit']}",
            str(found["path_expected"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Where self-attention stops being cheaper than recurrence",
        "",
        "Self-attention against the LSTM, forward+backward. The paper: self-attention is faster when n < d.",
        "",
        "| d | Paper: largest n < d | Largest n with attention faster (time) | n where attention was slower "
        "| Largest n with fewer attention FLOPs (grid) | the same, every n |",
        "|---|---|---|---|---|---|",
    ]
    for d_model in settings.widths:
        found = crossover(records, d_model, settings)
        measured = [record for record in records if record["d"] == d_model and record["seconds"] is not None]
        longest = max((record["n"] for record in measured), default=None)
        largest = found["time_largest"]
        cells = [
            str(d_model),
            str(found["paper"] if found["paper"] is not None else "-"),
            "-" if largest is None else str(largest),
            ", ".join(str(n) for n in found["time_slower"]) or f"none up to n = {longest}",
            str(found["flops_largest"] if found["flops_largest"] is not None else "-"),
            str(flops_crossover(d_model, settings)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    counted, analytic = recurrent_check
    skipped: dict[tuple[str, int], list[int]] = {}
    reasons: dict[tuple[str, int], str] = {}
    for record in records:
        if record.get("skipped"):
            skipped.setdefault((record["layer"], record["d"]), []).append(record["n"])
            reasons.setdefault((record["layer"], record["d"]), record["skipped"])
    lines += [
        "",
        "## Skipped points",
        "",
    ]
    if skipped:
        lines += [
            "Timing stops for a layer at a width once one pass is predicted (from the last two lengths) or "
            f"measured to take over {settings.point_budget_seconds:g} s, or when the run's "
            f"{settings.total_budget_seconds / 60:.0f}-minute timing budget is spent; their FLOPs are still "
            "counted.",
            "",
            "| Layer | d | n not timed | Why |",
            "|---|---|---|---|",
        ]
        for (layer, d_model), lengths in skipped.items():
            lines.append(
                f"| {layer} | {d_model} | {', '.join(str(n) for n in lengths)} | {reasons[(layer, d_model)]} |"
            )
    else:
        lines.append("None: every point was timed.")
    lines += [
        "",
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
