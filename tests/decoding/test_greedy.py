import pytest
import torch

from tests.decoding.oracle_step_model import EOS, A, B, C, TableStepModel, gnmt_penalty, log, oracle_sources
from transformer.config.decode import DecodeConfig
from transformer.decoding.greedy import RowOutputs, greedy_search
from transformer.decoding.search import Hypothesis

# Greedy takes A (0.6) but A's continuations are weak; B (0.4) continues for sure.
GARDEN_PATH = {(): {A: 0.6, B: 0.4}, (A,): {C: 0.55, B: 0.45}, (B,): {C: 1.0}}
# EOS is the most likely next token until min_length forbids it.
EARLY_EOS = {(): {EOS: 0.6, A: 0.4}, (A,): {EOS: 0.7, B: 0.3}}
# A is always more likely than EOS: only the length limit stops it.
NEVER_ENDS = {(A,) * k: {A: 0.5, EOS: 0.4} for k in range(60)}


def test_greedy_takes_the_locally_best_token() -> None:
    [[hypothesis]] = greedy_search(TableStepModel(GARDEN_PATH), oracle_sources(0), DecodeConfig())
    expected_log_prob = log(0.6, 0.55, 1.0)  # A, C, then EOS (a prefix missing from the table ends)
    assert hypothesis.tokens == [A, C]
    assert hypothesis.log_prob == pytest.approx(expected_log_prob)
    assert hypothesis.score == pytest.approx(expected_log_prob / gnmt_penalty(3, 0.6))


@pytest.mark.parametrize(
    ("min_length", "tokens", "probabilities"),
    [(0, [], (0.6,)), (1, [A], (0.4, 0.7)), (2, [A, B], (0.4, 0.3, 1.0))],
)
def test_min_length_forbids_eos(min_length: int, tokens: list[int], probabilities: tuple[float, ...]) -> None:
    config = DecodeConfig(min_length=min_length, length_penalty=0.0)
    [[hypothesis]] = greedy_search(TableStepModel(EARLY_EOS), oracle_sources(0), config)
    assert hypothesis == Hypothesis(
        tokens, pytest.approx(log(*probabilities)), pytest.approx(log(*probabilities))
    )


def test_length_limit_finishes_hypotheses_as_they_are() -> None:
    # Sources of 2 and 4 tokens with offset 1: at most 3 and 5 output tokens, no EOS appended.
    src_tokens = oracle_sources(0, 0, lengths=(2, 4))
    hypotheses = greedy_search(TableStepModel(NEVER_ENDS), src_tokens, DecodeConfig(max_length_offset=1))
    assert [h.tokens for [h] in hypotheses] == [[A] * 3, [A] * 5]
    assert hypotheses[0][0].log_prob == pytest.approx(log(0.5, 0.5, 0.5))
    assert hypotheses[1][0].score == pytest.approx(log(*[0.5] * 5) / gnmt_penalty(5, 0.6))
    [[capped]] = greedy_search(TableStepModel(NEVER_ENDS), src_tokens[:1], DecodeConfig(max_length=2))
    assert capped.tokens == [A, A]


def test_finished_sentences_leave_the_batch_and_the_loop_stops() -> None:
    step_model = TableStepModel(EARLY_EOS, NEVER_ENDS)
    hypotheses = greedy_search(step_model, oracle_sources(0, 1), DecodeConfig(max_length=4))
    assert [h.tokens for [h] in hypotheses] == [[], [A] * 4]
    assert step_model.rows_per_step == [2, 1, 1, 1]


def test_batch_gives_the_same_hypotheses_as_one_sentence_at_a_time() -> None:
    tables = (GARDEN_PATH, EARLY_EOS, NEVER_ENDS)
    src_tokens = oracle_sources(2, 0, 1, 2, lengths=(3, 2, 5, 6))
    config = DecodeConfig(max_length_offset=2, min_length=1)
    batched = greedy_search(TableStepModel(*tables), src_tokens, config)
    for row, result in enumerate(batched):
        sentence = src_tokens[row : row + 1]
        assert greedy_search(TableStepModel(*tables), sentence, config) == [result]


def test_greedy_rejects_nbest_above_one_and_accepts_an_empty_batch() -> None:
    with pytest.raises(ValueError, match="nbest=2"):
        greedy_search(TableStepModel(GARDEN_PATH), oracle_sources(0), DecodeConfig(nbest=2))
    assert greedy_search(TableStepModel(GARDEN_PATH), torch.zeros(0, 3, dtype=torch.long)) == []


def test_row_outputs_keep_the_results_of_rows_done_earlier() -> None:
    rows = RowOutputs.empty(3, 4, pad_id=0, device=torch.device("cpu"))
    eos = 2
    rows.record(
        0,
        torch.tensor([0, 1, 2]),
        torch.tensor([5, eos, 6]),
        torch.tensor([-0.5, -0.25, -1.0]),
        torch.zeros(3, dtype=torch.bool),
        eos,
    )
    # Row 1 ended with EOS at step 0; it is still in the batch (and still computes) at step 1.
    done = torch.tensor([False, True, False])
    rows.record(
        1, torch.tensor([0, 1, 2]), torch.tensor([eos, 7, 8]), torch.tensor([-1.0, -3.0, -1.5]), done, eos
    )
    assert rows.num_steps.tolist() == [2, 1, 2] and rows.ends_with_eos.tolist() == [True, True, False]
    assert rows.log_probs.tolist() == [-1.0, -0.25, -1.5]
    hypotheses = rows.hypotheses(DecodeConfig(length_penalty=0.0))
    assert [hypothesis.tokens for hypothesis in hypotheses] == [[5], [], [6, 8]]
    assert [hypothesis.score for hypothesis in hypotheses] == [-1.0, -0.25, -1.5]
