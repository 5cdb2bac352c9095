"""Give each data-parallel worker its share of an epoch's batches.

Every rank cuts the same batches from the same (seed, epoch)
(:class:`~transformer.data.pipeline.token_batch_sampler.TokenBatchSampler`); :func:`shard` deals them out, the
same number to every rank, so no rank waits in a gradient all-reduce that another never reaches.
"""

from typing import TypeVar

import numpy as np

#: One batch's pair indices: a list (``TokenBatchSampler.batches``) or an array (``batch_index_arrays``).
BatchIndices = TypeVar("BatchIndices", list[int], np.ndarray)


def shard(batches: list[BatchIndices], rank: int, world_size: int) -> list[BatchIndices]:
    """Give one data-parallel worker its share of an epoch's batches.

    Parameters
    ----------
    batches : list of list[int] or list of numpy.ndarray
        The epoch's batches, the same list on every rank (same sampler seed and epoch).
    rank : int
        This worker, in ``[0, world_size)``.
    world_size : int
        Number of workers.

    Returns
    -------
    list of list[int] or list of numpy.ndarray
        Batches ``rank, rank + world_size, ...`` (of the input's kind); every rank gets
        ``len(batches) // world_size``.

    Raises
    ------
    ValueError
        When there are fewer batches than ranks.

    Notes
    -----
    The last ``len(batches) % world_size`` batches are dropped so that every rank runs the same number of
    steps: an extra step on some ranks would hang the gradient all-reduce. With shuffled batch order a
    different remainder is dropped each epoch.
    """
    if world_size <= 0 or not 0 <= rank < world_size:
        raise ValueError(f"shard: rank={rank} must be in [0, world_size={world_size})")
    steps_per_rank = len(batches) // world_size
    if steps_per_rank == 0:
        raise ValueError(f"shard: {len(batches)} batches cannot be split over {world_size} ranks")
    return batches[rank : steps_per_rank * world_size : world_size]
