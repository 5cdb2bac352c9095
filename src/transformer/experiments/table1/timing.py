"""Forward+backward time and the activation memory a layer keeps for backward, point by point within a budget."""

import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from transformer.device import describe_cpu
from transformer.experiments.common.results import append_result
from transformer.experiments.table1.flops import analytic_flops, counted_flops
from transformer.experiments.table1.layers import build_layer
from transformer.experiments.table1.settings import TIMED_KINDS, Table1Settings


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work.

    Parameters
    ----------
    device : torch.device
        CPU or CUDA.

    Returns
    -------
    None

    Notes
    -----
    CUDA kernels run asynchronously: a clock read without this would time the launch, not the work.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def saved_activation_bytes(layer: nn.Module, hidden: Tensor) -> int:
    """Bytes of the tensors a forward pass keeps for backward, parameters left out.

    Parameters
    ----------
    layer : torch.nn.Module
        The layer.
    hidden : torch.Tensor, shape (batch, n, d)
        Its input (requires grad).

    Returns
    -------
    int
        Sum of the distinct storages saved by autograd, excluding those of the parameters.

    Notes
    -----
    ``torch.autograd.graph.saved_tensors_hooks`` sees every tensor autograd saves; storages are counted
    once however many tensors view them. This is the memory a layer holds between forward and backward (what
    grows with n and decides the largest trainable length), measured the same way on every device; on CPU
    ``tracemalloc`` cannot see torch's allocations. The input itself is counted when saved.
    """
    parameter_storages = {parameter.untyped_storage().data_ptr() for parameter in layer.parameters()}
    seen: dict[int, int] = {}

    def pack(tensor: Tensor) -> Tensor:
        try:
            storage = tensor.untyped_storage()
            pointer, size = storage.data_ptr(), storage.nbytes()
        except (RuntimeError, NotImplementedError):  # opaque tensors (e.g. MKLDNN) have no storage
            pointer, size = id(tensor), tensor.numel() * tensor.element_size()
        if pointer not in parameter_storages:
            seen[pointer] = max(seen.get(pointer, 0), size)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = layer(hidden)
    del output
    return sum(seen.values())


def time_forward_backward(
    layer: nn.Module, hidden: Tensor, device: torch.device, settings: Table1Settings
) -> dict[str, Any]:
    """Time forward+backward of one layer: a warm-up, then the median of several repetitions.

    Parameters
    ----------
    layer : torch.nn.Module
        The layer, on ``device``.
    hidden : torch.Tensor, shape (batch, n, d)
        Input on ``device``, requiring grad.
    device : torch.device
        Where it runs.
    settings : Table1Settings
        Repetition targets.

    Returns
    -------
    dict of str to Any
        ``seconds`` (median), ``repeats``, ``spread`` (max / min of the repetitions), and on CUDA
        ``cuda_peak_bytes`` (peak allocation of the warm-up above what was allocated before it).

    Notes
    -----
    Each repetition clears the gradients, runs forward, backpropagates a fixed random gradient of the output
    and synchronises; ``time.perf_counter`` brackets it. The number of repetitions is the warm-up's time
    divided into ``repeat_seconds``, clamped to ``min_repeats .. max_repeats``.
    """
    torch.manual_seed(0)
    upstream = torch.randn(hidden.shape, device=device)

    def step() -> float:
        layer.zero_grad(set_to_none=True)
        hidden.grad = None
        synchronize(device)
        start = time.perf_counter()
        layer(hidden).backward(upstream)
        synchronize(device)
        return time.perf_counter() - start

    measured: dict[str, Any] = {}
    if device.type == "cuda":
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        warm = step()
        measured["cuda_peak_bytes"] = int(torch.cuda.max_memory_allocated(device) - before)
    else:
        warm = step()
    repeats = int(min(settings.max_repeats, max(settings.min_repeats, settings.repeat_seconds // warm)))
    times = [step() for _ in range(repeats)]
    measured.update(
        seconds=statistics.median(times), repeats=repeats, spread=max(times) / max(min(times), 1e-12)
    )
    return measured


def predicted_seconds(times: Sequence[tuple[int, float]], length: int) -> float | None:
    """Extrapolate a layer's time to a longer length from its last two measurements.

    Parameters
    ----------
    times : sequence of (int, float)
        (n, seconds) measured so far at one width, increasing n.
    length : int
        The next n.

    Returns
    -------
    float or None
        Predicted seconds; None before the first measurement.

    Notes
    -----
    The local log-log slope is clamped to [1, 3]: at small n fixed costs make it look flatter than it will
    be, and no layer here grows faster than n² per pass.
    """
    if not times:
        return None
    last_length, last_seconds = times[-1]
    slope = 2.0
    if len(times) >= 2:
        previous_length, previous_seconds = times[-2]
        slope = math.log(last_seconds / max(previous_seconds, 1e-12)) / math.log(
            last_length / previous_length
        )
        slope = min(3.0, max(1.0, slope))
    return last_seconds * (length / last_length) ** slope


def describe_device(device: torch.device) -> str:
    """Name the hardware of the measurement.

    Parameters
    ----------
    device : torch.device
        CPU or CUDA.

    Returns
    -------
    str
        The GPU's name, or the CPU model and flags (:func:`describe_cpu`).

    Notes
    -----
    Recorded on every line of ``measurements.jsonl``.
    """
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    return describe_cpu()


def measure_points(
    settings: Table1Settings,
    device: torch.device,
    measurements: Path,
    report: Callable[[str], None],
    commit: str | None = None,
) -> list[dict[str, Any]]:
    """Measure every (layer, n, d) point of the grid that fits the budgets, and count every point's FLOPs.

    Parameters
    ----------
    settings : Table1Settings
        Grid and budgets.
    device : torch.device
        Where layers run.
    measurements : Path
        ``measurements.jsonl``; each point is appended as it finishes.
    report : callable
        Receives one progress line per length.
    commit : str or None
        The commit of the code that measures (:func:`~transformer.experiments.common.provenance.git_commit`),
        written into every record.

    Returns
    -------
    list of dict
        One record per point: ``layer``, ``n``, ``d``, ``batch``, ``seconds`` (None when skipped, with
        ``skipped`` saying why), ``repeats``, ``spread``, ``flops``, ``flops_source``, ``flops_analytic``,
        ``memory_bytes``, ``memory_source``, ``device``, ``machine``, ``threads``, ``commit``.

    Notes
    -----
    Lengths are the outer loop, so when the total budget runs out it is the longest sequences that go
    unmeasured, at every width and layer alike. At a width, a layer whose next point is predicted
    (:func:`predicted_seconds`) to exceed ``point_budget_seconds`` is skipped from that length on.
    """
    machine = describe_device(device)
    started = time.perf_counter()
    layers: dict[tuple[str, int], nn.Module] = {}
    times: dict[tuple[str, int], list[tuple[int, float]]] = {}
    stopped: dict[tuple[str, int], str] = {}
    records = []
    for length in settings.lengths:
        for d_model in settings.widths:
            for name in TIMED_KINDS:
                key = (name, d_model)
                record = _counted_point(name, length, d_model, settings, device, machine, commit)
                if key not in stopped:
                    reason = _skip_reason(times.get(key, []), length, time.perf_counter() - started, settings)
                    if reason is not None:
                        stopped[key] = reason
                if key in stopped:
                    record["skipped"] = stopped[key]
                else:
                    if key not in layers:
                        torch.manual_seed(0)
                        layers[key] = build_layer(name, d_model, settings).to(device)
                    layer = layers[key]
                    torch.manual_seed(1)
                    hidden = torch.randn(settings.batch, length, d_model, device=device, requires_grad=True)
                    record.update(time_forward_backward(layer, hidden, device, settings))
                    record["memory_bytes"] = saved_activation_bytes(layer, hidden)
                    times.setdefault(key, []).append((length, record["seconds"]))
                    if record["seconds"] > settings.point_budget_seconds:
                        stopped[key] = (
                            f"n = {length} took {record['seconds']:.2f} s > {settings.point_budget_seconds:g} s"
                        )
                append_result(measurements, record)
                records.append(record)
        timed = sum(1 for record in records if record["n"] == length and record["seconds"] is not None)
        report(
            f"table1: n = {length}: {timed} of {len(settings.widths) * len(TIMED_KINDS)} points timed, "
            f"{time.perf_counter() - started:.0f} s so far"
        )
    return records


def _counted_point(
    name: str,
    length: int,
    d_model: int,
    settings: Table1Settings,
    device: torch.device,
    machine: str,
    commit: str | None,
) -> dict[str, Any]:
    """Start one point's record: its FLOPs (counted and analytic) and where it runs; not yet timed."""
    flops, flops_source = counted_flops(name, length, d_model, settings)
    return {
        "layer": name,
        "n": length,
        "d": d_model,
        "batch": settings.batch,
        "seconds": None,
        "flops": flops,
        "flops_source": flops_source,
        "flops_analytic": analytic_flops(name, length, d_model, settings),
        "memory_bytes": None,
        "memory_source": "saved tensors (saved_tensors_hooks), parameters excluded",
        "device": str(device),
        "machine": machine,
        "threads": torch.get_num_threads(),
        "commit": commit,
    }


def _skip_reason(
    times: Sequence[tuple[int, float]], length: int, elapsed_seconds: float, settings: Table1Settings
) -> str | None:
    """Say why a layer's point at ``length`` is not timed (budget spent, or predicted too slow), or None."""
    if elapsed_seconds > settings.total_budget_seconds:
        return f"the run's timing budget of {settings.total_budget_seconds:.0f} s was spent"
    prediction = predicted_seconds(times, length)
    if prediction is not None and prediction > settings.point_budget_seconds:
        return f"predicted {prediction:.2f} s per pass > {settings.point_budget_seconds:g} s budget"
    return None
