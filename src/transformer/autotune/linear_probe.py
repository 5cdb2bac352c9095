"""Choose MKL's sgemm or oneDNN's packed linear for each fp32 product of a model, by timing both here."""

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from transformer.autotune.cache import ProbeCache
from transformer.autotune.decision import TuningDecision, describe_device
from transformer.autotune.machine import fingerprint_key, machine_fingerprint
from transformer.autotune.model_tuning import default_probe_cache
from transformer.autotune.timing import time_candidates
from transformer.model.fp32_kernels import (
    OneDNNLinear,
    onednn_linear_unavailable_reason,
    swap_fp32_linear_layers,
)
from transformer.model.transformer import Transformer

#: Values of ``fp32_kernels`` (``--fp32-kernels``): measure per product, or force one kernel everywhere.
FP32_KERNEL_CHOICES = ("auto", "mkl", "onednn")
#: Rows timed per role: a decoder step multiplies batch x beam rows (1 sentence greedy up to 32 sentences at
#: beam 4); the encoder (and cross-attention's keys and values) whole batches of source tokens.
PROBE_ROWS = {"decoder": (1, 4, 32, 128), "encoder": (256, 1024)}
#: oneDNN must be this much faster (geometric mean over the rows timed) to be picked: both are exact fp32,
#: so a tie keeps PyTorch's default.
REQUIRED_SPEEDUP = 1.05
CPU = torch.device("cpu")

#: Times one product shape: ``(in_features, out_features, rows) -> {rows: {"mkl": s, "onednn": s}}``.
LinearMeasure = Callable[[int, int, tuple[int, ...]], dict[str, dict[str, float]]]


def check_fp32_kernels(value: str, option: str = "fp32_kernels") -> None:
    """Refuse an unknown ``fp32_kernels`` value in one line naming the option.

    Parameters
    ----------
    value : str
        The value given.
    option : str
        How the caller spells the setting ("--fp32-kernels" on the command line).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        When ``value`` is not one of :data:`FP32_KERNEL_CHOICES`.

    Notes
    -----
    Checked before any model is loaded, so a typo costs nothing.
    """
    if value not in FP32_KERNEL_CHOICES:
        choices = ", ".join(FP32_KERNEL_CHOICES)
        raise ValueError(f"{option} {value!r} is not one of {choices}")


def measure_linear_seconds(
    in_features: int, out_features: int, rows: tuple[int, ...]
) -> dict[str, dict[str, float]]:
    """Time one fp32 product through both kernels at each row count.

    Parameters
    ----------
    in_features, out_features : int
        The weight's shape (transposed: ``(out_features, in_features)``).
    rows : tuple of int
        Row counts of the input to time.

    Returns
    -------
    dict of str to dict of str to float
        Per row count (as a string): best seconds of "mkl" (``F.linear``) and "onednn".

    Notes
    -----
    Candidates are interleaved and the minimum of a few rounds kept (:func:`time_candidates`), so load from
    other processes disturbs both alike; the weight is packed once, outside the timing, as the swap does.
    """
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(out_features, in_features, generator=generator)
    bias = torch.randn(out_features, generator=generator)
    packed = OneDNNLinear(weight, bias)
    seconds: dict[str, dict[str, float]] = {}
    with torch.inference_mode():
        for count in rows:
            hidden = torch.randn(count, in_features, generator=generator)
            workloads = {
                "mkl": lambda hidden=hidden: F.linear(hidden, weight, bias),
                "onednn": lambda hidden=hidden: packed(hidden),
            }
            seconds[str(count)] = time_candidates(workloads, CPU, rounds=5, budget_seconds=0.05)
    return seconds


def choose_linear_backend(seconds: dict[str, dict[str, float]]) -> str:
    """Pick the kernel of one product shape from measured times.

    Parameters
    ----------
    seconds : dict of str to dict of str to float
        From :func:`measure_linear_seconds`.

    Returns
    -------
    str
        "onednn" if the geometric mean of its speed-ups over MKL is at least :data:`REQUIRED_SPEEDUP`, else
        "mkl".

    Notes
    -----
    The geometric mean weighs each row count alike, so the 128-row time (the largest) does not drown the
    1-row one; a pure function, so the rule is tested without timing.
    """
    ratios = [value["mkl"] / value["onednn"] for value in seconds.values()]
    speedup = math.exp(sum(math.log(ratio) for ratio in ratios) / len(ratios))
    return "onednn" if speedup >= REQUIRED_SPEEDUP else "mkl"


def decide_linear_backend(
    in_features: int,
    out_features: int,
    role: str,
    cache: ProbeCache,
    measure: LinearMeasure | None = None,
) -> TuningDecision:
    """Resolve ``fp32_kernels: auto`` for one product shape on this machine.

    Parameters
    ----------
    in_features, out_features : int
        The product's weight shape.
    role : {"decoder", "encoder"}
        Which rows to time (:data:`PROBE_ROWS`).
    cache : ProbeCache
        Answers from earlier runs on this machine.
    measure : callable or None
        The probe; None runs :func:`measure_linear_seconds` (tests pass a fake one).

    Returns
    -------
    TuningDecision
        "mkl" or "onednn", with the times behind it.

    Notes
    -----
    Cached per machine (CPU model and flags, torch version, threads) and shape, as ``precision: auto`` is.
    """
    machine = machine_fingerprint(CPU)
    rows = PROBE_ROWS[role]
    key = fingerprint_key(
        machine, "fp32_linear", {"in": in_features, "out": out_features, "rows": list(rows)}
    )

    def probe() -> dict[str, object]:
        seconds = (measure or measure_linear_seconds)(in_features, out_features, rows)
        return {"backend": choose_linear_backend(seconds), "seconds": seconds}

    stored, provenance = cache.lookup_or_measure(key, machine, probe)
    seconds = stored["seconds"]
    backend = str(stored["backend"])
    timings = ", ".join(
        f"{count}: {value['mkl'] / value['onednn']:.2f}"
        for count, value in sorted(seconds.items(), key=lambda item: int(item[0]))
    )
    reason = (
        f"{backend} for {in_features} -> {out_features} ({role}; MKL/oneDNN time by rows {timings}) on "
        f"{describe_device(CPU)}{provenance}"
    )
    return TuningDecision(backend, reason, {}, provenance == " (cached)")


def prepare_fp32_kernels(
    model: Transformer,
    choice: str = "auto",
    cache: ProbeCache | None = None,
    measure: LinearMeasure | None = None,
) -> list[str]:
    """Route a float32 CPU model's linear products through the faster of MKL and oneDNN, in place.

    Parameters
    ----------
    model : Transformer
        A float32 model on the CPU, for inference (put in eval mode).
    choice : {"auto", "mkl", "onednn"}
        "auto" times each product shape (or reads the cache); "mkl" leaves the model as it is; "onednn"
        swaps every linear layer.
    cache : ProbeCache or None
        Where answers are kept (default: the user's cache directory).
    measure : callable or None
        The probe for "auto"; None times the real kernels.

    Returns
    -------
    list of str
        One line per distinct product decided (or why oneDNN is not used), for the log.

    Raises
    ------
    ValueError
        For an unknown ``choice``, or "onednn" where oneDNN's linear does not run (naming why).

    Notes
    -----
    oneDNN's capability is probed by running it (:func:`onednn_linear_unavailable_reason`); where it fails,
    "auto" keeps ``F.linear`` everywhere. Translations stay those of ``F.linear`` up to float32 summation
    order.
    """
    check_fp32_kernels(choice)
    if choice == "mkl":
        return ["fp32 kernels: mkl (F.linear) everywhere, as asked"]
    unavailable = onednn_linear_unavailable_reason()
    if unavailable is not None:
        if choice == "onednn":
            raise ValueError(f"fp32_kernels 'onednn': {unavailable}; use 'auto' or 'mkl'")
        return [f"fp32 kernels: mkl (F.linear) everywhere: {unavailable}"]
    if choice == "onednn":
        swap_fp32_linear_layers(model, lambda in_features, out_features, role: "onednn")
        return ["fp32 kernels: onednn everywhere, as asked"]
    if cache is None:
        cache = default_probe_cache()
    decisions: dict[tuple[int, int, str], TuningDecision] = {}

    def backend_for(in_features: int, out_features: int, role: str) -> str:
        shape = (in_features, out_features, role)
        if shape not in decisions:
            decisions[shape] = decide_linear_backend(in_features, out_features, role, cache, measure)
        return decisions[shape].value

    swap_fp32_linear_layers(model, backend_for)
    return [f"auto fp32 kernels: {decision.reason}" for decision in decisions.values()]
