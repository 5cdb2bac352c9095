import itertools
import math

import pytest
import torch

from tests.decoding.oracle_step_model import EOS, A, B, C, TableStepModel, gnmt_penalty, log, oracle_sources
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import beam_search, search
from transformer.decoding.greedy import greedy_search
from transformer.decoding.search import Hypothesis

# Greedy takes A (0.6) but A's continuations are weak; B (0.4) continues for sure.
GARDEN_PATH = {(): {A: 0.6, B: 0.4}, (A,): {C: 0.55, B: 0.45}, (B,): {C: 1.0}}
# A short hypothesis [A] (0.55) against a long one [B, C, C] (0.45 * 0.9 * 0.9 = 0.3645).
SHORT_OR_LONG = {(): {A: 0.55, B: 0.45}, (B,): {C: 0.9}, (B, C): {C: 0.9}}
# EOS first is most likely; min_length decides what may finish.
EARLY_EOS = {(): {EOS: 0.6, A: 0.4}, (A,): {EOS: 0.7, B: 0.3}}
# No EOS anywhere: only the length limit finishes hypotheses.
NO_EOS = {(): {A: 0.6, B: 0.4}, (A,): {A: 0.6, B: 0.4}, (B,): {A: 0.8, B: 0.2}}
# Two hypotheses finish within two steps; a long one, [B, C, C, ...], would score better with the penalty.
LATE_BLOOMER = {(): {EOS: 0.5, A: 0.45, B: 0.05}, **{(B,) + (C,) * k: {C: 1.0} for k in range(8)}}


def test_beam_search_finds_the_sequence_greedy_misses() -> None:
    config = DecodeConfig(beam_size=2, nbest=2)
    best, second = beam_search(TableStepModel(GARDEN_PATH), oracle_sources(0), config)[0]
    assert best.tokens == [B, C]
    assert best.log_prob == pytest.approx(log(0.4, 1.0, 1.0))
    assert best.score == pytest.approx(log(0.4) / gnmt_penalty(3, 0.6))
    assert second.tokens == [A, C]
    assert second.log_prob == pytest.approx(log(0.6, 0.55, 1.0))
    [[greedy]] = greedy_search(TableStepModel(GARDEN_PATH), oracle_sources(0))
    assert greedy == second


@pytest.mark.parametrize(
    ("form", "alpha", "winner"),
    [
        ("gnmt", 0.0, [A]),
        ("gnmt", 0.6, [A]),
        ("gnmt", 3.0, [B, C, C]),
        ("power", 0.5, [A]),
        ("power", 1.0, [B, C, C]),
    ],
)
def test_length_penalty_decides_between_a_short_and_a_long_hypothesis(
    form: str, alpha: float, winner: list[int]
) -> None:
    def penalty(num_steps: int) -> float:
        return gnmt_penalty(num_steps, alpha) if form == "gnmt" else num_steps**alpha

    short = Hypothesis([A], log(0.55) / penalty(2), log(0.55))
    long = Hypothesis([B, C, C], log(0.45, 0.9, 0.9) / penalty(4), log(0.45, 0.9, 0.9))
    expected = sorted([short, long], key=lambda hypothesis: hypothesis.score, reverse=True)
    assert expected[0].tokens == winner  # the hand computation agrees with the parametrisation
    config = DecodeConfig(beam_size=2, nbest=2, length_penalty=alpha, length_penalty_form=form)
    found = beam_search(TableStepModel(SHORT_OR_LONG), oracle_sources(0), config)[0]
    assert [h.tokens for h in found] == [h.tokens for h in expected]
    assert [h.score for h in found] == pytest.approx([h.score for h in expected])
    assert [h.log_prob for h in found] == pytest.approx([h.log_prob for h in expected])
    if alpha == 0.0:  # no penalty: the best hypothesis has the largest raw log-probability
        assert found[0].log_prob == max(h.log_prob for h in found)


def test_min_length_forbids_eos_in_beam_search() -> None:
    config = DecodeConfig(beam_size=2, nbest=2, length_penalty=0.0)
    free = beam_search(TableStepModel(EARLY_EOS), oracle_sources(0), config)[0]
    assert [(h.tokens, h.log_prob) for h in free] == [
        ([], pytest.approx(log(0.6))),
        ([A], pytest.approx(log(0.4, 0.7))),
    ]
    step_model = TableStepModel(EARLY_EOS)
    forced = beam_search(step_model, oracle_sources(0), DecodeConfig(beam_size=2, nbest=2, min_length=2))[0]
    # Only [A, B] + EOS has non-zero probability with two tokens or more; then no beam is left, so it stops.
    assert [h.tokens for h in forced] == [[A, B]]
    assert forced[0].log_prob == pytest.approx(log(0.4, 0.3, 1.0))
    assert len(step_model.rows_per_step) == 3


def test_length_limit_finishes_the_best_beams_as_they_are() -> None:
    config = DecodeConfig(beam_size=2, nbest=2, max_length=2)
    found = beam_search(TableStepModel(NO_EOS), oracle_sources(0), config)[0]
    # After two steps: AA 0.36, BA 0.32, AB 0.24, BB 0.08; the best two finish without EOS.
    assert [h.tokens for h in found] == [[A, A], [B, A]]
    assert found[0].log_prob == pytest.approx(log(0.6, 0.6))
    assert found[0].score == pytest.approx(log(0.6, 0.6) / gnmt_penalty(2, 0.6))
    assert found[1].log_prob == pytest.approx(log(0.4, 0.8))


def test_nbest_is_sorted_by_score_not_by_finishing_order() -> None:
    config = DecodeConfig(beam_size=3, nbest=3, length_penalty=1.0, length_penalty_form="power", max_length=8)
    found = beam_search(TableStepModel(LATE_BLOOMER), oracle_sources(0), config)[0]
    assert [h.tokens for h in found] == [[B] + [C] * 7, [A], []]
    expected_scores = [log(0.05) / 8, log(0.45, 1.0) / 2, log(0.5) / 1]
    assert [h.score for h in found] == pytest.approx(expected_scores)
    assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)


def test_a_sentence_stops_once_beam_size_hypotheses_have_finished() -> None:
    """The documented stopping rule: no waiting for live beams that could still win after normalisation."""
    config = DecodeConfig(beam_size=2, nbest=2, length_penalty=1.0, length_penalty_form="power", max_length=8)
    step_model = TableStepModel(LATE_BLOOMER)
    found = beam_search(step_model, oracle_sources(0), config)[0]
    assert [h.tokens for h in found] == [[A], []]
    assert step_model.rows_per_step == [2, 2]  # stopped after two steps, though [B, C, ...] was still live
    # With one more beam, the long hypothesis is found and wins (previous test).


def test_batch_gives_the_same_hypotheses_as_one_sentence_at_a_time() -> None:
    tables = (GARDEN_PATH, SHORT_OR_LONG, EARLY_EOS, NO_EOS, LATE_BLOOMER)
    src_tokens = oracle_sources(4, 0, 3, 1, 2, 3, lengths=(2, 4, 3, 2, 5, 6))
    config = DecodeConfig(beam_size=3, nbest=2, max_length_offset=2)
    step_model = TableStepModel(*tables)
    batched = beam_search(step_model, src_tokens, config)
    for row, result in enumerate(batched):
        alone = beam_search(TableStepModel(*tables), src_tokens[row : row + 1, : 2 + row], config)
        assert alone == [result]
    # Done sentences leave the batch: 6 sentences x 3 beams at first, fewer rows later.
    assert step_model.rows_per_step[0] == 18
    assert step_model.rows_per_step == sorted(step_model.rows_per_step, reverse=True)
    assert step_model.rows_per_step[-1] < 18


@pytest.mark.parametrize("table", [GARDEN_PATH, SHORT_OR_LONG, EARLY_EOS, NO_EOS, LATE_BLOOMER])
@pytest.mark.parametrize("min_length", [0, 2])
def test_beam_size_one_takes_greedy_tokens(table, min_length: int) -> None:
    config = DecodeConfig(beam_size=1, min_length=min_length, max_length=6)
    assert beam_search(TableStepModel(table), oracle_sources(0), config) == greedy_search(
        TableStepModel(table), oracle_sources(0), config
    )


def test_search_dispatches_on_beam_size() -> None:
    greedy_model, beam_model = TableStepModel(GARDEN_PATH), TableStepModel(GARDEN_PATH)
    assert search(greedy_model, oracle_sources(0), DecodeConfig(beam_size=1))[0][0].tokens == [A, C]
    assert greedy_model.rows_per_step == [1, 1, 1]
    assert search(beam_model, oracle_sources(0))[0][0].tokens == [B, C]
    assert beam_model.rows_per_step[0] == 4  # the paper's beam of 4


def test_beam_search_accepts_an_empty_batch_and_rejects_bad_sources() -> None:
    assert beam_search(TableStepModel(GARDEN_PATH), torch.zeros(0, 2, dtype=torch.long)) == []
    with pytest.raises(ValueError, match="int64"):
        beam_search(TableStepModel(GARDEN_PATH), torch.zeros(1, 2))


def random_table(generator: torch.Generator, max_prefix_len: int) -> dict[tuple[int, ...], dict[int, float]]:
    """A random next-token distribution over EOS, A, B and C after every prefix of words."""
    table = {}
    for prefix in itertools.chain.from_iterable(
        itertools.product((A, B, C), repeat=n) for n in range(max_prefix_len + 1)
    ):
        weights = torch.rand(4, generator=generator) + 0.05
        table[prefix] = dict(zip((EOS, A, B, C), (weights / weights.sum()).tolist(), strict=True))
    return table


def test_a_beam_wide_enough_for_every_hypothesis_ranks_them_like_exhaustive_search() -> None:
    """With max_length 3 there are 1 + 3 + 9 hypotheses ending in EOS and 27 cut at the limit: 40 in all."""
    table = random_table(torch.Generator().manual_seed(3), max_prefix_len=2)
    expected = []
    for length in range(4):
        for words in itertools.product((A, B, C), repeat=length):
            prefixes = [words[:i] for i in range(length)]
            log_prob = sum(
                math.log(table[prefix][word]) for prefix, word in zip(prefixes, words, strict=True)
            )
            if length < 3:
                log_prob += math.log(table[words][EOS])
            num_steps = min(length + 1, 3)
            expected.append(Hypothesis(list(words), log_prob / gnmt_penalty(num_steps, 0.6), log_prob))
    expected.sort(key=lambda hypothesis: hypothesis.score, reverse=True)
    config = DecodeConfig(beam_size=40, nbest=40, max_length=3)
    found = beam_search(TableStepModel(table), oracle_sources(0), config)[0]
    assert [h.tokens for h in found] == [h.tokens for h in expected]
    assert [h.score for h in found] == pytest.approx([h.score for h in expected], abs=1e-5)
    assert [h.log_prob for h in found] == pytest.approx([h.log_prob for h in expected], abs=1e-5)
