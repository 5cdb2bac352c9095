"""Time small workloads fairly: warm-up, interleaved candidates, best of a few rounds."""

import time
from collections.abc import Callable, Mapping

import torch


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work to finish (a no-op on the CPU).

    Parameters
    ----------
    device : torch.device
        The device whose kernels are timed.

    Returns
    -------
    None

    Notes
    -----
    CUDA kernels run asynchronously: without this, a timer measures only the launch.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_candidates(
    candidates: Mapping[str, Callable[[], object]],
    device: torch.device,
    rounds: int = 5,
    budget_seconds: float = 0.6,
) -> dict[str, float]:
    """Best wall-clock time of each candidate workload, timed in interleaved rounds.

    Parameters
    ----------
    candidates : mapping of str to callable
        Name to a workload taking no arguments.
    device : torch.device
        Where the workloads run (synchronised around each timing).
    rounds : int
        At most this many timed rounds after one warm-up call of each.
    budget_seconds : float
        Stop after the round in which this much time has passed (at least one timed round always runs).

    Returns
    -------
    dict of str to float
        Seconds of the fastest call of each candidate.

    Notes
    -----
    Interleaving (A, B, A, B, ...) exposes both candidates to the same background load, and the minimum
    over rounds discards the rounds that load disturbed; on a shared machine this is what keeps a probe's
    decision stable.
    """
    for workload in candidates.values():  # warm-up: allocations, kernel selection, lazy initialisation
        workload()
    synchronize(device)
    best = {name: float("inf") for name in candidates}
    started = time.perf_counter()
    for _ in range(rounds):
        for name, workload in candidates.items():
            synchronize(device)
            tick = time.perf_counter()
            workload()
            synchronize(device)
            best[name] = min(best[name], time.perf_counter() - tick)
        if time.perf_counter() - started > budget_seconds:
            break
    return best
