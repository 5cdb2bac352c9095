"""Process-group setup for multi-process training under ``torchrun`` (DistributedDataParallel)."""

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar, cast

import torch
from torch import Tensor
from torch import distributed as dist

from transformer.device import resolve_device

CPU = torch.device("cpu")
T = TypeVar("T")
#: How long the other ranks wait for rank 0 to prepare the data: downloading and extracting WMT14, learning the
#: vocabulary and encoding the token store take far longer than a collective's default timeout (10 minutes
#: for NCCL in recent PyTorch), after which the waiting ranks would abort the job.
DATA_PREPARATION_TIMEOUT = timedelta(hours=6)


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands in a (possibly single-process) training job.

    Parameters
    ----------
    rank : int
        Global rank of this process (0 when not distributed).
    world_size : int
        Number of processes (1 when not distributed).
    local_rank : int
        Rank on this machine, which picks the GPU.
    device : torch.device
        Device this process trains on.
    preparation_group : object or None
        A gloo process group with :data:`DATA_PREPARATION_TIMEOUT`, for :func:`wait_for_data_preparation`;
        None when not distributed.

    Notes
    -----
    Rank 0 writes checkpoints, logs and progress; every rank trains on its own shard of batches.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = CPU
    preparation_group: Any = None

    @property
    def is_main(self) -> bool:
        """True on the process that writes files and reports progress.

        Returns
        -------
        bool
            Whether this is rank 0.

        Notes
        -----
        Rank 0 is the only writer of checkpoints and ``metrics.jsonl``: ranks writing the same files at
        once would corrupt them. A single process is rank 0 and so its own main.
        """
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        """True when more than one process trains.

        Returns
        -------
        bool
            Whether ``world_size`` exceeds 1.

        Notes
        -----
        Gates every collective call (all-reduce, barrier, broadcast) and the DistributedDataParallel
        wrapper, so a single process never needs an initialised process group.
        """
        return self.world_size > 1


def init_distributed(requested_device: str) -> DistributedContext:
    """Join the process group that ``torchrun`` describes, or run as a single process.

    Parameters
    ----------
    requested_device : str
        The ``train.device`` setting.

    Returns
    -------
    DistributedContext
        This process's rank, world size and device.

    Notes
    -----
    Reads ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` set by ``torchrun``. Uses NCCL on GPUs and gloo on
    CPUs, plus a second, gloo group with a long timeout for the one wait on rank 0's data preparation; every
    rank creates it here, together, because creating a group is itself a collective.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(requested_device, local_rank)
    if world_size == 1:
        return DistributedContext(device=device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    preparation_group = dist.new_group(backend="gloo", timeout=DATA_PREPARATION_TIMEOUT)
    return DistributedContext(dist.get_rank(), dist.get_world_size(), local_rank, device, preparation_group)


def all_reduce_sum(values: Tensor, context: DistributedContext) -> Tensor:
    """Sum a tensor over all processes (identity when single-process).

    Parameters
    ----------
    values : torch.Tensor, any shape
        On any device: it is reduced on the job's device (NCCL reduces only GPU tensors) and returned on its own.
    context : DistributedContext
        The job.

    Returns
    -------
    torch.Tensor, same shape as ``values``
        The element-wise sum over processes (a new tensor).

    Notes
    -----
    Used for token counts and loss sums, so losses are normalised by the global token count. It is a
    collective: every rank must call it, in the same order, or the job hangs. ``values`` itself is not
    changed, since ``dist.all_reduce`` works in place on a copy. Validation sums arrive on the CPU, which
    under NCCL would fail without the copy to the GPU.
    """
    if not context.is_distributed:
        return values.clone()
    total = values.to(context.device, copy=True)  # NCCL reduces only tensors on the GPU
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total.to(values.device)


def barrier(context: DistributedContext) -> None:
    """Wait for every process (no-op when single-process).

    Parameters
    ----------
    context : DistributedContext
        The job.

    Returns
    -------
    None

    Notes
    -----
    Used after rank 0 writes a checkpoint, so the other ranks do not run ahead of the save. A collective:
    if one rank skips it (say, it raised), the others wait forever.
    """
    if context.is_distributed:
        dist.barrier()


def wait_for_data_preparation(context: DistributedContext) -> None:
    """Wait for every process, allowing :data:`DATA_PREPARATION_TIMEOUT` (no-op when single-process).

    Parameters
    ----------
    context : DistributedContext
        The job.

    Returns
    -------
    None

    Notes
    -----
    The other ranks call it before preparing the data and rank 0 after, so they load only what rank 0 wrote
    completely (vocabulary, token store). A plain :func:`barrier` would time out while rank 0 downloads and
    encodes a large corpus; this one waits on a CPU (gloo) group created with a timeout of hours.
    """
    if context.is_distributed:
        dist.barrier(group=context.preparation_group)


def shutdown_distributed(context: DistributedContext) -> None:
    """Leave the process group.

    Parameters
    ----------
    context : DistributedContext
        The job.

    Returns
    -------
    None

    Notes
    -----
    Safe to call when not distributed, and after the group is gone: it checks ``dist.is_initialized()``
    first, so a ``finally`` block can call it whatever happened.
    """
    if context.is_distributed and dist.is_initialized():
        dist.destroy_process_group()


def broadcast_from_main(value: T, context: DistributedContext) -> T:
    """Give every process rank 0's copy of a picklable value (identity when single-process).

    Parameters
    ----------
    value : object
        This rank's value; only rank 0's is kept.
    context : DistributedContext
        The job.

    Returns
    -------
    object
        Rank 0's value, on every rank.

    Notes
    -----
    Used for decisions that must agree across ranks but are measured, such as ``precision: auto``: every
    rank timing its own probe could pick differently on a busy machine.
    """
    if not context.is_distributed:
        return value
    holder: list[T | None] = [value if context.is_main else None]
    dist.broadcast_object_list(holder, src=0)
    return cast(T, holder[0])


def gather_rng_states(context: DistributedContext) -> dict[str, Tensor]:
    """Collect every process's random-number-generator states, for a checkpoint.

    Parameters
    ----------
    context : DistributedContext
        Rank, world size and device.

    Returns
    -------
    dict of str to torch.Tensor
        ``rng.cpu.rank{r}`` for every rank, and ``rng.cuda.rank{r}`` where the device is a GPU.

    Notes
    -----
    Each rank resumes its own dropout stream from its own state: a single saved state would give every rank
    the same dropout masks after a resume. A collective call: every rank must make it.
    """
    states = {f"rng.cpu.rank{context.rank}": torch.get_rng_state()}
    if context.device.type == "cuda":
        states[f"rng.cuda.rank{context.rank}"] = torch.cuda.get_rng_state(context.device)
    if not context.is_distributed:
        return states
    gathered: list[dict[str, Tensor] | None] = [None] * context.world_size
    dist.all_gather_object(gathered, {key: value.cpu() for key, value in states.items()})
    return {key: value for item in gathered if item for key, value in item.items()}
