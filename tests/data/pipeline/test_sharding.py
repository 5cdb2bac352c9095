"""Sharding an epoch's batches over data-parallel ranks."""

import pytest

from transformer.data.pipeline.sharding import shard


def test_shard_gives_every_rank_the_same_number_of_disjoint_batches() -> None:
    batches = [[index] for index in range(11)]
    shards = [shard(batches, rank, 3) for rank in range(3)]
    assert [len(part) for part in shards] == [3, 3, 3]
    assert shards[1] == [[1], [4], [7]]
    assert sorted(batch[0] for part in shards for batch in part) == list(range(9))
    with pytest.raises(ValueError, match=r"rank=3 must be in \[0, world_size=3\)"):
        shard(batches, 3, 3)
    with pytest.raises(ValueError, match="2 batches cannot be split over 4 ranks"):
        shard(batches[:2], 0, 4)
