"""Collation: padding, BOS/EOS, token counts and the padding ratio of one Batch."""

import pytest
import torch

from transformer.data.pipeline.batch import collate
from transformer.data.pipeline.dataset import EncodedCorpus, FilterReport
from transformer.data.pipeline.special_tokens import BOS_ID, EOS_ID, PAD_ID
from transformer.data.pipeline.token_batch_sampler import TokenBatchSampler, padding_ratio


def small_corpus() -> EncodedCorpus:
    return EncodedCorpus(
        source=[[10, 11, EOS_ID], [12, EOS_ID], [13, 14, 15, 16, EOS_ID]],
        target=[[20, 21], [22, 23, 24], [25]],
        report=FilterReport(kept=3, dropped_empty=0, dropped_too_long=0),
    )


def test_collate_pads_and_adds_bos_and_eos() -> None:
    batch = collate([1, 0], small_corpus())
    assert batch.src_tokens.dtype == torch.int64
    assert batch.src_tokens.tolist() == [[12, EOS_ID, PAD_ID], [10, 11, EOS_ID]]
    assert batch.tgt_input.tolist() == [[BOS_ID, 22, 23, 24], [BOS_ID, 20, 21, PAD_ID]]
    assert batch.tgt_output.tolist() == [[22, 23, 24, EOS_ID], [20, 21, EOS_ID, PAD_ID]]
    assert batch.num_source_tokens == 5
    assert batch.num_target_tokens == 7
    assert batch.padding_ratio == pytest.approx(2 / 14)  # 1 pad of 6 source cells, 1 of 8 target cells
    assert batch.indices == [1, 0]
    assert len(batch) == 2


def test_collate_padding_ratio_matches_the_sampler_helper() -> None:
    corpus = small_corpus()
    batches = [[0, 2], [1]]
    collated = [collate(batch, corpus) for batch in batches]
    pad_cells = sum(
        int((batch.src_tokens == PAD_ID).sum() + (batch.tgt_output == PAD_ID).sum()) for batch in collated
    )
    all_cells = sum(batch.src_tokens.numel() + batch.tgt_output.numel() for batch in collated)
    expected = padding_ratio(batches, corpus.source_lengths, corpus.target_lengths)
    assert pad_cells / all_cells == pytest.approx(expected)


def test_collate_refuses_bad_indices() -> None:
    with pytest.raises(ValueError, match="index -1 is outside the corpus of 3 pairs"):
        collate([0, -1], small_corpus())
    with pytest.raises(ValueError, match="the batch has no indices"):
        collate([], small_corpus())


def test_batch_to_device_keeps_values_and_counts() -> None:
    batch = collate([0, 1, 2], small_corpus())
    moved = batch.to("cpu")
    assert torch.equal(moved.tgt_output, batch.tgt_output)
    assert (moved.num_target_tokens, moved.indices) == (batch.num_target_tokens, batch.indices)


def test_sampler_and_collate_work_as_a_dataloader() -> None:
    corpus = small_corpus()
    sampler = TokenBatchSampler(corpus.source_lengths, corpus.target_lengths, max_tokens=8, seed=0)
    loader = torch.utils.data.DataLoader(
        range(len(corpus)), batch_sampler=sampler, collate_fn=lambda indices: collate(indices, corpus)
    )
    seen = sorted(index for batch in loader for index in batch.indices)
    assert seen == [0, 1, 2]
