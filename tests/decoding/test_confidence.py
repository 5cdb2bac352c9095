"""A translation's confidence: the geometric mean of its token probabilities, from the search's own sum, in
every search and through the Translator."""

import math
from pathlib import Path

import pytest
import torch

from tests.decoding.oracle_step_model import EOS, A, B, C, TableStepModel, oracle_sources
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.decoding.confidence import sentence_confidence
from transformer.decoding.search import Hypothesis
from transformer.decoding.translator import Translator


def test_the_confidence_is_the_geometric_mean_of_the_token_probabilities() -> None:
    assert sentence_confidence(math.log(0.5) + math.log(0.8), 2) == pytest.approx(math.sqrt(0.4))
    assert sentence_confidence(float("-inf"), 3) == 0.0
    assert sentence_confidence(0.0, 0) == 1.0
    assert sentence_confidence(1e-9, 1) == 1.0  # rounding above zero never leaves [0, 1]
    # The geometric mean, not the product: a longer output of the same token probability is as confident.
    assert sentence_confidence(4 * math.log(0.7), 4) == pytest.approx(sentence_confidence(math.log(0.7), 1))


def test_the_steps_of_a_hypothesis_count_its_eos_unless_the_length_limit_stopped_it() -> None:
    ended = Hypothesis([5, 6], -0.5, math.log(0.9) * 3, num_steps=3)
    assert ended.confidence == pytest.approx(0.9)
    stopped = Hypothesis([5, 6], -0.5, math.log(0.9) * 2, num_steps=2)
    assert stopped.confidence == pytest.approx(0.9)
    # Unknown steps are read as tokens + EOS; the steps never change equality.
    assert Hypothesis([5, 6], -0.5, math.log(0.9) * 3).confidence == pytest.approx(0.9)
    assert Hypothesis([5, 6], -0.5, -1.0, num_steps=3) == Hypothesis([5, 6], -0.5, -1.0)


# Greedy takes A (0.6), then C (0.55), then EOS for sure; beam search also finds B C (0.4, 1, 1).
GARDEN_PATH = {(): {A: 0.6, B: 0.4}, (A,): {C: 0.55, B: 0.45}, (B,): {C: 1.0}}
# A is always more likely than EOS: only the length limit stops it.
NEVER_ENDS = {(A,) * k: {A: 0.5, EOS: 0.4} for k in range(60)}


def test_greedy_and_beam_confidences_are_their_token_probabilities_geometric_means() -> None:
    [[greedy]] = search(TableStepModel(GARDEN_PATH), oracle_sources(0), DecodeConfig(beam_size=1))
    assert greedy.tokens == [A, C] and greedy.num_steps == 3
    assert greedy.confidence == pytest.approx((0.6 * 0.55 * 1.0) ** (1 / 3))
    config = DecodeConfig(beam_size=2, nbest=2, length_penalty=0.0)
    found = search(TableStepModel(GARDEN_PATH), oracle_sources(0), config)[0]
    assert [(item.tokens, item.num_steps) for item in found] == [([B, C], 3), ([A, C], 3)]
    assert [item.confidence for item in found] == pytest.approx([0.4 ** (1 / 3), (0.6 * 0.55) ** (1 / 3)])


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_hypothesis_stopped_by_the_length_limit_counts_no_eos(beam_size: int) -> None:
    # Source of 2 tokens, offset 1: 3 tokens of A at 0.5 each, no EOS step.
    config = DecodeConfig(beam_size=beam_size, nbest=beam_size, max_length_offset=1)
    found = search(TableStepModel(NEVER_ENDS), oracle_sources(0), config)[0]
    [limited] = [item for item in found if item.tokens == [A, A, A]]
    assert limited.num_steps == 3
    assert limited.confidence == pytest.approx(0.5)  # read as 4 steps it would be 0.125 ** (1 / 4) = 0.59
    for ended in (item for item in found if item is not limited):  # beam search also keeps EOS endings
        assert ended.num_steps == len(ended.tokens) + 1
        assert ended.confidence == pytest.approx((0.5 ** len(ended.tokens) * 0.4) ** (1 / ended.num_steps))


def test_sampled_hypotheses_record_their_steps() -> None:
    config = DecodeConfig(sampling=True, nbest=4, seed=3)
    for item in search(TableStepModel(GARDEN_PATH), oracle_sources(0), config)[0]:
        assert item.num_steps == len(item.tokens) + 1
        assert item.confidence == pytest.approx(math.exp(item.log_prob / item.num_steps))


def test_the_translators_candidates_carry_their_hypotheses_confidence(trained_run: Path) -> None:
    translator = Translator.from_checkpoint(trained_run, decode_config=DecodeConfig(beam_size=3, nbest=2))
    sentences = ["the cat sees the dog", "a small house"]
    candidates = translator.translate_nbest(sentences)
    src_tokens = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(translator._encode(sentence)) for sentence in sentences],
        batch_first=True,
        padding_value=translator.model.config.pad_id,
    )
    hypotheses = translator.search_tokens(src_tokens)
    for found, expected in zip(candidates, hypotheses, strict=True):
        assert [item.confidence for item in found] == [item.confidence for item in expected]
        assert all(0.0 < item.confidence < 1.0 for item in found)
