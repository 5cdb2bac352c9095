"""Choose PyTorch's CPU thread count by timing the model's products with each candidate count."""

import math
import os
from collections.abc import Callable
from pathlib import Path

import torch

from transformer.autotune.cache import ProbeCache
from transformer.autotune.decision import TuningDecision, describe_device
from transformer.autotune.machine import fingerprint_key, machine_fingerprint
from transformer.autotune.timing import time_candidates
from transformer.autotune.workload import ProbeShape, feed_forward_step

#: More threads are kept if they are within this factor of the fastest count: the probe's products are
#: smaller than a training step's, and larger products scale better with threads.
THREADS_TOLERANCE = 1.05


def usable_cpus(cgroup_cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """Count the CPUs this process may actually run on.

    Parameters
    ----------
    cgroup_cpu_max : Path
        The cgroup v2 CPU quota file ("QUOTA PERIOD" or "max PERIOD").

    Returns
    -------
    int
        The smaller of the CPUs in the process's affinity mask and the container's CPU quota, at least 1.

    Notes
    -----
    PyTorch's default counts the host's physical cores, which in a container limited to 2 CPUs can be 32:
    32 OpenMP threads sharing 2 CPUs spin at every barrier and run several times slower than 2.
    """
    affinity = getattr(os, "sched_getaffinity", None)
    count = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    try:
        quota, period = cgroup_cpu_max.read_text(encoding="utf-8").split()[:2]
        if quota != "max":
            count = min(count, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    return max(1, count)


def candidate_thread_counts(usable: int, default: int) -> tuple[int, ...]:
    """Thread counts worth timing.

    Parameters
    ----------
    usable : int
        From :func:`usable_cpus`.
    default : int
        PyTorch's own choice (``torch.get_num_threads()`` before anything set it).

    Returns
    -------
    tuple of int
        1, the powers of two below ``usable``, ``usable`` itself and ``default`` if it fits, ascending.

    Notes
    -----
    Powers of two keep the probe short on many-core machines (7 counts at 64 cores).
    """
    counts = {1, usable}
    power = 2
    while power < usable:
        counts.add(power)
        power *= 2
    if default <= usable:
        counts.add(default)
    return tuple(sorted(counts))


def measure_thread_seconds(shape: ProbeShape, counts: tuple[int, ...]) -> dict[str, float]:
    """Time one fp32 feed-forward training step with each thread count.

    Parameters
    ----------
    shape : ProbeShape
        The model's widths and rows.
    counts : tuple of int
        Thread counts to time.

    Returns
    -------
    dict of str to float
        Best seconds per count (keys are the counts as strings, for JSON).

    Notes
    -----
    Each workload sets its own count before the step, since :func:`time_candidates` interleaves the
    candidates. The thread count in force before the call is restored afterwards, even on error: the probe
    only measures, and the caller applies the decision.
    """
    step = feed_forward_step(shape, torch.device("cpu"), None)
    before = torch.get_num_threads()

    def with_threads(count: int) -> Callable[[], None]:
        def run() -> None:
            torch.set_num_threads(count)
            step()

        return run

    try:
        return time_candidates({str(count): with_threads(count) for count in counts}, torch.device("cpu"))
    finally:
        torch.set_num_threads(before)


def choose_thread_count(seconds: dict[str, float]) -> int:
    """Pick the thread count from measured times.

    Parameters
    ----------
    seconds : dict of str to float
        Best time per thread count.

    Returns
    -------
    int
        The largest count within :data:`THREADS_TOLERANCE` of the fastest.

    Notes
    -----
    A pure function, so the rule is tested without timing.
    """
    fastest = min(seconds.values())
    return max(int(count) for count, value in seconds.items() if value <= THREADS_TOLERANCE * fastest)


def decide_threads(
    shape: ProbeShape,
    cache: ProbeCache,
    measure: Callable[[ProbeShape, tuple[int, ...]], dict[str, float]] | None = None,
    usable: int | None = None,
) -> TuningDecision:
    """Resolve ``threads: null`` (automatic) for this machine and model shape.

    Parameters
    ----------
    shape : ProbeShape
        The model's widths and the probe's rows.
    cache : ProbeCache
        Answers from earlier runs on this machine.
    measure : callable or None
        The probe; None runs :func:`measure_thread_seconds` (tests pass a fake one).
    usable : int or None
        CPUs available (default :func:`usable_cpus`).

    Returns
    -------
    TuningDecision
        The thread count as a string, with the times behind it.

    Notes
    -----
    Call before anything else sets the thread count: PyTorch's own default is one of the candidates.
    """
    usable = usable_cpus() if usable is None else usable
    counts = candidate_thread_counts(usable, torch.get_num_threads())
    if len(counts) == 1:
        return TuningDecision("1", "1 thread: one usable CPU", {}, cached=False)
    machine = {**machine_fingerprint(torch.device("cpu")), "threads": None, "usable_cpus": usable}
    key = fingerprint_key(machine, "threads", shape.as_dict())

    def probe() -> dict[str, object]:
        seconds = (measure or measure_thread_seconds)(shape, counts)
        return {"threads": choose_thread_count(seconds), "seconds": seconds}

    stored, provenance = cache.lookup_or_measure(key, machine, probe)
    seconds = {count: float(value) for count, value in stored["seconds"].items()}
    timings = ", ".join(f"{count}: {1e3 * value:.1f} ms" for count, value in seconds.items())
    reason = (
        f"{stored['threads']} threads of {usable} usable CPUs: fp32 step at d_model {shape.d_model} "
        f"x d_ff {shape.d_ff} took {timings} on {describe_device(torch.device('cpu'))}"
        f"{provenance}"
    )
    return TuningDecision(str(stored["threads"]), reason, seconds, provenance == " (cached)")
