"""Target prefixes, n-gram blocking and length limits, checked with hand-set probability tables."""

import dataclasses
import math

import pytest
import torch

from tests.decoding.oracle_step_model import EOS, A, B, C, TableStepModel, log, oracle_sources
from tests.decoding.test_transformer_decoding import padded_sources
from transformer import Transformer, TransformerConfig
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import beam_search, search
from transformer.decoding.constraints import forbid_repeated_ngrams
from transformer.decoding.greedy import greedy_search
from transformer.decoding.sampling import sample_search

# Greedy takes A (0.6) but A's continuations are weak; B (0.4) continues for sure.
GARDEN_PATH = {(): {A: 0.6, B: 0.4}, (A,): {C: 0.55, B: 0.45}, (B,): {C: 1.0}}
# A and B alternate for ever unless blocked; C is the way out.
ALTERNATING = {
    (): {A: 0.9, C: 0.1},
    (A,): {B: 0.9, C: 0.1},
    (A, B): {A: 0.8, C: 0.2},
    (A, B, A): {B: 0.7, C: 0.3},
    (A, B, A, C): {EOS: 1.0},
    (A, B, A, B): {A: 0.6, EOS: 0.4},
}
GREEDY_AND_BEAM = [
    lambda step_model, src, config, prefixes=None: greedy_search(step_model, src, config, prefixes),
    lambda step_model, src, config, prefixes=None: beam_search(step_model, src, config, prefixes),
]


def test_forbid_repeated_ngrams_blocks_exactly_the_completing_tokens() -> None:
    history = torch.tensor([[3, 4, 3, 5, 3], [3, 4, 5, 6, 7]])
    log_probs = torch.zeros(2, 8)
    blocked = forbid_repeated_ngrams(log_probs, history, 2)
    # Row 0 ends with 3, which was followed by 4 and 5; row 1 ends with 7, never seen before.
    assert blocked[0].isinf().nonzero().squeeze(1).tolist() == [4, 5]
    assert not blocked[1].isinf().any()
    assert forbid_repeated_ngrams(log_probs, history, 3)[0].isinf().nonzero().squeeze(1).tolist() == []
    assert forbid_repeated_ngrams(log_probs, history, 1)[1].isinf().nonzero().squeeze(1).tolist() == [
        3,
        4,
        5,
        6,
        7,
    ]
    assert forbid_repeated_ngrams(log_probs, history[:, :1], 2).equal(log_probs)  # too short to repeat


@pytest.mark.parametrize("run", GREEDY_AND_BEAM, ids=["greedy", "beam"])
def test_no_repeat_ngram_blocks_the_repeated_bigram(run) -> None:
    free = run(TableStepModel(ALTERNATING), oracle_sources(0), DecodeConfig(length_penalty=0.0, max_length=5))
    assert free[0][0].tokens == [A, B, A, B, A]
    config = DecodeConfig(length_penalty=0.0, max_length=5, no_repeat_ngram=2)
    [[best, *_]] = run(TableStepModel(ALTERNATING), oracle_sources(0), config)
    # After A B A, the bigram A B would repeat: B is blocked and C (0.3) is the only way on.
    assert best.tokens == [A, B, A, C]
    assert best.log_prob == pytest.approx(log(0.9, 0.9, 0.8, 0.3, 1.0))


@pytest.mark.parametrize(
    ("run", "free_choice"), list(zip(GREEDY_AND_BEAM, ([A, C], [B, C]), strict=True)), ids=["greedy", "beam"]
)
def test_a_prefix_is_forced_then_the_search_goes_on(run, free_choice) -> None:
    src_tokens = oracle_sources(0, 0, 0)
    config = DecodeConfig(length_penalty=0.0, beam_size=2)
    results = run(TableStepModel(GARDEN_PATH), src_tokens, config, [[B], [], [A, B]])
    # [B] is continued with C; no prefix is the search's own choice (greedy A C at 0.33, beam B C at 0.4);
    # [A, B] ends there (the table has no row for it: EOS for sure).
    assert [sentence[0].tokens for sentence in results] == [[B, C], free_choice, [A, B]]
    assert results[0][0].log_prob == pytest.approx(log(0.4, 1.0, 1.0))
    assert results[2][0].log_prob == pytest.approx(log(0.6, 0.45, 1.0))


def test_a_prefix_overrides_the_other_constraints_and_counts_in_the_score() -> None:
    config = DecodeConfig(no_repeat_ngram=1, min_length=0, length_penalty=0.0, beam_size=1)
    table = {(): {A: 0.5, B: 0.5}, (A,): {A: 0.25, EOS: 0.75}, (A, A): {EOS: 1.0}}
    [[forced]] = greedy_search(TableStepModel(table), oracle_sources(0), config, [[A, A]])
    assert forced.tokens == [A, A]  # the repeat was asked for
    assert forced.log_prob == pytest.approx(log(0.5, 0.25, 1.0))
    # A prefix token the model gives probability zero leaves no hypothesis rather than a fake one.
    assert greedy_search(TableStepModel(table), oracle_sources(0), config, [[C]]) == [[]]


def test_a_prefix_longer_than_the_length_limit_raises_the_limit() -> None:
    table = {(A,) * k: {A: 0.5, EOS: 0.5} for k in range(10)}
    config = DecodeConfig(max_length=2, beam_size=1)
    [[hypothesis]] = greedy_search(TableStepModel(table), oracle_sources(0), config, [[A, A, A, A]])
    assert hypothesis.tokens[:4] == [A, A, A, A] and len(hypothesis.tokens) <= 5


def test_sampling_keeps_the_prefix_and_blocks_repeats() -> None:
    config = DecodeConfig(sampling=True, nbest=20, no_repeat_ngram=2, max_length=5, seed=3)
    [samples] = sample_search(TableStepModel(ALTERNATING), oracle_sources(0), config, [[A, B]])
    for sample in samples:
        assert sample.tokens[:2] == [A, B]
        assert sample.tokens in ([A, B, A, C], [A, B, C])
        assert math.isfinite(sample.log_prob)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_transformer_prefix_and_min_length_in_the_cached_path(
    tiny_config: TransformerConfig, beam_size
) -> None:
    model = Transformer(tiny_config).eval()
    src_tokens = padded_sources(tiny_config, [5, 4], torch.Generator().manual_seed(2))
    prefixes = [[7, 8, 9], []]
    config = DecodeConfig(beam_size=beam_size, min_length=6, max_length=8)
    cached = search(model, src_tokens, config, prefixes)
    uncached = search(model, src_tokens, dataclasses.replace(config, use_cache=False), prefixes)
    assert [s[0].tokens for s in cached] == [s[0].tokens for s in uncached]
    assert cached[0][0].tokens[:3] == [7, 8, 9]
    assert all(6 <= len(sentence[0].tokens) <= 8 for sentence in cached)
