"""Which int8 linear kernel in torch itself is fastest at decoding's shapes on this CPU (2026-11-23).

Times ``y = x W^T + b`` for the products a base-model decoding step makes (rows = sentences x beams; the
encoder's rows = sentences x source length) with every int8 route torch 2.13 offers, against float32 (through
``F.linear``, which is MKL's sgemm on x86, and through oneDNN's linear, the kernel torch.compile lowers to)
and bfloat16 (only where the CPU has native bf16: emulated, it takes seconds a product). Run from the repository root: ``python -m experiments.benchmarks.int8_kernels`` (2 threads;
tcmalloc preloaded if you like); it prints a Markdown table of median milliseconds and the relative error of
each int8 route.
"""

import statistics
import time
import warnings
from collections.abc import Callable

import torch
from torch import Tensor
from torch.nn import functional as F

from transformer.device import bf16_unsupported_reason, describe_cpu

#: (rows, in_features, out_features, what it is in the base model).
SHAPES = [
    (32, 512, 32000, "output projection, greedy"),
    (128, 512, 32000, "output projection, beam 4"),
    (32, 512, 1536, "stacked q/k/v, greedy"),
    (128, 512, 1536, "stacked q/k/v, beam 4"),
    (32, 512, 2048, "feed-forward in, greedy"),
    (32, 2048, 512, "feed-forward out, greedy"),
    (768, 512, 2048, "feed-forward in, encoder"),
]
REPEATS = 30


def median_milliseconds(function: Callable[[], Tensor]) -> float:
    """Median wall time of ``function`` over REPEATS calls after 5 warm-up calls."""
    for _ in range(5):
        function()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def int8_routes(hidden: Tensor, weight: Tensor, bias: Tensor) -> dict[str, Callable[[], Tensor]]:
    """Every int8 route of torch itself, each returning float32 ``hidden @ weight.T + bias``."""
    scales = weight.abs().amax(dim=1) / 127
    int8_weight = torch.round(weight / scales[:, None]).clamp(-127, 127).to(torch.int8)
    zero_points = torch.zeros(len(weight), dtype=torch.long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensor constructors are deprecated in this torch
        quantized = torch.quantize_per_channel(
            int8_weight.float() * scales[:, None], scales.double(), zero_points, 0, torch.qint8
        )
    routes: dict[str, Callable[[], Tensor]] = {}
    for engine in ("x86", "fbgemm", "onednn"):
        torch.backends.quantized.engine = engine
        packed = torch.ops.quantized.linear_prepack(quantized, bias)
        routes[f"quantized.linear_dynamic ({engine})"] = lambda packed=packed: (
            torch.ops.quantized.linear_dynamic(hidden, packed, False)
        )
    torch.backends.quantized.engine = "x86"
    onednn_weight = torch.ops.onednn.qlinear_prepack(int8_weight, None)

    def onednn_qlinear() -> Tensor:  # the x86 inductor lowering's kernel; activations quantised here
        low, high = torch.aminmax(hidden)
        low, high = low.clamp(max=0), high.clamp(min=0)
        scale = ((high - low) / 255).clamp_min(1e-8)
        zero_point = torch.round(-low / scale)
        quantized_hidden = torch.clamp(torch.round(hidden / scale) + zero_point, 0, 255).to(torch.uint8)
        return torch.ops.onednn.qlinear_pointwise.tensor(
            quantized_hidden, scale, zero_point.int(), onednn_weight, scales, zero_points, bias,
            1.0, 0, torch.float32, "none", [], "",
        )  # fmt: skip

    transposed_weight = int8_weight.t().contiguous()

    def int_mm() -> Tensor:  # symmetric per-row activations, int32 product, rescaled
        row_scales = hidden.abs().amax(dim=1, keepdim=True).clamp_min(1e-8) / 127
        quantized_hidden = torch.round(hidden / row_scales).to(torch.int8)
        return torch._int_mm(quantized_hidden, transposed_weight) * (row_scales * scales) + bias

    routes["onednn.qlinear_pointwise"] = onednn_qlinear
    routes["_int_mm (per-row activations)"] = int_mm
    routes["_weight_int8pack_mm (weight-only, bf16 input)"] = lambda: (
        torch._weight_int8pack_mm(hidden.bfloat16(), int8_weight, scales.bfloat16()).float() + bias
    )
    return routes


def time_shape(rows: int, in_features: int, out_features: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median milliseconds of every route at one shape, and the relative error of the int8 ones."""
    hidden = torch.randn(rows, in_features)
    weight = torch.randn(out_features, in_features) * in_features**-0.5
    bias = torch.randn(out_features) * 0.1
    expected = F.linear(hidden, weight, bias)
    bf16_hidden, bf16_weight, bf16_bias = hidden.bfloat16(), weight.bfloat16(), bias.bfloat16()
    timings = {
        "fp32 F.linear": median_milliseconds(lambda: F.linear(hidden, weight, bias)),
        "fp32 oneDNN linear": median_milliseconds(
            lambda: torch.ops.mkldnn._linear_pointwise(hidden, weight, bias, "none", [], "")
        ),
    }
    if bf16_unsupported_reason(torch.device("cpu")) is None:
        timings["bf16 F.linear"] = median_milliseconds(lambda: F.linear(bf16_hidden, bf16_weight, bf16_bias))
    errors = {}
    for name, route in int8_routes(hidden, weight, bias).items():
        timings[name] = median_milliseconds(route)
        errors[name] = ((route() - expected).norm() / expected.norm()).item()
    return timings, errors


def main() -> None:
    """Time every route at every shape and print the table."""
    torch.set_num_threads(2)
    torch.manual_seed(0)
    print(f"CPU: {describe_cpu()}; torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    for index, (rows, in_features, out_features, label) in enumerate(SHAPES):
        timings, errors = time_shape(rows, in_features, out_features)
        if index == 0:
            print("| shape | " + " | ".join(timings) + " |")
            print("|" + "---|" * (len(timings) + 1))
        cells = [
            f"{value:.3f}" + (f" ({errors[name]:.3f})" if name in errors else "")
            for name, value in timings.items()
        ]
        print(
            f"| {rows} x {in_features} -> {out_features}, {label} | " + " | ".join(cells) + " |", flush=True
        )
    print("\nMedian milliseconds per product (relative error of the int8 routes against float32).")


if __name__ == "__main__":
    main()
