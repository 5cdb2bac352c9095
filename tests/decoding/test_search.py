import math

import pytest
import torch

from tests.decoding.oracle_step_model import EOS, A, B, TableState, TableStepModel, oracle_sources
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.decoding.search import (
    Hypothesis,
    NonFiniteScoresError,
    build_hypotheses,
    check_src_tokens,
    forbid_tokens,
    length_penalty,
    normalise_scores,
    output_length_limits,
)


def test_gnmt_length_penalty_follows_wu_et_al() -> None:
    num_steps = torch.tensor([1, 7, 25])
    expected = torch.tensor([1.0, 2.0**0.6, 5.0**0.6])
    torch.testing.assert_close(length_penalty(num_steps, 0.6, "gnmt"), expected)


def test_power_length_penalty_and_alpha_zero() -> None:
    num_steps = torch.tensor([1, 4, 9])
    torch.testing.assert_close(length_penalty(num_steps, 0.5, "power"), torch.tensor([1.0, 2.0, 3.0]))
    torch.testing.assert_close(length_penalty(num_steps, 0.0, "gnmt"), torch.ones(3))
    with pytest.raises(ValueError, match="'linear'"):
        length_penalty(num_steps, 1.0, "linear")


def test_normalised_scores_favour_longer_outputs_as_alpha_grows() -> None:
    log_probs = torch.tensor([-2.0, -2.0])
    num_steps = torch.tensor([2, 10])
    scores = normalise_scores(log_probs, num_steps, DecodeConfig(length_penalty=1.0))
    assert scores[0].item() == pytest.approx(-2.0 / (7 / 6))
    assert scores[1].item() == pytest.approx(-2.0 / (15 / 6))
    assert normalise_scores(torch.tensor([-math.inf]), torch.tensor([3]), DecodeConfig())[0] == -math.inf


def test_output_length_limits_count_non_padding_source_tokens() -> None:
    src_tokens = torch.tensor([[5, 6, 7, 2], [5, 2, 0, 0]])
    torch.testing.assert_close(output_length_limits(src_tokens, 0, DecodeConfig()), torch.tensor([54, 52]))
    capped = DecodeConfig(max_length_offset=3, max_length=6)
    torch.testing.assert_close(output_length_limits(src_tokens, 0, capped), torch.tensor([6, 5]))
    # min_length overrides the source-relative limit, never max_length.
    forced = DecodeConfig(max_length_offset=0, min_length=3, max_length=3)
    torch.testing.assert_close(output_length_limits(src_tokens, 0, forced), torch.tensor([3, 3]))
    empty_row = torch.tensor([[0, 0]])
    assert output_length_limits(empty_row, 0, DecodeConfig(max_length_offset=0)).tolist() == [1]


def test_forbid_tokens_blocks_padding_and_bos_always_and_eos_before_min_length() -> None:
    step_log_probs = torch.log_softmax(torch.randn(2, 6), dim=-1)
    special_ids = torch.tensor([0, 1, 2])
    config = DecodeConfig(min_length=2)
    early = forbid_tokens(step_log_probs, 1, config, special_ids)
    assert torch.isinf(early[:, :3]).all()
    torch.testing.assert_close(early[:, 3:], step_log_probs[:, 3:])
    late = forbid_tokens(step_log_probs, 2, config, special_ids)
    assert torch.isinf(late[:, :2]).all()
    torch.testing.assert_close(late[:, 2:], step_log_probs[:, 2:])
    assert torch.isfinite(step_log_probs).all()  # the input is not modified


def test_build_hypotheses_strips_only_a_final_eos() -> None:
    tokens = torch.tensor([[7, 8, 2, 0], [7, 8, 9, 9]])
    hypotheses = build_hypotheses(
        tokens,
        num_steps=torch.tensor([3, 4]),
        ends_with_eos=torch.tensor([True, False]),
        log_probs=torch.tensor([-1.0, -2.0]),
        scores=torch.tensor([-0.5, -0.25]),
    )
    assert hypotheses == [Hypothesis([7, 8], -0.5, -1.0), Hypothesis([7, 8, 9, 9], -0.25, -2.0)]


@pytest.mark.parametrize("bad", [torch.zeros(3, dtype=torch.long), torch.zeros(2, 3)])
def test_check_src_tokens_rejects_wrong_shape_or_dtype(bad: torch.Tensor) -> None:
    with pytest.raises(ValueError, match=r"int64 tensor of shape \(batch, src_len\)"):
        check_src_tokens(bad)


@pytest.mark.parametrize(
    ("special_ids", "always_forbidden"),
    [
        ([0, 1, 2], [0, 1]),
        ([0, 0, 2], [0]),  # HuggingFace Marian starts decoding from its pad token
        ([0, 2, 2], [0]),  # BOS is EOS: allowed as EOS once min_length tokens are out
    ],
)
def test_forbid_tokens_never_forbids_eos_from_min_length_on(
    special_ids: list[int], always_forbidden: list[int]
) -> None:
    step_log_probs = torch.log_softmax(torch.randn(3, 5), dim=-1)
    config = DecodeConfig(min_length=1)
    for step, forbidden in [(0, sorted({*always_forbidden, 2})), (1, always_forbidden)]:
        found = forbid_tokens(step_log_probs, step, config, torch.tensor(special_ids))
        expected = step_log_probs.clone()
        expected[:, forbidden] = -math.inf
        assert torch.equal(found, expected)


class NaNAtStepModel(TableStepModel):
    """The oracle's tables, but every log-probability of one step is NaN (as damaged weights give)."""

    def __init__(self, nan_step: int) -> None:
        super().__init__({(): {A: 0.6, B: 0.3, EOS: 0.1}, (A,): {B: 0.7, EOS: 0.3}, (A, B): {EOS: 1.0}})
        self.nan_step, self.steps = nan_step, 0

    def log_probs(self, state: TableState, last_tokens: torch.Tensor) -> torch.Tensor:
        log_probs = super().log_probs(state, last_tokens)
        self.steps += 1
        return torch.full_like(log_probs, math.nan) if self.steps - 1 == self.nan_step else log_probs


@pytest.mark.parametrize("beam_size", [1, 2])
def test_nan_scores_stop_the_search_instead_of_giving_no_hypothesis(beam_size: int) -> None:
    config = DecodeConfig(beam_size=beam_size, max_length_offset=4)
    found = search(NaNAtStepModel(nan_step=99), oracle_sources(0), config)
    assert [hypothesis.tokens for hypothesis in found[0]] == [[A, B]]  # the oracle's best, no NaN step
    with pytest.raises(NonFiniteScoresError, match="the model computes NaN scores"):
        search(NaNAtStepModel(nan_step=1), oracle_sources(0), config)
