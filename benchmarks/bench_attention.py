"""Attention forward+backward time and peak memory against sequence length: fused path vs explicit formula.

Ours is ``transformer.scaled_dot_product_attention(q, k, v, need_weights=False)``, which calls PyTorch's
fused kernel; the baseline is the explicit ``softmax(Q K^T / sqrt(d_k)) V``, which materialises the
(length x length) score and probability matrices and keeps them for the backward pass. The fused path must
keep memory linear in length.

Peak memory is measured honestly on the CPU, where PyTorch keeps no allocation statistics: each
(implementation, length) runs in a fresh Python process (this module with ``--worker``), so no other length's
memory is cached in its allocator. The worker warms the kernels up on a tiny input, allocates Q, K, V and the
output gradient, resets the kernel's peak resident set size to the current one (``/proc/self/clear_refs``),
runs one forward+backward, and reports the peak (``VmHWM`` in ``/proc/self/status``) minus the resident size
before the pass. That is everything the pass needed (saved activations, temporaries, gradients), as the
operating system saw it. Then it times further forward+backward passes. (``ru_maxrss`` is no good here: a
child process forked from the large benchmark process inherits the parent's peak.)
"""

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from benchmarks.bench_common import Section
from benchmarks.bench_settings import Settings
from benchmarks.bench_worker import read_status_bytes, reset_peak_rss, run_json_worker
from transformer.model.scaled_dot_product_attention import scaled_dot_product_attention

IMPLEMENTATIONS = ("ours (fused)", "explicit softmax(QK^T)V")
WORKER_TIMEOUT_SECONDS = 600
#: Largest growth exponent still called linear: constant overheads and page rounding bend short lengths.
LINEAR_EXPONENT_LIMIT = 1.3
SAMPLE_SECONDS = 0.05


def explicit_attention(query: Tensor, key: Tensor, value: Tensor) -> Tensor:
    """softmax(Q K^T / sqrt(d_k)) V written out: (batch, heads, length, head_dim) each -> same shape."""
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))  # (b, h, len, len)
    return torch.matmul(torch.softmax(scores, dim=-1), value)


def fused_attention(query: Tensor, key: Tensor, value: Tensor) -> Tensor:
    """Our attention on its fused path (no weights requested)."""
    output, _ = scaled_dot_product_attention(query, key, value, need_weights=False)
    return output


ATTENTION_FUNCTIONS: dict[str, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
    IMPLEMENTATIONS[0]: fused_attention,
    IMPLEMENTATIONS[1]: explicit_attention,
}


def run_worker(
    implementation: str, length: int, batch: int, heads: int, head_dim: int, repeats: int
) -> dict[str, Any]:
    """Measure one (implementation, length) in this process; see the module docstring for the method.

    Parameters
    ----------
    implementation : str
        A key of ``ATTENTION_FUNCTIONS``.
    length : int
        Query and key length.
    batch, heads, head_dim : int
        The rest of the (batch, heads, length, head_dim) shape of Q, K and V.
    repeats : int
        Timed forward+backward passes after the memory measurement.

    Returns
    -------
    dict
        ``peak_increase_bytes``, ``baseline_rss_bytes``, ``samples_seconds`` (seconds per pass) and
        ``passes_per_sample`` (passes averaged in each sample, enough to last about 50 ms).

    Notes
    -----
    Should run in a fresh process, so that no memory freed by an earlier, larger pass is reused. Linux only
    (reads /proc/self).
    """
    attend = ATTENTION_FUNCTIONS[implementation]
    torch.manual_seed(0)

    def forward_backward(inputs: list[Tensor], output_grad: Tensor) -> None:
        for tensor in inputs:
            tensor.grad = None
        attend(*inputs).backward(output_grad)

    # Warm-up on a tiny input: loads the kernels and their libraries without raising the peak noticeably.
    tiny = [torch.randn(1, 1, 8, head_dim, requires_grad=True) for _ in range(3)]
    forward_backward(tiny, torch.randn(1, 1, 8, head_dim))
    inputs = [torch.randn(batch, heads, length, head_dim, requires_grad=True) for _ in range(3)]
    output_grad = torch.randn(batch, heads, length, head_dim)
    baseline = read_status_bytes("VmRSS")
    reset_peak_rss()
    forward_backward(inputs, output_grad)
    peak_increase = read_status_bytes("VmHWM") - baseline
    started = time.perf_counter()
    forward_backward(inputs, output_grad)
    # Short passes are repeated back to back within a sample, so timer and scheduler noise stay small.
    passes = max(1, math.ceil(SAMPLE_SECONDS / (time.perf_counter() - started)))
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(passes):
            forward_backward(inputs, output_grad)
        samples.append((time.perf_counter() - started) / passes)
    return {
        "peak_increase_bytes": peak_increase,
        "baseline_rss_bytes": baseline,
        "samples_seconds": samples,
        "passes_per_sample": passes,
    }


def measure_attention(section: Section, settings: Settings, threads: int) -> None:
    """Run every (implementation, length) in its own process; add rows, ratios and growth exponents.

    Parameters
    ----------
    section : Section
        Receives one row per (implementation, length) and a note per implementation on memory growth.
    settings : Settings
        Lengths, shape and repeats.
    threads : int
        Intra-op threads of the worker processes.

    Returns
    -------
    None

    Notes
    -----
    The growth exponent is the slope of log(peak increase) against log(length) between the two longest
    lengths: about 1 for memory linear in length, about 2 for quadratic.
    """
    shape = f"({settings.attention_batch}, {settings.attention_heads}, length, {settings.attention_head_dim})"
    section.method = (
        f"fp32 Q, K, V of shape {shape}, no mask, forward + backward (`out.backward(grad)`). Ours: "
        "`transformer.scaled_dot_product_attention(q, k, v, need_weights=False)` (the fused "
        "`F.scaled_dot_product_attention` path); explicit: `softmax(q @ k^T / sqrt(d)) @ v`. Peak memory: each "
        "(implementation, length) runs in a fresh process that warms up on a tiny input, allocates its inputs, "
        "resets its peak resident set size to the current one (`/proc/self/clear_refs`), runs one "
        "forward+backward and reports the peak (`VmHWM`) minus the resident size before the pass; the inputs "
        f"themselves are excluded. Time: median of {settings.attention_repeats} samples in the same process, "
        "each averaging enough back-to-back passes to last about 50 ms."
    )
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for length in settings.attention_lengths:
        for implementation in IMPLEMENTATIONS:
            results[implementation, length] = _run_in_subprocess(implementation, length, settings, threads)
    for (implementation, length), result in results.items():
        explicit = results[IMPLEMENTATIONS[1], length]
        median = statistics.median(result["samples_seconds"])
        section.rows.append(
            {
                "implementation": implementation,
                "length": length,
                "median_seconds": median,
                "peak_increase_mib": result["peak_increase_bytes"] / 2**20,
                "score_matrix_mib": settings.attention_batch
                * settings.attention_heads
                * length
                * length
                * 4
                / 2**20,
                "time_over_explicit": median / statistics.median(explicit["samples_seconds"]),
                "memory_over_explicit": _ratio(
                    result["peak_increase_bytes"], explicit["peak_increase_bytes"]
                ),
                "repeats": len(result["samples_seconds"]),
                "passes_per_sample": result["passes_per_sample"],
                "samples_seconds": result["samples_seconds"],
                "baseline_rss_mib": result["baseline_rss_bytes"] / 2**20,
            }
        )
    lengths = sorted(settings.attention_lengths)
    for implementation in IMPLEMENTATIONS:
        exponent = _growth_exponent(results, implementation, lengths[-2:]) if len(lengths) > 1 else None
        described = "n/a" if exponent is None else f"{exponent:.2f}"
        section.notes.append(
            f"{implementation}: peak memory grows as length^{described} between lengths {lengths[-2:]} "
            "(1 = linear, 2 = quadratic)."
        )
        section.summary[f"memory_growth_exponent[{implementation}]"] = exponent
    fused_exponent = section.summary[f"memory_growth_exponent[{IMPLEMENTATIONS[0]}]"]
    if fused_exponent is not None:
        linear = fused_exponent <= LINEAR_EXPONENT_LIMIT
        section.summary["fused_memory_linear"] = linear
        section.notes.append(
            f"Fused path memory linear in length (exponent <= {LINEAR_EXPONENT_LIMIT}): "
            + ("yes." if linear else "**NO**.")
        )


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def _growth_exponent(
    results: dict[tuple[str, int], dict[str, Any]], implementation: str, lengths: list[int]
) -> float | None:
    short, long = (results[implementation, length]["peak_increase_bytes"] for length in lengths)
    if short <= 0 or long <= 0:
        return None
    return math.log(long / short) / math.log(lengths[1] / lengths[0])


def _run_in_subprocess(implementation: str, length: int, settings: Settings, threads: int) -> dict[str, Any]:
    arguments: dict[str, object] = {
        "worker": implementation,
        "length": length,
        "batch": settings.attention_batch,
        "heads": settings.attention_heads,
        "head-dim": settings.attention_head_dim,
        "repeats": settings.attention_repeats,
        "threads": threads,
    }
    result: dict[str, Any] = run_json_worker(
        __name__, arguments, WORKER_TIMEOUT_SECONDS, f"attention {implementation!r} at length {length}"
    )
    return result


def main() -> None:
    """Worker entry point: measure one (implementation, length) and print the result as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", required=True, choices=IMPLEMENTATIONS)
    parser.add_argument("--length", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--head-dim", type=int, required=True)
    parser.add_argument("--repeats", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    result = run_worker(args.worker, args.length, args.batch, args.heads, args.head_dim, args.repeats)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
