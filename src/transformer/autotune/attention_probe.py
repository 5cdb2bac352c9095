"""Find the sequence length up to which the explicit attention formula beats the fused kernel here."""

from collections.abc import Callable

import torch

from transformer.autotune.cache import ProbeCache
from transformer.autotune.decision import TuningDecision, describe_device
from transformer.autotune.machine import fingerprint_key, machine_fingerprint
from transformer.autotune.timing import time_candidates
from transformer.model.scaled_dot_product_attention import scaled_dot_product_attention

#: Lengths timed, ascending; "auto" never uses the explicit formula beyond the last (its memory is quadratic).
PROBE_LENGTHS = (16, 32, 64, 128, 256, 512, 1024)
#: Query/key positions per timed call: the batch shrinks as the length grows.
PROBE_TOKENS = 2048
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def attention_step(
    implementation: str,
    length: int,
    num_heads: int,
    head_dim: int,
    dtype: torch.dtype,
    device: torch.device,
    backward: bool,
) -> Callable[[], None]:
    """Build one self-attention call (and its backward) at one length.

    Parameters
    ----------
    implementation : {"explicit", "fused"}
        Which path of :func:`scaled_dot_product_attention` to run.
    length : int
        Query and key length.
    num_heads, head_dim : int
        The model's heads and per-head width.
    dtype : torch.dtype
        Dtype of queries, keys and values (what the projections produce under autocast).
    device : torch.device
        Where it runs.
    backward : bool
        Also run the backward pass (training) or not (translation).

    Returns
    -------
    callable
        A workload taking no arguments.

    Notes
    -----
    The last eighth of the keys are padding (a key padding mask), as in real batches: the fused kernel
    takes another path with a mask than without one.
    """
    generator = torch.Generator().manual_seed(0)
    batch = max(1, PROBE_TOKENS // length)
    shape = (batch, num_heads, length, head_dim)
    query, key, value = (
        torch.randn(shape, generator=generator).to(device, dtype).requires_grad_(backward) for _ in range(3)
    )
    attend_mask = torch.ones(batch, 1, 1, length, dtype=torch.bool, device=device)
    attend_mask[..., length - max(1, length // 8) :] = False

    def step() -> None:
        with torch.set_grad_enabled(backward):
            output, _ = scaled_dot_product_attention(
                query, key, value, attend_mask, implementation=implementation
            )
            if backward:
                output.float().sum().backward()  # type: ignore[no-untyped-call]

    return step


def measure_attention_seconds(
    num_heads: int, head_dim: int, precision: str, device: torch.device, backward: bool
) -> dict[str, dict[str, float]]:
    """Time both attention paths at increasing lengths until the fused kernel wins.

    Parameters
    ----------
    num_heads, head_dim : int
        The model's heads and per-head width.
    precision : str
        "fp32", "bf16" or "fp16": the dtype attention runs in.
    device : torch.device
        Where to time.
    backward : bool
        Time forward and backward (training) or forward only (translation).

    Returns
    -------
    dict of str to dict of str to float
        Per length (as a string): best seconds of "explicit" and "fused".

    Notes
    -----
    Stops at the first length where the fused kernel is faster: longer sequences only favour it more
    (its cost grows more slowly and it never materialises the score matrix).
    """
    seconds: dict[str, dict[str, float]] = {}
    for length in PROBE_LENGTHS:
        workloads = {
            name: attention_step(name, length, num_heads, head_dim, DTYPES[precision], device, backward)
            for name in ("explicit", "fused")
        }
        seconds[str(length)] = time_candidates(workloads, device, rounds=3, budget_seconds=0.1)
        if seconds[str(length)]["fused"] < seconds[str(length)]["explicit"]:
            break
    return seconds


def choose_explicit_max_length(seconds: dict[str, dict[str, float]]) -> int:
    """Find the longest length up to which the explicit formula was faster at every timed length.

    Parameters
    ----------
    seconds : dict of str to dict of str to float
        From :func:`measure_attention_seconds`.

    Returns
    -------
    int
        0 when the fused kernel already wins at the shortest length (use it always).

    Notes
    -----
    A pure function, so the rule is tested without timing.
    """
    longest = 0
    for length in sorted(seconds, key=int):
        if seconds[length]["fused"] < seconds[length]["explicit"]:
            break
        longest = int(length)
    return longest


def decide_explicit_max_length(
    num_heads: int,
    head_dim: int,
    precision: str,
    device: torch.device,
    cache: ProbeCache,
    backward: bool = True,
    measure: Callable[..., dict[str, dict[str, float]]] | None = None,
) -> TuningDecision:
    """Resolve the length threshold of ``attention_implementation: auto`` for this machine and model.

    Parameters
    ----------
    num_heads, head_dim : int
        The model's heads and per-head query/key width.
    precision : str
        The precision attention runs in.
    device : torch.device
        Where the model runs.
    cache : ProbeCache
        Answers from earlier runs on this machine.
    backward : bool
        True for training (forward + backward), False for translation (forward only).
    measure : callable or None
        The probe; None runs :func:`measure_attention_seconds` (tests pass a fake one).

    Returns
    -------
    TuningDecision
        The threshold as a string ("0": always fused).

    Notes
    -----
    On the CPUs measured the explicit formula won up to a few hundred positions (3.5x in bf16 at 128 on
    the AMX machine); on GPUs the fused (flash / memory-efficient) kernels win from short lengths on. One
    constant chosen on a CPU was wrong for GPUs, hence the measurement.
    """
    machine = machine_fingerprint(device)
    shape = {"num_heads": num_heads, "head_dim": head_dim, "precision": precision, "backward": backward}
    key = fingerprint_key(machine, "attention", shape)

    def probe() -> dict[str, object]:
        seconds = (measure or measure_attention_seconds)(num_heads, head_dim, precision, device, backward)
        return {"explicit_max_length": choose_explicit_max_length(seconds), "seconds": seconds}

    stored, provenance = cache.lookup_or_measure(key, machine, probe)
    threshold = int(stored["explicit_max_length"])
    seconds = stored["seconds"]
    timings = ", ".join(
        f"{length}: {value['explicit'] / value['fused']:.2f}"
        for length, value in sorted(seconds.items(), key=lambda item: int(item[0]))
    )
    mode = "training" if backward else "inference"
    reason = (
        f"explicit attention up to length {threshold}, fused beyond ({mode}, {precision}; explicit/fused "
        f"time by length {timings}) on {describe_device(device)}{provenance}"
    )
    return TuningDecision(str(threshold), reason, {}, provenance == " (cached)")
