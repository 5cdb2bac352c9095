"""Token-budget batching: budgets, coverage, determinism, padding and the documented length groups."""

import itertools
import time

import numpy as np
import pytest

from transformer.data.pipeline.token_batch_sampler import TokenBatchSampler, _length_groups, padding_ratio


def multi30k_like_lengths(num_pairs: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Source lengths (EOS included) and target lengths shaped like BPE-encoded Multi30k."""
    rng = np.random.default_rng(seed)
    source = np.clip(np.round(rng.gamma(6.0, 2.5, num_pairs)), 3, 60).astype(np.int64) + 1
    target = np.clip(source - 1 + np.round(rng.normal(0.0, 2.5, num_pairs)), 2, 64).astype(np.int64)
    return source, target


def random_batches(source: np.ndarray, target: np.ndarray, max_tokens: int, seed: int = 0) -> list[list[int]]:
    """Greedy batches under the same budget but in random order: the baseline bucketing must beat."""
    batches: list[list[int]] = [[]]
    widest = 0
    for index in np.random.default_rng(seed).permutation(len(source)).tolist():
        width = max(int(source[index]), int(target[index]) + 1)
        if batches[-1] and (len(batches[-1]) + 1) * max(widest, width) > max_tokens:
            batches.append([])
            widest = 0
        batches[-1].append(index)
        widest = max(widest, width)
    return batches


@pytest.fixture(scope="module")
def lengths() -> tuple[np.ndarray, np.ndarray]:
    return multi30k_like_lengths(30_000)


def test_every_batch_respects_the_budget_on_both_sides(lengths: tuple[np.ndarray, np.ndarray]) -> None:
    source, target = lengths
    sampler = TokenBatchSampler(source, target, max_tokens=2000, seed=3)
    for batch in sampler.batches(epoch=1):
        assert len(batch) * source[batch].max() <= 2000
        assert len(batch) * (target[batch].max() + 1) <= 2000


def test_batches_are_nearly_full(lengths: tuple[np.ndarray, np.ndarray]) -> None:
    # Greedy packing: adding the next pair of the sorted order would have broken the budget.
    source, target = lengths
    sampler = TokenBatchSampler(source, target, max_tokens=2000, shuffle=False)
    widths = np.maximum(source, target + 1)
    batches = sampler.batches(0)
    for batch, following in itertools.pairwise(batches):
        assert (len(batch) + 1) * max(widths[batch].max(), widths[following[0]]) > 2000


def test_every_index_appears_exactly_once_per_epoch(lengths: tuple[np.ndarray, np.ndarray]) -> None:
    source, target = lengths
    sampler = TokenBatchSampler(source, target, max_tokens=3000, seed=1)
    for epoch in (0, 1, 7):
        batches = sampler.batches(epoch)
        assert len(batches) == len(sampler)
        assert sorted(index for batch in batches for index in batch) == list(range(len(source)))


def test_batches_are_deterministic_per_seed_and_epoch(lengths: tuple[np.ndarray, np.ndarray]) -> None:
    source, target = lengths
    first = TokenBatchSampler(source, target, max_tokens=3000, seed=5)
    second = TokenBatchSampler(source, target, max_tokens=3000, seed=5)
    assert first.batches(2) == second.batches(2)
    assert first.batches(2) != first.batches(3)
    assert first.batches(2) != TokenBatchSampler(source, target, max_tokens=3000, seed=6).batches(2)
    # Across epochs the batches themselves change too, not only their order (random tie-breaks).
    as_sets = {frozenset(batch) for batch in first.batches(0)}
    assert as_sets != {frozenset(batch) for batch in first.batches(1)}


def test_unshuffled_batches_are_sorted_by_length_and_ignore_the_epoch(
    lengths: tuple[np.ndarray, np.ndarray],
) -> None:
    source, target = lengths
    sampler = TokenBatchSampler(source, target, max_tokens=3000, shuffle=False, seed=9)
    batches = sampler.batches(0)
    assert batches == sampler.batches(4)
    widths = np.maximum(source, target + 1)
    batch_widths = [int(widths[batch].max()) for batch in batches]
    assert batch_widths == sorted(batch_widths)
    assert list(sampler) == batches


def test_iteration_follows_set_epoch(lengths: tuple[np.ndarray, np.ndarray]) -> None:
    source, target = lengths
    sampler = TokenBatchSampler(source[:500], target[:500], max_tokens=400, seed=2)
    sampler.set_epoch(3)
    assert list(sampler) == sampler.batches(3)


def test_bucketing_keeps_padding_small(lengths: tuple[np.ndarray, np.ndarray]) -> None:
    source, target = lengths
    for max_tokens in (1000, 4000, 25000):
        bucketed = TokenBatchSampler(source, target, max_tokens=max_tokens).batches(0)
        assert padding_ratio(bucketed, source, target) < 0.15
        assert padding_ratio(random_batches(source, target, max_tokens), source, target) > 0.3


def test_max_sentences_caps_the_batch_size(lengths: tuple[np.ndarray, np.ndarray]) -> None:
    source, target = lengths
    sampler = TokenBatchSampler(source, target, max_tokens=4000, max_sentences=32)
    batches = sampler.batches(0)
    assert max(len(batch) for batch in batches) == 32
    assert sum(len(batch) for batch in batches) == len(source)


def test_sampling_30k_pairs_is_fast(lengths: tuple[np.ndarray, np.ndarray]) -> None:
    source, target = lengths
    start = time.perf_counter()
    sampler = TokenBatchSampler(source, target, max_tokens=1000)
    sampler.batches(0)
    assert time.perf_counter() - start < 1.0


def test_a_pair_longer_than_the_budget_is_refused_at_construction() -> None:
    source = np.array([5, 6, 40, 7, 50])
    target = np.array([4, 45, 5, 6, 8])
    with pytest.raises(ValueError, match=r"sentence pair 1 \(source length 6, target length 45 \+ 1\)"):
        TokenBatchSampler(source, target, max_tokens=40)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="3 source lengths but 2 target lengths"):
        TokenBatchSampler([3, 4, 5], [3, 4], max_tokens=100)
    with pytest.raises(ValueError, match="source_lengths must be a non-empty 1-D sequence"):
        TokenBatchSampler([], [], max_tokens=100)
    with pytest.raises(ValueError, match="target_lengths has a negative length at index 1"):
        TokenBatchSampler([3, 4], [3, -1], max_tokens=100)
    with pytest.raises(ValueError, match="max_tokens=0 must be positive"):
        TokenBatchSampler([3], [3], max_tokens=0)
    with pytest.raises(ValueError, match="source_lengths must hold integers"):
        TokenBatchSampler([3.5], [3], max_tokens=100)
    with pytest.raises(ValueError, match=r"max_tokens=25000\.0 must be an integer"):
        TokenBatchSampler([3], [3], max_tokens=25000.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_sentences=True must be an integer, not a bool"):
        TokenBatchSampler([3], [3], max_tokens=100, max_sentences=True)
    with pytest.raises(ValueError, match="epoch=-1 must be non-negative"):
        TokenBatchSampler([3], [3], max_tokens=100).batch_index_arrays(-1)
    with pytest.raises(ValueError, match="epoch=-1 must be non-negative"):
        TokenBatchSampler([3], [3], max_tokens=100, shuffle=False).batches(-1)


def test_the_budget_is_inclusive_and_a_single_pair_is_one_batch() -> None:
    """A pair exactly as wide as the budget fits alone; one token wider (target + 1) is refused."""
    assert TokenBatchSampler([40], [0], max_tokens=40).batches(0) == [[0]]
    assert TokenBatchSampler([1], [39], max_tokens=40).batches(5) == [[0]]
    with pytest.raises(ValueError, match=r"sentence pair 0 \(source length 39, target length 40 \+ 1\)"):
        TokenBatchSampler([39], [40], max_tokens=40)


def test_narrow_and_extreme_length_types_are_widened_before_the_width_is_computed() -> None:
    """uint8 255 + 1 must be 256 (refused at a budget of 255), not wrap to 0; so must the largest int32."""
    with pytest.raises(ValueError, match=r"target length 255 \+ 1\) exceeds max_tokens=255"):
        TokenBatchSampler(np.array([1], dtype=np.uint8), np.array([255], dtype=np.uint8), max_tokens=255)
    largest = np.iinfo(np.int32).max
    with pytest.raises(ValueError, match=rf"target length {largest} \+ 1\) exceeds max_tokens={largest}"):
        TokenBatchSampler(
            np.array([1], dtype=np.int32), np.array([largest], dtype=np.int32), max_tokens=largest
        )


def test_batch_index_arrays_are_int32_views_of_one_order(lengths: tuple[np.ndarray, np.ndarray]) -> None:
    """The trainer's form costs 4 bytes a pair: int32 arrays sharing one buffer, for int32 and int64 lengths."""
    for dtype in (np.int32, np.int64):
        source, target = (side.astype(dtype) for side in lengths)
        batches = TokenBatchSampler(source, target, max_tokens=2000, seed=3).batch_index_arrays(2)
        assert all(batch.dtype == np.int32 for batch in batches)
        assert len({id(batch.base) for batch in batches}) == 1 and batches[0].base is not None


def reference_batches(sampler: TokenBatchSampler, epoch: int) -> list[list[int]]:
    """The batches as documented, built the slow way: groups of equal lengths, pair-by-pair greedy cut.

    Pairs are grouped by (width, source, target) with width = max(source, target + 1), groups taken in
    lexicographic order, each group's indices in increasing order and, when shuffling, shuffled with the
    epoch's generator group after group; the batch order is then a permutation from the same generator.
    """
    rng = np.random.default_rng([sampler.seed, epoch]) if sampler.shuffle else None
    groups: dict[tuple[int, int, int], list[int]] = {}
    for index, (source, target) in enumerate(
        zip(sampler.source_lengths, sampler.target_lengths, strict=True)
    ):
        groups.setdefault((max(source, target + 1), source, target), []).append(index)
    order: list[int] = []
    for key in sorted(groups):
        members = np.array(groups[key])
        if rng is not None:
            rng.shuffle(members)
        order += members.tolist()
    widths = [max(sampler.source_lengths[index], sampler.target_lengths[index] + 1) for index in order]
    size_cap = sampler.max_sentences or len(order)
    batches, start = [], 0
    while start < len(order):
        size = 1
        while (
            start + size < len(order)
            and size < size_cap
            and (size + 1) * widths[start + size] <= sampler.max_tokens
        ):
            size += 1
        batches.append(order[start : start + size])
        start += size
    if rng is None:
        return batches
    return [batches[position] for position in rng.permutation(len(batches))]


@pytest.mark.parametrize(
    ("longest", "max_sentences", "shuffle"),
    [
        (60, None, True),
        (60, 7, True),
        (60, None, False),
        (2100, None, True),
        (2100, 5, False),
        (2**40, None, True),
    ],
    ids=[
        "bincount-groups",
        "sentence-cap",
        "unshuffled",
        "unique-groups",
        "unique-groups-capped-unshuffled",
        "unique-groups-huge-lengths",
    ],
)
def test_batches_are_the_documented_length_groups_shuffled_within(
    longest: int, max_sentences: int | None, shuffle: bool
) -> None:
    """Sorting the groups once and shuffling within them each epoch gives the reference's batches exactly."""
    generator = np.random.default_rng(11)
    source = generator.integers(1, 60, 3000)
    target = generator.integers(0, 59, 3000)
    # From 2100 the bincount table (2101 x 2100 cells) is above 2**22: np.unique must number the same groups.
    # At 2100 the budget (4200) still binds the short pairs (70 of width 60), so the cuts are tested too.
    source[5], target[6] = longest, longest - 1
    assert sampler_uses_unique_groups(source, target) == (longest > 60)
    sampler = TokenBatchSampler(
        source, target, max_tokens=max(400, 2 * longest), seed=4, shuffle=shuffle, max_sentences=max_sentences
    )
    for epoch in (0, 3):
        expected = reference_batches(sampler, epoch)
        assert sampler.batches(epoch) == expected
        assert [batch.tolist() for batch in sampler.batch_index_arrays(epoch)] == expected
    assert len(sampler) == len(expected)
    assert sampler.batches(0) != sampler.batches(3) or not shuffle  # epochs differ when shuffling


def sampler_uses_unique_groups(source: np.ndarray, target: np.ndarray) -> bool:
    """Tell whether ``_length_groups`` takes its np.unique path (the bincount table would be too large)."""
    cells = (int(source.max()) + 1) * (int(target.max()) + 1)
    return cells > max(len(source), 2**22)


def test_group_ids_switch_to_uint32_past_65536_groups_on_both_paths() -> None:
    """Exactly 2**16 groups keep uint16 ids; one more group needs uint32, with bincount and with np.unique."""
    source = np.repeat(np.arange(1, 257), 256)  # 65,536 distinct (source, target) pairs
    target = np.tile(np.arange(256), 256)
    # The last pair (256, 255) replaced by (20000, 0): still 65,536 groups, but 20001 x 256 cells for bincount.
    cases = {
        "bincount": (source, target),
        "unique": (np.append(source[:-1], 20000), np.append(target[:-1], 0)),
    }
    for path, (exact_source, exact_target) in cases.items():
        assert sampler_uses_unique_groups(exact_source, exact_target) == (path == "unique")
        ids, widths, sizes = _length_groups(exact_source, exact_target)
        assert len(sizes) == 2**16 and ids.dtype == np.uint16, path
        # The last pair is the largest triple in both cases: (256, 255) and (20000, 0).
        assert int(ids[-1]) == 2**16 - 1 and widths[-1] == np.maximum(exact_source, exact_target + 1).max(), (
            path
        )
        ids, _, sizes = _length_groups(np.append(exact_source, 257), np.append(exact_target, 0))
        assert len(sizes) == 2**16 + 1 and ids.dtype == np.uint32, path


def test_more_than_65536_length_groups_keep_the_documented_order() -> None:
    """Past 16-bit group ids (uint32 ids, a stable sort instead of radix) the batches are still the reference's."""
    generator = np.random.default_rng(5)
    source = generator.integers(1, 700, 120_000)
    target = generator.integers(0, 700, 120_000)
    group_ids, _, group_sizes = _length_groups(source, target)
    assert group_ids.dtype == np.uint32 and len(group_sizes) > 2**16
    sampler = TokenBatchSampler(source, target, max_tokens=3000, seed=2)
    assert sampler.batches(1) == reference_batches(sampler, 1)


def test_batch_sizes_straddle_width_runs_greedily() -> None:
    """Batches fill within a run of equal widths, and a remainder takes pairs of the wider runs that fit."""
    # Budget 16: widths 3,3,3,4 fit (4 * 4), a fifth pair of width 4 would not (5 * 4); then 4,5 (2 * 5).
    sampler = TokenBatchSampler([3, 3, 3, 4, 4, 5], [0] * 6, max_tokens=16, shuffle=False)
    assert sampler.batches(0) == [[0, 1, 2, 3], [4, 5]]
    # Budget 6: two full batches of width 2, the remaining 2 with one 3 (2 * 3), the last 3 alone.
    sampler = TokenBatchSampler([2] * 7 + [3] * 2, [0] * 9, max_tokens=6, shuffle=False)
    assert [len(batch) for batch in sampler.batches(0)] == [3, 3, 2, 1]
