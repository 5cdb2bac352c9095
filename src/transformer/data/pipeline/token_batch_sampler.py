"""Cut a corpus into batches of pairs of similar length whose padded size fits a token budget.

Paper section 5.1: "Sentence pairs were batched together by approximate sequence length. Each
training batch contained a set of sentence pairs containing approximately 25000 source tokens and
25000 target tokens." :class:`TokenBatchSampler` sorts pairs by length (random tie-breaks per
epoch), cuts the sorted order into the largest batches whose padded size fits the budget on both
sides, and shuffles the order of the batches.
:func:`transformer.data.pipeline.batch.collate` turns one batch into padded id tensors.
"""

import operator
from collections.abc import Iterator, Sequence
from itertools import pairwise

import numpy as np

#: The version of the batches :class:`TokenBatchSampler` cuts for a (seed, epoch), recorded in every training
#: checkpoint: 1 sorted the whole corpus with a corpus-wide random tie-break (``np.lexsort``), 2 shuffles within
#: groups of equal lengths sorted once. A run resumed mid-epoch across a change continues its epoch in the new
#: order (some pairs of that epoch twice, others not at all), and the trainer says so.
BATCH_ORDER_VERSION = 2


def _as_lengths(values: Sequence[int] | np.ndarray, name: str) -> np.ndarray:
    """Check a sequence of lengths and return it as an int32 or int64 array.

    Parameters
    ----------
    values : Sequence[int] or numpy.ndarray, shape (num_pairs,)
        Non-negative token counts.
    name : str
        The argument's name, for error messages.

    Returns
    -------
    numpy.ndarray, shape (num_pairs,), int32 or int64
        The lengths: the input itself when it is already such an array (an int32 array holding
        ``2**31 - 1``, whose width would wrap, is widened to int64).

    Notes
    -----
    Raises ValueError for a non-1-D, empty, non-integer or negative input.
    """
    lengths = np.asarray(values)
    if lengths.ndim != 1 or lengths.size == 0:
        raise ValueError(
            f"TokenBatchSampler: {name} must be a non-empty 1-D sequence, got shape {lengths.shape}"
        )
    if not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"TokenBatchSampler: {name} must hold integers, got dtype {lengths.dtype}")
    if lengths.min() < 0:
        raise ValueError(f"TokenBatchSampler: {name} has a negative length at index {int(lengths.argmin())}")
    # int32 and int64 are kept as they are (a corpus of 36M pairs need not be copied); narrower or unsigned
    # integers are widened, so that target + 1 and the products of the length groups cannot wrap around, and
    # so is an int32 array holding the largest int32 (whose + 1 would wrap).
    if lengths.dtype == np.int64 or (lengths.dtype == np.int32 and lengths.max() < np.iinfo(np.int32).max):
        return lengths
    return lengths.astype(np.int64)


def _as_count(value: int, name: str) -> int:
    """Check that an argument is an integer (a Python or numpy int, not a float or bool) and return it.

    Parameters
    ----------
    value : int
        ``max_tokens``, ``max_sentences`` or ``seed``.
    name : str
        The argument's name, for the error message.

    Returns
    -------
    int
        The value as a Python int.

    Notes
    -----
    A float budget (``max_tokens=25000.0``, e.g. from a hand-written config) would make the batch caps
    floats and fail deep in numpy with a cast error; refusing it here names the argument instead.
    """
    if isinstance(value, bool):
        raise ValueError(f"TokenBatchSampler: {name}={value!r} must be an integer, not a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"TokenBatchSampler: {name}={value!r} must be an integer") from None


def _length_groups(
    source_lengths: np.ndarray, target_lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Give each distinct (width, source, target) length triple its rank in lexicographic order.

    Parameters
    ----------
    source_lengths : numpy.ndarray, shape (num_pairs,), integer
        Source length of each pair.
    target_lengths : numpy.ndarray, shape (num_pairs,), integer
        Target length of each pair; the width is ``max(source, target + 1)``.

    Returns
    -------
    group_ids : numpy.ndarray, shape (num_pairs,), uint16 (uint32 past 65,536 groups)
        Each pair's group: the rank of its triple among the triples present.
    group_widths : numpy.ndarray, shape (num_groups,), int64
        The width of each group, non-decreasing.
    group_sizes : numpy.ndarray, shape (num_groups,), int64
        The number of pairs in each group.

    Notes
    -----
    The width is a function of the other two lengths, so the triples present are the distinct (source,
    target) pairs: a few thousand for a corpus filtered to lengths below 256 (9,852 at 36 million pairs),
    counted with one ``np.bincount`` over ``source * (longest target + 1) + target`` when that table is
    small (up to ``max(num_pairs, 2**22)`` cells), else found with ``np.unique`` (a sort). Ids of at most
    16 bits let numpy sort them stably with a radix sort, linear in the number of pairs.
    """
    num_pairs = len(source_lengths)
    target_span = int(target_lengths.max()) + 1
    cells = (int(source_lengths.max()) + 1) * target_span
    if cells <= max(num_pairs, 2**22):
        # In place: one array of num_pairs int64 (np.bincount's index type) rather than three temporaries.
        cell_of_pair = source_lengths.astype(np.int64)
        cell_of_pair *= target_span
        cell_of_pair += target_lengths
        cell_counts = np.bincount(cell_of_pair, minlength=cells)
        present = np.flatnonzero(cell_counts)
        sources, targets = np.divmod(present, target_span)
        widths = np.maximum(sources, targets + 1)
        rank_order = np.lexsort((targets, sources, widths))
        id_dtype = np.uint16 if len(present) <= 2**16 else np.uint32
        group_of_cell = np.zeros(cells, dtype=id_dtype)
        group_of_cell[present[rank_order]] = np.arange(len(present), dtype=id_dtype)
        return group_of_cell[cell_of_pair], widths[rank_order], cell_counts[present[rank_order]]
    widths = np.maximum(source_lengths, target_lengths + 1)
    triples = np.stack((widths, source_lengths, target_lengths), axis=1)
    unique_triples, group_ids, group_sizes = np.unique(
        triples, axis=0, return_inverse=True, return_counts=True
    )
    id_dtype = np.uint16 if len(group_sizes) <= 2**16 else np.uint32
    return group_ids.reshape(-1).astype(id_dtype), unique_triples[:, 0].astype(np.int64), group_sizes


def _greedy_batch_sizes(
    run_widths: np.ndarray, run_sizes: np.ndarray, max_tokens: int, max_sentences: int | None
) -> np.ndarray:
    """Cut pairs sorted by width into the largest consecutive batches that fit the budget.

    Parameters
    ----------
    run_widths : numpy.ndarray, shape (num_runs,), int64
        Distinct widths in increasing order; each is at most ``max_tokens``.
    run_sizes : numpy.ndarray, shape (num_runs,), int64
        How many pairs have each width, all positive.
    max_tokens : int
        Budget for ``batch_size * widest``.
    max_sentences : int or None
        Cap on the batch size.

    Returns
    -------
    numpy.ndarray, shape (num_batches,), int64
        Sizes of consecutive batches of the sorted pairs; they sum to ``run_sizes.sum()``.

    Notes
    -----
    A batch of k sorted pairs fits iff k times its last pair's width is within the budget, so the greedy
    batch starting inside a run of width w holds at most ``cap(w) = min(max_tokens // w, max_sentences)``
    pairs. Within a run every batch is a full ``cap(w)`` until fewer remain; the remainder opens a batch
    that takes pairs of the next runs while its size stays below their caps. The loop therefore runs about
    twice per distinct width, not once per batch (254,461 batches at 36 million pairs and 4,096 tokens,
    which took seconds in Python).
    """
    size_cap = max_sentences if max_sentences is not None else int(run_sizes.sum())
    caps = [min(max_tokens // int(width), size_cap) for width in run_widths]
    sizes: list[int] = []
    repeats: list[int] = []
    run, left_in_run, num_runs = 0, int(run_sizes[0]), len(run_sizes)
    while run < num_runs:
        cap = caps[run]
        if left_in_run >= cap:
            sizes.append(cap)
            repeats.append(left_in_run // cap)
            left_in_run %= cap
        if left_in_run == 0:
            run += 1
            left_in_run = int(run_sizes[run]) if run < num_runs else 0
            continue
        # A partial batch: finish this run, then take pairs of the wider runs while the batch stays under their cap.
        size = left_in_run
        run += 1
        left_in_run = int(run_sizes[run]) if run < num_runs else 0
        while run < num_runs and size < caps[run]:
            taken = min(left_in_run, caps[run] - size)
            size += taken
            left_in_run -= taken
            if left_in_run:
                break
            run += 1
            left_in_run = int(run_sizes[run]) if run < num_runs else 0
        sizes.append(size)
        repeats.append(1)
    return np.repeat(np.array(sizes, dtype=np.int64), repeats)


class TokenBatchSampler:
    """Batches of pairs of similar length whose padded size fits a token budget on both sides.

    Parameters
    ----------
    source_lengths : Sequence[int] or numpy.ndarray, shape (num_pairs,)
        Source length of each pair, EOS included (``EncodedCorpus.source_lengths``).
    target_lengths : Sequence[int] or numpy.ndarray, shape (num_pairs,)
        Target length of each pair without BOS/EOS (``EncodedCorpus.target_lengths``); the
        collated target tensors are one longer.
    max_tokens : int
        Budget per batch: ``len(batch) * longest source`` and ``len(batch) * (longest target + 1)``
        are both at most this (the paper: about 25000 per side).
    shuffle : bool
        True for training: ties in length are broken at random and the batch order is shuffled,
        both from (``seed``, epoch). False for validation: a fixed, length-sorted order.
    seed : int
        Seed of the shuffling, non-negative.
    max_sentences : int or None
        Cap on the pairs per batch; None for no cap.

    Raises
    ------
    ValueError
        At construction for a pair that cannot fit in any batch.

    Notes
    -----
    Pairs are sorted by padded width ``max(source, target + 1)``, then source length, target length and a
    random tie-break, and the sorted order is cut greedily into the largest batches that fit. A batch of n
    pairs fits iff ``n * max(width) <= max_tokens``, which is exactly the two-sided budget, so sorting by
    width keeps padding on Multi30k around 4% (random batches: about 50%). The sorted widths are the same
    every epoch, so the number of batches is too (``len``); the groups of equal (width, source, target) are
    found and sorted once at construction, so an epoch only shuffles within them, never sorts the corpus (36
    million pairs at the paper's English-French size).
    """

    def __init__(
        self,
        source_lengths: Sequence[int] | np.ndarray,
        target_lengths: Sequence[int] | np.ndarray,
        max_tokens: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        max_sentences: int | None = None,
    ) -> None:
        self.source_lengths = _as_lengths(source_lengths, "source_lengths")
        self.target_lengths = _as_lengths(target_lengths, "target_lengths")
        if len(self.source_lengths) != len(self.target_lengths):
            raise ValueError(
                f"TokenBatchSampler: {len(self.source_lengths)} source lengths but "
                f"{len(self.target_lengths)} target lengths"
            )
        max_tokens = _as_count(max_tokens, "max_tokens")
        if max_tokens <= 0:
            raise ValueError(f"TokenBatchSampler: max_tokens={max_tokens} must be positive")
        if max_sentences is not None:
            max_sentences = _as_count(max_sentences, "max_sentences")
            if max_sentences <= 0:
                raise ValueError(f"TokenBatchSampler: max_sentences={max_sentences} must be positive or None")
        seed = _as_count(seed, "seed")
        if seed < 0:
            raise ValueError(f"TokenBatchSampler: seed={seed} must be non-negative")
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.max_sentences = max_sentences
        self.epoch = 0
        # The length order sorts by (width, source, target) and breaks ties at random: the groups of equal
        # triples are the same every epoch, so they are found and sorted once; an epoch shuffles within them.
        group_ids, group_widths, group_sizes = _length_groups(self.source_lengths, self.target_lengths)
        if group_widths[-1] > max_tokens:
            self._refuse_pairs_that_cannot_fit()
        index_dtype = np.int32 if len(group_ids) < 2**31 else np.int64
        self._sorted_by_group = np.argsort(group_ids, kind="stable").astype(index_dtype)
        self._group_bounds = np.concatenate(([0], np.cumsum(group_sizes))).tolist()
        run_widths, run_starts = np.unique(group_widths, return_index=True)
        run_sizes = np.add.reduceat(group_sizes, run_starts)
        self._batch_sizes = _greedy_batch_sizes(run_widths, run_sizes, max_tokens, max_sentences)
        self._batch_ends = np.cumsum(self._batch_sizes)[:-1]

    @property
    def padded_lengths(self) -> np.ndarray:
        """Each pair's width in a batch: its source, or its target plus the BOS/EOS that collate adds.

        Returns
        -------
        numpy.ndarray, shape (num_pairs,), int32 or int64 as the lengths
            ``max(source_lengths, target_lengths + 1)``.

        Notes
        -----
        Computed on each access (a new array): besides the length arrays (the caller's own when they are
        int32 or int64, not copied) the sampler keeps only the groups of equal lengths, not the widths.
        """
        return np.maximum(self.source_lengths, self.target_lengths + 1)

    def _refuse_pairs_that_cannot_fit(self) -> None:
        padded_lengths = self.padded_lengths
        too_long = np.flatnonzero(padded_lengths > self.max_tokens)
        index = int(too_long[0])
        raise ValueError(
            f"TokenBatchSampler: sentence pair {index} (source length {self.source_lengths[index]}, "
            f"target length {self.target_lengths[index]} + 1) exceeds max_tokens={self.max_tokens}, "
            f"as do {too_long.size - 1} others; raise max_tokens or lower the dataset's max_len"
        )

    def _length_order(self, rng: np.random.Generator | None) -> np.ndarray:
        """Order the pairs by width, then source length, target length and a tie-break.

        Parameters
        ----------
        rng : numpy.random.Generator or None
            Shuffles the pairs within each group of equal lengths; None breaks ties by index.

        Returns
        -------
        numpy.ndarray, shape (num_pairs,), int32 (int64 from 2**31 pairs)
            Pair indices in that order.

        Notes
        -----
        The groups are sorted once, at construction; an epoch copies that order and shuffles each group's
        slice in place, groups in increasing order, each with ``rng.shuffle``: a uniformly random order
        within every group, as a random tie-break key would give, but without sorting the corpus each epoch.
        At 36 million pairs this takes about a second, where one permutation of the whole corpus and a sort
        of it took 5-10 s and ``np.lexsort`` of four keys 36 s (2-core Xeon without AMX), which decided the
        start-up time at the paper's English-French size.
        """
        if rng is None:
            return self._sorted_by_group.copy()  # the batches are views: keep the sampler's own order intact
        order = self._sorted_by_group.copy()
        for start, end in pairwise(self._group_bounds):
            if end - start > 1:
                rng.shuffle(order[start:end])
        return order

    def batch_index_arrays(self, epoch: int) -> list[np.ndarray]:
        """Return the batches of one epoch as arrays of pair indices.

        Parameters
        ----------
        epoch : int
            Epoch number, non-negative; with ``shuffle`` it picks the tie-breaks and batch order.

        Returns
        -------
        list of numpy.ndarray, each of shape (batch_size,), int32 or int64
            ``len(self)`` batches (int32 below 2**31 pairs); every index appears exactly once. The same
            batches, in the same order, as :meth:`batches`.

        Raises
        ------
        ValueError
            For a negative epoch, shuffled or not.

        Notes
        -----
        The arrays are views into one array of ``num_pairs`` indices (4 or 8 bytes a pair): the trainer uses
        this form, since at 36 million pairs the lists of :meth:`batches` would hold 36 million Python ints
        (over 1 GB and seconds to build) every epoch.
        """
        if epoch < 0:
            raise ValueError(f"TokenBatchSampler: epoch={epoch} must be non-negative")
        rng = np.random.default_rng([self.seed, epoch]) if self.shuffle else None
        batches = np.split(self._length_order(rng), self._batch_ends)
        if rng is not None:
            batches = [batches[position] for position in rng.permutation(len(batches))]
        return batches

    def batches(self, epoch: int) -> list[list[int]]:
        """Return the batches of one epoch.

        Parameters
        ----------
        epoch : int
            Epoch number, non-negative; with ``shuffle`` it picks the tie-breaks and batch order.

        Returns
        -------
        list[list[int]]
            ``len(self)`` batches of pair indices; every index appears exactly once.

        Notes
        -----
        Deterministic given (``seed``, ``epoch``); without ``shuffle`` the epoch only has to be
        non-negative and the batches come shortest first. :meth:`batch_index_arrays` gives the same
        batches as arrays.
        """
        return [batch.tolist() for batch in self.batch_index_arrays(epoch)]

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch that iteration yields, as ``DistributedSampler.set_epoch`` does.

        Parameters
        ----------
        epoch : int
            Epoch number, non-negative.

        Returns
        -------
        None

        Notes
        -----
        Lets the sampler serve as a ``DataLoader`` ``batch_sampler``.
        """
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches(self.epoch))

    def __len__(self) -> int:
        return len(self._batch_sizes)


def padding_ratio(
    batches: Sequence[Sequence[int]],
    source_lengths: Sequence[int] | np.ndarray,
    target_lengths: Sequence[int] | np.ndarray,
) -> float:
    """Fraction of padding that collating these batches would produce, without building tensors.

    Parameters
    ----------
    batches : Sequence[Sequence[int]]
        Batches of pair indices.
    source_lengths, target_lengths : Sequence[int] or numpy.ndarray, shape (num_pairs,)
        As for :class:`TokenBatchSampler` (targets without BOS/EOS).

    Returns
    -------
    float
        Pad cells over all cells of the source and target-output tensors of every batch.

    Notes
    -----
    Equals the cell-weighted mean of :attr:`~transformer.data.pipeline.batch.Batch.padding_ratio` over the
    collated batches.
    """
    sources = np.asarray(source_lengths, dtype=np.int64)
    targets = np.asarray(target_lengths, dtype=np.int64) + 1
    real_cells = all_cells = 0
    for batch in batches:
        batch_sources, batch_targets = sources[np.asarray(batch)], targets[np.asarray(batch)]
        real_cells += int(batch_sources.sum() + batch_targets.sum())
        all_cells += len(batch) * int(batch_sources.max() + batch_targets.max())
    if all_cells == 0:
        raise ValueError("padding_ratio: there are no batches")
    return 1.0 - real_cells / all_cells
