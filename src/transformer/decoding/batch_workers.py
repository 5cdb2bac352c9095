"""Translate several batches at once: one search per worker thread, each on its share of PyTorch's threads.

A small model's decoder step is a few dozen small operations, and PyTorch spreads each of them over its
intra-op threads, which pays for large products and not for a 256-wide student's: on a 2-core AMD EPYC with
AVX2 alone, a 4+1-layer student's int8 greedy search (batches of 32) gained 1.21x from a second intra-op
thread and 1.84x from a second batch searched beside the first, one thread each (BENCHMARKS.md section 1g). CTranslate2's ``inter_threads`` and
Marian's ``--cpu-threads`` workers do the same. The searches release the GIL in every PyTorch operation and
in the C++ decoder step (:mod:`transformer.kernels.native_step`), so threads suffice; each batch's result
is what it would be alone, so the output does not depend on the number of workers.
"""

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TypeVar

BatchResult = TypeVar("BatchResult")


def run_batches(
    batches: Sequence[list[int]],
    translate_batch: Callable[[list[int]], BatchResult],
    workers: int,
    progress: Callable[[int], None] | None = None,
) -> list[BatchResult]:
    """Run ``translate_batch`` on every batch, ``workers`` at a time, and return the results in batch order.

    Parameters
    ----------
    batches : sequence of list of int
        Each batch's sentence indices.
    translate_batch : callable
        Searches one batch; called from the worker threads when ``workers > 1``.
    workers : int
        Batches searched at once (1 runs them one after the other in the calling thread).
    progress : callable or None
        Called in the calling thread with the size of each finished batch.

    Returns
    -------
    list
        One result per batch, in the order of ``batches``.

    Raises
    ------
    ValueError
        For ``workers`` below 1.
    Exception
        The first error a batch raised; the batches not yet started are cancelled, and those running are
        waited for, so no thread outlives the call.

    Notes
    -----
    The caller sets PyTorch's thread count: ``workers`` threads each running operations on
    ``torch.get_num_threads()`` intra-op threads should not exceed the CPUs (``transformer translate
    --workers N`` gives each worker an equal share). Worker threads enter ``torch.inference_mode`` through
    the searches themselves, which is per thread.
    """
    if workers < 1:
        raise ValueError(f"workers={workers} must be at least 1")
    if workers == 1 or len(batches) < 2:
        results = []
        for batch in batches:
            results.append(translate_batch(batch))
            if progress is not None:
                progress(len(batch))
        return results
    found: dict[int, BatchResult] = {}
    with ThreadPoolExecutor(min(workers, len(batches)), thread_name_prefix="translate") as pool:
        futures: dict[Future[BatchResult], int] = {
            pool.submit(translate_batch, batch): index for index, batch in enumerate(batches)
        }
        try:
            for future in as_completed(futures):
                index = futures[future]
                found[index] = future.result()
                if progress is not None:
                    progress(len(batches[index]))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return [found[index] for index in range(len(batches))]
