"""The ceiling: peak dense matmul throughput in fp32, bf16 and int8, against which training and translation
are reported as a share of the peak (MFU).

A square ``torch.mm`` of size n does 2 n^3 floating-point operations. The largest median over the sizes tried
is the peak used for model FLOP utilisation (MFU). bf16 runs on bf16 tensors directly (AMX on this machine),
as autocast's matmuls do. int8 is the kernel int8 translation runs (``Int8Linear``: PyTorch's dynamic
quantized linear, int8 weights prepacked, activations quantised per call) on an (n, n) input and an (n, n)
weight, 2 n^3 operations, so its peak includes the activation quantisation that decoding pays too.
"""

import math
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.bench_common import Section, time_interleaved, time_once
from transformer.model.quantization import Int8Linear

METHOD = (
    "`torch.mm(a, b, out=c)` on square random matrices, 2 n^3 FLOP per product. Each repeat times enough "
    "back-to-back products to last about 50 ms; the figure is the median over repeats; the peak of a dtype "
    "is its best size. Training MFU divides by the peak of the step's compute dtype. int8: "
    "`Int8Linear` (the kernel of `--precision int8`) on an (n, n) float input with an (n, n) int8 weight, "
    "2 n^3 operations per call, the input's quantisation included."
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
        int8 is measured as well wherever PyTorch has a quantized CPU engine.

    Returns
    -------
    dict of str to float
        ``{"fp32": peak GFLOP/s, "bf16": peak GFLOP/s, "int8": peak GOP/s}`` for what was measured.

    Notes
    -----
    Rows carry the median time per product and GFLOP/s; the peak row of each dtype is flagged. An int8
    engine that fails (a torch build without one) is a skipped row with the error, not a failed suite.
    """
    section.method = METHOD
    peaks: dict[str, float] = {}
    measured = [*precisions, "int8"]
    for precision in measured:
        try:
            rows = [_measure_one(precision, size, repeats) for size in sizes]
        except RuntimeError as error:  # no quantized engine in this build or on this CPU
            section.skip(f"{precision} matmul", f"{type(error).__name__}: {error}")
            continue
        best = max(rows, key=lambda row: row["gflop_per_s"])
        best["peak"] = True
        peaks[precision] = best["gflop_per_s"]
        section.rows.extend(rows)
    section.summary["peak_gflop_per_s"] = peaks
    section.notes.append(
        "Peak: " + ", ".join(f"{precision} {value:,.0f} GFLOP/s" for precision, value in peaks.items())
    )
    return peaks


def _product(precision: str, size: int) -> Callable[[], object]:
    """A square product of one size in one precision, ready to call."""
    if precision == "int8":
        layer = Int8Linear(torch.randn(size, size), None)
        inputs = torch.randn(size, size)
        return lambda: layer(inputs)
    dtype = DTYPES[precision]
    left = torch.randn(size, size).to(dtype)
    right = torch.randn(size, size).to(dtype)
    out = torch.empty(size, size, dtype=dtype)
    return lambda: torch.mm(left, right, out=out)


def _measure_one(precision: str, size: int, repeats: int) -> dict[str, Any]:
    """Time square products of one size and precision; return the report row."""
    product = _product(precision, size)
    product()  # first call: oneDNN/MKL/FBGEMM set-up, not timed
    single = time_once(product)
    calls = max(1, math.ceil(SAMPLE_SECONDS / max(single, 1e-6)))

    def products() -> None:
        for _ in range(calls):
            product()

    timing = time_interleaved({"mm": products}, warmup=1, repeats=repeats)["mm"]
    return {
        "precision": precision,
        "n": size,
        "gflop_per_s": 2 * size**3 / (timing.median / calls) / 1e9,
        "products_per_repeat": calls,
        **timing.to_dict(),
        "peak": False,
    }
