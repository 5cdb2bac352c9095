"""The ceiling: peak dense matmul throughput in fp32 and bf16, against which training is reported as MFU.

A square ``torch.mm`` of size n does 2 n^3 floating-point operations. The largest median over the sizes tried
is the peak used for model FLOP utilisation (MFU). bf16 runs on bf16 tensors directly (AMX on this machine),
as autocast's matmuls do.
"""

import math
from typing import Any

import torch

from benchmarks.bench_common import Section, time_interleaved, time_once

METHOD = (
    "`torch.mm(a, b, out=c)` on square random matrices, 2 n^3 FLOP per product. Each repeat times enough "
    "back-to-back products to last about 50 ms; the figure is the median over repeats; the peak of a dtype "
    "is its best size. Training MFU divides by the peak of the step's compute dtype."
)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
SAMPLE_SECONDS = 0.05


def measure_matmul(
    section: Section, sizes: list[int], repeats: int, precisions: tuple[str, ...] = tuple(DTYPES)
) -> dict[str, float]:
    """Measure matmul GFLOP/s per dtype and size; return the peak GFLOP/s per dtype.

    Parameters
    ----------
    section : Section
        Receives one row per (dtype, size) and a note with the peaks.
    sizes : list of int
        Matrix sizes n.
    repeats : int
        Timed repeats per size.
    precisions : tuple of str
        Among "fp32" and "bf16": bf16 only where the CPU runs it natively (``Settings.for_machine``).

    Returns
    -------
    dict of str to float
        ``{"fp32": peak GFLOP/s, "bf16": peak GFLOP/s}``.

    Notes
    -----
    Rows carry the median time per product and GFLOP/s; the peak row of each dtype is flagged.
    """
    section.method = METHOD
    peaks: dict[str, float] = {}
    for precision in precisions:
        dtype = DTYPES[precision]
        rows = [_measure_one(precision, dtype, size, repeats) for size in sizes]
        best = max(rows, key=lambda row: row["gflop_per_s"])
        best["peak"] = True
        peaks[precision] = best["gflop_per_s"]
        section.rows.extend(rows)
    section.summary["peak_gflop_per_s"] = peaks
    section.notes.append(
        "Peak: " + ", ".join(f"{precision} {value:,.0f} GFLOP/s" for precision, value in peaks.items())
    )
    return peaks


def _measure_one(precision: str, dtype: torch.dtype, size: int, repeats: int) -> dict[str, Any]:
    """Time square products of one size and dtype; return the report row."""
    left = torch.randn(size, size).to(dtype)
    right = torch.randn(size, size).to(dtype)
    out = torch.empty(size, size, dtype=dtype)
    torch.mm(left, right, out=out)  # first call: oneDNN/MKL set-up, not timed
    single = time_once(lambda: torch.mm(left, right, out=out))
    calls = max(1, math.ceil(SAMPLE_SECONDS / max(single, 1e-6)))

    def products() -> None:
        for _ in range(calls):
            torch.mm(left, right, out=out)

    timing = time_interleaved({"mm": products}, warmup=1, repeats=repeats)["mm"]
    return {
        "precision": precision,
        "n": size,
        "gflop_per_s": 2 * size**3 / (timing.median / calls) / 1e9,
        "products_per_repeat": calls,
        **timing.to_dict(),
        "peak": False,
    }
