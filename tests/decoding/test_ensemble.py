"""Ensembles: the exact average of hand-set distributions, and each real model with its own cache."""

import dataclasses
import math

import pytest
import torch

from tests.decoding.assertions import assert_same_hypotheses
from tests.decoding.oracle_step_model import EOS, A, B, C, TableStepModel, log, oracle_sources
from tests.decoding.test_transformer_decoding import padded_sources
from transformer import Transformer, TransformerConfig
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import beam_search, search
from transformer.decoding.ensemble import EnsembleStepModel
from transformer.decoding.greedy import greedy_search
from transformer.decoding.step_model import TransformerStepModel

# The mixture prefers A (0.425 against 0.375); the geometric mean prefers B (sqrt(.135) > sqrt(.105)).
CONFIDENT_A = {(): {A: 0.7, B: 0.3}, (A,): {EOS: 1.0}, (B,): {EOS: 1.0}}
PREFERS_B = {(): {A: 0.15, B: 0.45, C: 0.4}, (A,): {EOS: 1.0}, (B,): {EOS: 1.0}, (C,): {EOS: 1.0}}


def first_step_log_probs(mode: str) -> torch.Tensor:
    ensemble = EnsembleStepModel([TableStepModel(CONFIDENT_A), TableStepModel(PREFERS_B)], mode)
    state = ensemble.start(oracle_sources(0))
    return ensemble.log_probs(state, torch.tensor([ensemble.bos_id]))[0]


def test_prob_mode_is_the_mean_of_the_probabilities() -> None:
    probabilities = first_step_log_probs("prob").exp()
    assert probabilities[[A, B, C]].tolist() == pytest.approx([0.425, 0.375, 0.2])
    assert float(probabilities.sum()) == pytest.approx(1.0)


def test_logprob_mode_is_the_renormalised_mean_of_the_log_probabilities() -> None:
    probabilities = first_step_log_probs("logprob").exp()
    geometric = [math.sqrt(0.7 * 0.15), math.sqrt(0.3 * 0.45), 0.0]  # C: 0 in the first model vetoes it
    assert probabilities[[A, B, C]].tolist() == pytest.approx([g / sum(geometric) for g in geometric])
    assert float(probabilities.sum()) == pytest.approx(1.0)


@pytest.mark.parametrize(("mode", "winner"), [("prob", A), ("logprob", B)])
def test_the_modes_choose_differently(mode: str, winner: int) -> None:
    ensemble = EnsembleStepModel([TableStepModel(CONFIDENT_A), TableStepModel(PREFERS_B)], mode)
    [[hypothesis]] = greedy_search(ensemble, oracle_sources(0), DecodeConfig(beam_size=1))
    assert hypothesis.tokens == [winner]
    expected = {"prob": log(0.425), "logprob": math.log(geometric_share := math.sqrt(0.3 * 0.45))}
    if mode == "logprob":
        expected["logprob"] -= math.log(geometric_share + math.sqrt(0.7 * 0.15))
    assert hypothesis.log_prob == pytest.approx(expected[mode])


def test_members_with_different_special_ids_are_refused() -> None:
    other = TableStepModel(CONFIDENT_A)
    other.eos_id = 5
    with pytest.raises(ValueError, match="ensemble model 2 has pad/start/eos ids"):
        EnsembleStepModel([TableStepModel(CONFIDENT_A), other])
    with pytest.raises(ValueError, match="ensemble mode 'mean'"):
        EnsembleStepModel([TableStepModel(CONFIDENT_A)], "mean")


@pytest.fixture
def two_models(tiny_config: TransformerConfig) -> list[Transformer]:
    torch.manual_seed(1)
    first = Transformer(tiny_config).eval()
    torch.manual_seed(2)
    return [first, Transformer(tiny_config).eval()]


@pytest.mark.parametrize("mode", ["prob", "logprob"])
def test_an_ensemble_of_one_model_twice_decodes_as_the_model(two_models, tiny_config, mode) -> None:
    src_tokens = padded_sources(tiny_config, [6, 3, 5], torch.Generator().manual_seed(0))
    config = DecodeConfig(beam_size=3, nbest=2, max_length_offset=5)
    model = two_models[0]
    twice = EnsembleStepModel([TransformerStepModel(model), TransformerStepModel(model)], mode)
    assert_same_hypotheses(
        beam_search(twice, src_tokens, config), beam_search(model, src_tokens, config), tolerance=1e-4
    )


@pytest.mark.parametrize("beam_size", [1, 4])
def test_each_member_keeps_its_own_cache(two_models, tiny_config, beam_size) -> None:
    src_tokens = padded_sources(tiny_config, [7, 3, 5, 6], torch.Generator().manual_seed(3))
    config = DecodeConfig(beam_size=beam_size, max_length_offset=6)

    def ensemble(use_cache: bool) -> EnsembleStepModel:
        return EnsembleStepModel([TransformerStepModel(model, use_cache) for model in two_models], "prob")

    cached = search(ensemble(True), src_tokens, config)
    uncached = search(ensemble(False), src_tokens, dataclasses.replace(config, use_cache=False))
    assert_same_hypotheses(cached, uncached, tolerance=1e-4)


def test_real_models_are_mixed_at_every_step(two_models, tiny_config) -> None:
    src_tokens = padded_sources(tiny_config, [5, 4], torch.Generator().manual_seed(4))
    members = [TransformerStepModel(model) for model in two_models]
    ensemble = EnsembleStepModel(members, "prob")
    states = [member.start(src_tokens) for member in members]
    ensemble_state = ensemble.start(src_tokens)
    with torch.inference_mode():
        for tokens in ([1, 1], [7, 9], [8, 4]):
            last_tokens = torch.tensor(tokens)
            expected = torch.stack(
                [m.log_probs(s, last_tokens) for m, s in zip(members, states, strict=True)]
            )
            mixed = ensemble.log_probs(ensemble_state, last_tokens)
            torch.testing.assert_close(mixed, torch.logsumexp(expected, dim=0) - math.log(2))
