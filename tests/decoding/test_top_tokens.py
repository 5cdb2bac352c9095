"""The blocked row reductions equal PyTorch's own, ties, ``-inf`` and NaN included, and the searches built on
them give the hypotheses and scores of the plain reductions, with and without a vocabulary shortlist."""

import pytest
import torch

from transformer.config.decode import DecodeConfig
from transformer.data.shortlist import Shortlist
from transformer.decoding import top_tokens
from transformer.decoding.beam_search import beam_search
from transformer.decoding.greedy import greedy_search
from transformer.decoding.search import note_nan_scores
from transformer.decoding.shortlist import ShortlistStepModel
from transformer.decoding.top_tokens import row_max, row_topk
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

VOCAB_SIZES = [300, 1000, 1031, 10_000]


@pytest.fixture
def always_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(top_tokens, "MIN_BLOCKED_ELEMENTS", 0)


def tied_scores(rows: int, vocab_size: int, seed: int) -> torch.Tensor:
    """Scores from a handful of values, so most rows tie at their maximum, with forbidden (-inf) columns."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randint(-6, 0, (rows, vocab_size), generator=generator).float()
    scores[torch.rand(rows, vocab_size, generator=generator) < 0.3] = float("-inf")
    scores[0] = float("-inf")  # a row with no allowed token
    scores[1, -1] = 5.0  # the maximum in the last column, which a short last block reads repeatedly
    return scores


@pytest.mark.parametrize("vocab_size", VOCAB_SIZES)
def test_row_max_equals_max_ties_included(always_blocked: None, vocab_size: int) -> None:
    scores = tied_scores(9, vocab_size, seed=vocab_size)
    values, indices = row_max(scores)
    expected_values, expected_indices = scores.max(dim=1)
    assert torch.equal(values, expected_values)
    assert torch.equal(indices, expected_indices)  # the lowest column among equal maxima
    assert indices[1].item() == vocab_size - 1


@pytest.mark.parametrize("vocab_size", VOCAB_SIZES)
def test_row_topk_values_equal_topk_and_distinct_scores_the_same_columns(
    always_blocked: None, vocab_size: int
) -> None:
    generator = torch.Generator().manual_seed(vocab_size)
    scores = torch.randn(7, vocab_size, generator=generator).log_softmax(dim=1)
    scores[2, :] = float("-inf")
    scores[2, [3, vocab_size - 1]] = torch.tensor([-1.0, -0.5])  # fewer finite scores than k
    scores[3, vocab_size - 4 :] = 10.0 + torch.arange(4.0)  # the best in the leftover columns
    values, indices = row_topk(scores, 8)
    expected_values, expected_indices = scores.topk(8, dim=1)
    assert torch.equal(values, expected_values)
    finite = expected_values.isfinite()
    assert torch.equal(indices[finite], expected_indices[finite])
    assert indices.max().item() < vocab_size


@pytest.mark.parametrize("vocab_size", VOCAB_SIZES)
def test_row_topk_with_ties_gives_a_top_k_set(always_blocked: None, vocab_size: int) -> None:
    scores = tied_scores(9, vocab_size, seed=vocab_size + 1)
    values, indices = row_topk(scores, 8)
    assert torch.equal(values, scores.topk(8, dim=1).values)
    assert torch.equal(scores.gather(1, indices), values)
    for row in range(2, 9):  # rows with at least 8 finite scores: 8 distinct columns
        assert indices[row].unique().numel() == 8


def test_nan_rows_come_out_nan(always_blocked: None) -> None:
    scores = torch.randn(4, 1000)
    scores[1, 517] = float("nan")
    scores[3, 999] = float("nan")
    values, _ = row_max(scores)
    top_values, top_indices = row_topk(scores, 4)
    assert values.isnan().tolist() == [False, True, False, True]
    assert top_values[:, 0].isnan().tolist() == [False, True, False, True]
    assert top_indices[1, 0].item() == 517 and top_indices[3, 0].item() == 999


def test_a_small_step_runs_the_plain_reductions(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object) -> None:
        raise AssertionError("blocked reduction on a small step")

    monkeypatch.setattr(torch.Tensor, "amax", fail)
    scores = torch.randn(4, 100)
    assert torch.equal(row_max(scores)[1], scores.max(dim=1).indices)
    assert torch.equal(row_topk(scores, 8)[0], scores.topk(8, dim=1).values)


@pytest.mark.parametrize("position", [0, 15, 16, 999, 1000, 1030])
def test_note_nan_scores_sees_one_nan_anywhere(position: int) -> None:
    scores = torch.randn(5, 1031)
    none_seen = torch.zeros((), dtype=torch.bool)
    assert not note_nan_scores(none_seen, scores)
    scores[3, position] = float("nan")
    assert note_nan_scores(none_seen, scores)


def random_model(vocab_size: int) -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(
        vocab_size=vocab_size,
        d_model=32,
        d_ff=64,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
        norm_first=True,
    )
    model = Transformer(config).eval()
    with torch.no_grad():
        model.tgt_embedding.weight[config.eos_id] *= 4.0  # EOS likely enough to end some hypotheses early
    return model


def random_sources(vocab_size: int, batch_size: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    sources = torch.randint(4, vocab_size, (batch_size, 6), generator=generator)
    sources[:, -1] = 2  # EOS
    sources[::3, 3:] = 0  # padding
    sources[::3, 3] = 2
    return sources


def as_tuples(found: list[list]) -> list[list[tuple]]:
    return [[(hyp.tokens, hyp.score, hyp.log_prob) for hyp in hypotheses] for hypotheses in found]


SEARCHES = [
    ("greedy", DecodeConfig(beam_size=1, max_length_offset=6)),
    ("greedy", DecodeConfig(beam_size=1, min_length=3, max_length=7)),
    ("beam", DecodeConfig(beam_size=4, nbest=4, max_length_offset=6)),
    ("beam", DecodeConfig(beam_size=4, min_length=3, max_length=7, length_penalty=1.0)),
]


@pytest.mark.parametrize(("kind", "config"), SEARCHES)
@pytest.mark.parametrize("with_shortlist", [False, True])
def test_searches_equal_the_plain_reductions(
    monkeypatch: pytest.MonkeyPatch, kind: str, config: DecodeConfig, with_shortlist: bool
) -> None:
    vocab_size = 2000
    model = random_model(vocab_size)
    sources = random_sources(vocab_size, 12)
    run = greedy_search if kind == "greedy" else beam_search

    def decode() -> list[list[tuple]]:
        if not with_shortlist:
            return as_tuples(run(model, sources, config))
        # Every sentence: the special tokens and a third of the vocabulary, plus one piece per source piece.
        always = torch.cat([torch.arange(4), torch.arange(4, vocab_size, 3)])
        per_source = (torch.arange(vocab_size) + 1).clamp(max=vocab_size - 1)
        shortlist = Shortlist("test", vocab_size, torch.arange(vocab_size + 1), per_source, always)
        return as_tuples(run(ShortlistStepModel(model, shortlist), sources, config))

    monkeypatch.setattr(top_tokens, "MIN_BLOCKED_ELEMENTS", 10**12)
    plain = decode()
    monkeypatch.setattr(top_tokens, "MIN_BLOCKED_ELEMENTS", 0)
    blocked = decode()
    assert blocked == plain
    lengths = {len(hyp[0]) for hypotheses in plain for hyp in hypotheses}
    assert len(lengths) > 1  # EOS ended some hypotheses before the length limit
