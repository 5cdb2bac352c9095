"""Table 1's analysis of the measurements: log-log slopes and where attention stops beating recurrence."""

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from transformer.experiments.table1.flops import analytic_flops
from transformer.experiments.table1.settings import SLOPE_POINTS, Table1Settings


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
    """Fit the log-log slope of the positive points, on the ``last`` largest x only when given."""
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
