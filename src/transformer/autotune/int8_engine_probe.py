"""Choose the quantized engine (oneDNN or FBGEMM) that packs an int8 model's weights, by timing both here.

Which engine's int8 kernels decode faster is not a fact of the CPU's flags alone: oneDNN's ran 1.0-1.7x as fast
as FBGEMM's at decoding's shapes on an Intel AVX-512 VNNI Xeon (BENCHMARKS.md section 1b), FBGEMM's 1.4-2.1x
as fast on an AVX2-only AMD EPYC (section 1c), and on an AMD EPYC *with* AVX-512 VNNI, where the flags
pointed to oneDNN, FBGEMM's ran 1.7-2.6x as fast at one to four rows (a few-row call costs oneDNN about 25 us
against 14 us at d_model 256; geometric means over the Multi30k model's products 1.46x, 1.94x, 1.47x and 1.18x
at 1, 4, 32 and 128 rows). So ``precision: int8`` times both engines on the model's
own decoder products at a decoder's row counts, once per machine and shape set (cached like the other
probes), and packs every weight for the faster one.
"""

import math
import os
import warnings
from collections.abc import Callable, Sequence

import torch
from torch import nn

from transformer.autotune.cache import ProbeCache
from transformer.autotune.decision import TuningDecision, describe_device
from transformer.autotune.machine import fingerprint_key, machine_fingerprint
from transformer.autotune.model_tuning import default_probe_cache
from transformer.autotune.timing import time_candidates
from transformer.model.multihead_attention import MultiHeadAttention
from transformer.model.quantization import int8_kernels_have_vnni, int8_packing_engine, packing_engine
from transformer.model.transformer import Transformer

#: The quantized engines compared: oneDNN's kernels and FBGEMM's (PyTorch's "x86" engine).
INT8_ENGINES = ("onednn", "x86")
#: Rows of a decoder step: one sentence greedy, one at beam 4, 32 sentences greedy, 32 at beam 4.
PROBE_ROWS = (1, 4, 32, 128)
#: The other engine must be this much faster than the flags' choice (geometric mean) to replace it.
REQUIRED_SPEEDUP = 1.05
CPU = torch.device("cpu")

#: Set to "onednn" or "x86", this environment variable fixes the engine without timing (the test suite sets it,
#: so that two int8 translators in one run pack alike even when a busy machine keeps the probe's answer uncached).
ENGINE_VARIABLE = "TRANSFORMER_INT8_ENGINE"
#: Times products: ``(shapes, rows) -> {"IN->OUT@ROWS": {engine: seconds}}``.
Int8EngineMeasure = Callable[[Sequence[tuple[int, int]], tuple[int, ...]], dict[str, dict[str, float]]]


def decoder_product_shapes(model: Transformer) -> list[tuple[int, int]]:
    """List the distinct (in_features, out_features) of a Transformer decoder step's int8 products.

    Parameters
    ----------
    model : Transformer
        The float model about to be quantised.

    Returns
    -------
    list of (int, int)
        Sorted shapes: every linear layer of the decoder, self-attention's stacked q/k/v (the one product
        the int8 model runs for the three) and the output projection.

    Notes
    -----
    The shapes, not the weights, key the cache: two models of one shape share an answer.
    """
    shapes = {
        (module.in_features, module.out_features)
        for module in model.decoder.modules()
        if isinstance(module, nn.Linear)
    }
    for module in model.decoder.modules():
        if isinstance(module, MultiHeadAttention):
            stacked = module.q_proj.out_features + module.k_proj.out_features + module.v_proj.out_features
            shapes.add((module.q_proj.in_features, stacked))
    shapes.add((model.config.d_model, model.config.tgt_vocab_size))
    return sorted(shapes)


def available_int8_engines() -> list[str]:
    """List the engines of :data:`INT8_ENGINES` this PyTorch build has.

    Returns
    -------
    list of str
        In :data:`INT8_ENGINES` order.

    Notes
    -----
    x86 builds have both; other builds may have one (ARM's qnnpack is not compared here).
    """
    return [engine for engine in INT8_ENGINES if engine in torch.backends.quantized.supported_engines]


def measure_int8_engine_seconds(
    shapes: Sequence[tuple[int, int]], rows: tuple[int, ...]
) -> dict[str, dict[str, float]]:
    """Time ``quantized::linear_dynamic`` with weights packed by each engine, per shape and row count.

    Parameters
    ----------
    shapes : sequence of (int, int)
        (in_features, out_features) of each product.
    rows : tuple of int
        Row counts of the input.

    Returns
    -------
    dict of str to dict of str to float
        Per ``"IN->OUT@ROWS"``: best seconds of each available engine.

    Notes
    -----
    Candidates are interleaved, a few rounds each (:func:`time_candidates`), so load from other processes
    falls on both engines alike; the weights are random (the kernels' time does not depend on the values).
    """
    generator = torch.Generator().manual_seed(0)
    reduce_range = not int8_kernels_have_vnni()
    seconds: dict[str, dict[str, float]] = {}
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
        for in_features, out_features in shapes:
            weight = torch.randn(out_features, in_features, generator=generator)
            scales = (weight.abs().amax(dim=1) / 127).double()
            zero_points = torch.zeros(out_features, dtype=torch.long)
            quantized = torch.quantize_per_channel(weight, scales, zero_points, axis=0, dtype=torch.qint8)
            packed = {}
            for engine in available_int8_engines():
                with packing_engine(engine):
                    packed[engine] = torch.ops.quantized.linear_prepack(quantized, None)
            for count in rows:
                hidden = torch.randn(count, in_features, generator=generator)
                workloads = {
                    engine: _product(hidden, weights, reduce_range) for engine, weights in packed.items()
                }
                key = f"{in_features}->{out_features}@{count}"
                seconds[key] = time_candidates(workloads, CPU, rounds=5, budget_seconds=0.02)
    return seconds


def _product(hidden: torch.Tensor, weights: object, reduce_range: bool) -> Callable[[], object]:
    """One timed workload: the dynamic int8 product of ``hidden`` by a packed weight."""
    return lambda: torch.ops.quantized.linear_dynamic(hidden, weights, reduce_range)


def choose_int8_engine(seconds: dict[str, dict[str, float]], default: str) -> str:
    """Pick the engine from measured times: another engine replaces ``default`` only if clearly faster.

    Parameters
    ----------
    seconds : dict of str to dict of str to float
        From :func:`measure_int8_engine_seconds`.
    default : str
        The flags' choice (:func:`~transformer.model.quantization.int8_packing_engine`).

    Returns
    -------
    str
        The engine whose geometric-mean speed-up over ``default`` across every product and row count is at
        least :data:`REQUIRED_SPEEDUP`, the fastest such; else ``default``.

    Notes
    -----
    The geometric mean weighs each (product, rows) alike, so a slow large product does not drown the many
    small ones a decoder step runs; a pure function, so the rule is tested without timing.
    """
    engines = {engine for value in seconds.values() for engine in value}
    if default not in engines:
        return sorted(engines)[0] if engines else default
    best, best_speedup = default, REQUIRED_SPEEDUP
    for engine in sorted(engines - {default}):
        ratios = [value[default] / value[engine] for value in seconds.values() if engine in value]
        speedup = math.exp(sum(math.log(ratio) for ratio in ratios) / len(ratios)) if ratios else 0.0
        if speedup >= best_speedup:
            best, best_speedup = engine, speedup
    return best


def decide_int8_engine(
    model: Transformer, cache: ProbeCache | None = None, measure: Int8EngineMeasure | None = None
) -> TuningDecision:
    """Resolve which engine packs an int8 model's weights on this machine, timing both or reading the cache.

    Parameters
    ----------
    model : Transformer
        The float model about to be quantised (its shapes are timed).
    cache : ProbeCache or None
        Answers from earlier runs (default: the user's cache directory).
    measure : callable or None
        The probe; None runs :func:`measure_int8_engine_seconds` (tests pass a fake one).

    Returns
    -------
    TuningDecision
        The engine, and a line with the per-row geometric means behind it.

    Raises
    ------
    ValueError
        When :data:`ENGINE_VARIABLE` names an engine this build lacks.

    Notes
    -----
    With one engine in the build, that one, untimed; with :data:`ENGINE_VARIABLE` set, that one. Cached per
    machine (CPU model and flags, torch version, threads), shape set and what caps the kernels (oneDNN's ISA
    cap, ATen's CPU capability), so later runs agree; an answer measured on a busy machine is used but not
    stored, so another translator may measure again.
    """
    engines = available_int8_engines()
    default = int8_packing_engine()
    forced = os.environ.get(ENGINE_VARIABLE)
    if forced:
        if forced not in engines:
            raise ValueError(
                f"{ENGINE_VARIABLE}={forced!r}: not an int8 engine of this build ({', '.join(engines)})"
            )
        return TuningDecision(
            forced, f"{forced} packs the int8 weights, as {ENGINE_VARIABLE} says", {}, False
        )
    if len(engines) < 2:
        value = engines[0] if engines else default
        return TuningDecision(value, f"{value}: the only int8 engine of this PyTorch build", {}, False)
    cache = cache or default_probe_cache()
    machine = machine_fingerprint(CPU)
    shapes = decoder_product_shapes(model)
    caps = {
        "default": default,
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    key = fingerprint_key(
        machine,
        "int8_engine",
        {"shapes": [list(shape) for shape in shapes], "rows": list(PROBE_ROWS), **caps},
    )

    def probe() -> dict[str, object]:
        seconds = (measure or measure_int8_engine_seconds)(shapes, PROBE_ROWS)
        return {"engine": choose_int8_engine(seconds, default), "seconds": seconds}

    stored, provenance = cache.lookup_or_measure(key, machine, probe)
    engine = str(stored["engine"])
    other = next(name for name in engines if name != engine)
    by_rows = []
    for count in PROBE_ROWS:
        ratios = [
            value[other] / value[engine]
            for name, value in stored["seconds"].items()
            if name.endswith(f"@{count}") and engine in value and other in value
        ]
        if ratios:
            by_rows.append(f"{count}: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}")
    reason = (
        f"{engine} packs the int8 weights ({other}/{engine} time by rows {', '.join(by_rows)}; the CPU's "
        f"flags alone say {default}) on {describe_device(CPU)}{provenance}"
    )
    return TuningDecision(engine, reason, {}, provenance == " (cached)")
