"""Choose the training precision by timing fp32 against bf16 (or fp16) products at the model's shape."""

from collections.abc import Callable

import torch

from transformer.autotune.cache import ProbeCache
from transformer.autotune.decision import TuningDecision, describe_device
from transformer.autotune.machine import fingerprint_key, machine_fingerprint
from transformer.autotune.timing import time_candidates
from transformer.autotune.workload import ProbeShape, feed_forward_step
from transformer.device import cpu_has_native_bf16, describe_cpu

#: Reduced precision must be at least this much faster than fp32 to be picked: it costs a little accuracy.
REQUIRED_SPEEDUP = 1.1

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def reduced_precision_candidate(device: torch.device) -> str | None:
    """Name the reduced precision worth timing on a device, if any.

    Parameters
    ----------
    device : torch.device
        The training device.

    Returns
    -------
    str or None
        "bf16" on CUDA GPUs that support it and on CPUs with native bf16, "fp16" on older CUDA GPUs, None on
        CPUs without native bf16.

    Notes
    -----
    fp16 is never a CPU candidate: there is no gradient scaler on the CPU.
    """
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if cpu_has_native_bf16() else None


def measure_precision_seconds(
    shape: ProbeShape, device: torch.device, candidates: tuple[str, ...]
) -> dict[str, float]:
    """Time one feed-forward training step in each candidate precision.

    Parameters
    ----------
    shape : ProbeShape
        The model's widths and the rows to time.
    device : torch.device
        Where to time.
    candidates : tuple of str
        Precisions among "fp32", "bf16", "fp16".

    Returns
    -------
    dict of str to float
        Best seconds per candidate.

    Notes
    -----
    Forward under autocast, backward, fp32 weights: casts included, as training pays them.
    """
    workloads = {name: feed_forward_step(shape, device, AUTOCAST_DTYPES.get(name)) for name in candidates}
    return time_candidates(workloads, device)


def choose_precision(seconds: dict[str, float], reduced: str) -> str:
    """Pick fp32 or the reduced precision from measured times.

    Parameters
    ----------
    seconds : dict of str to float
        Best time of "fp32" and of ``reduced``.
    reduced : str
        "bf16" or "fp16".

    Returns
    -------
    str
        ``reduced`` if it is at least :data:`REQUIRED_SPEEDUP` times faster, else "fp32".

    Notes
    -----
    A pure function, so the decision rule is tested without timing anything.
    """
    return reduced if seconds["fp32"] >= REQUIRED_SPEEDUP * seconds[reduced] else "fp32"


def decide_precision(
    shape: ProbeShape,
    device: torch.device,
    cache: ProbeCache,
    measure: Callable[[ProbeShape, torch.device, tuple[str, ...]], dict[str, float]] | None = None,
) -> TuningDecision:
    """Resolve ``precision: auto`` for this machine and model shape.

    Parameters
    ----------
    shape : ProbeShape
        The model's widths and the probe's rows.
    device : torch.device
        The training device.
    cache : ProbeCache
        Answers from earlier runs on this machine.
    measure : callable or None
        The probe; None runs :func:`measure_precision_seconds` (tests pass a fake one).

    Returns
    -------
    TuningDecision
        "fp32", "bf16" or "fp16", with the times behind it.

    Notes
    -----
    The answer is cached per machine (CPU model and flags or GPU, torch version, threads) and shape.
    """
    reduced = reduced_precision_candidate(device)
    if reduced is None:
        return TuningDecision("fp32", f"fp32: no native bf16 on {describe_cpu()}", {}, cached=False)
    machine = machine_fingerprint(device)
    key = fingerprint_key(machine, "precision", shape.as_dict())

    def probe() -> dict[str, object]:
        seconds = (measure or measure_precision_seconds)(shape, device, ("fp32", reduced))
        return {"precision": choose_precision(seconds, reduced), "seconds": seconds}

    stored, provenance = cache.lookup_or_measure(key, machine, probe)
    seconds = {name: float(value) for name, value in stored["seconds"].items()}
    precision = str(stored["precision"])
    ratio = seconds["fp32"] / seconds[reduced]
    where = describe_device(device)
    reason = (
        f"{precision}: a {reduced} training product at d_model {shape.d_model} x d_ff {shape.d_ff} ran "
        f"{ratio:.2f}x the speed of fp32 ({1e3 * seconds[reduced]:.1f} ms against {1e3 * seconds['fp32']:.1f} ms) "
        f"on {where}{provenance}"
    )
    return TuningDecision(precision, reason, seconds, provenance == " (cached)")
