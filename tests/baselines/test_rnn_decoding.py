"""Greedy search, beam search and n-best lists drive the recurrent model through its own step model."""

import dataclasses

import pytest
import torch

from tests.decoding.assertions import assert_same_hypotheses
from transformer.baselines import RNNConfig, RNNEncoderDecoder
from transformer.baselines.rnn_step_model import RNNStepModel
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import beam_search, search
from transformer.decoding.greedy import greedy_search
from transformer.decoding.step_model import as_step_model, inference_context

SEARCHES = [greedy_search, beam_search]


def random_sources(config: RNNConfig, lengths: list[int], seed: int = 0) -> torch.Tensor:
    """Random sentences of the given lengths (EOS included), right-padded."""
    generator = torch.Generator().manual_seed(seed)
    src_tokens = torch.full((len(lengths), max(lengths)), config.pad_id)
    for row, length in enumerate(lengths):
        src_tokens[row, : length - 1] = torch.randint(
            4, config.vocab_size, (length - 1,), generator=generator
        )
        src_tokens[row, length - 1] = config.eos_id
    return src_tokens


@pytest.fixture(
    params=[("general", True), ("additive", True), ("dot", False)], ids=lambda p: f"{p[0]}-{p[1]}"
)
def model(request: pytest.FixtureRequest) -> RNNEncoderDecoder:
    scoring, input_feeding = request.param
    config = RNNConfig(
        vocab_size=30,
        embedding_dim=16,
        hidden_size=16,
        num_encoder_layers=2,
        num_decoder_layers=2,
        attention=scoring,
        input_feeding=input_feeding,
    )
    torch.manual_seed(0)
    model = RNNEncoderDecoder(config)
    with torch.no_grad():  # sharper distributions than the uniform initialisation's: fewer near-ties
        model.src_embedding.weight.mul_(20)
    return model.eval()


@pytest.mark.parametrize("search_function", SEARCHES)
def test_cached_and_uncached_decoding_give_the_same_tokens_and_scores(model, search_function) -> None:
    src_tokens = random_sources(model.config, [7, 3, 5, 1, 6])
    config = DecodeConfig(max_length_offset=6, nbest=1 if search_function is greedy_search else 3)
    cached = search_function(model, src_tokens, config)
    uncached = search_function(model, src_tokens, dataclasses.replace(config, use_cache=False))
    assert_same_hypotheses(cached, uncached, tolerance=1e-5)
    assert any(hypothesis.tokens for sentence in cached for hypothesis in sentence)


def test_beam_size_one_equals_greedy_and_nbest_is_sorted(model) -> None:
    src_tokens = random_sources(model.config, [4, 6, 2])
    config = DecodeConfig(beam_size=1, max_length_offset=8)
    assert beam_search(model, src_tokens, config) == greedy_search(model, src_tokens, config)
    nbest = search(model, src_tokens, DecodeConfig(beam_size=4, nbest=4, max_length_offset=8))
    for sentence in nbest:
        assert len(sentence) == 4
        assert [h.score for h in sentence] == sorted((h.score for h in sentence), reverse=True)


def test_a_sentence_decodes_the_same_alone_and_in_a_batch(model) -> None:
    src_tokens = random_sources(model.config, [7, 3, 5], seed=1)
    config = DecodeConfig(beam_size=3, max_length_offset=5)
    batched = beam_search(model, src_tokens, config)
    alone = beam_search(model, src_tokens[1:2, :3], config)
    assert_same_hypotheses([batched[1]], alone, tolerance=1e-5)


def test_as_step_model_asks_the_model_and_the_search_restores_training_mode(model) -> None:
    step_model = as_step_model(model, use_cache=False)
    assert isinstance(step_model, RNNStepModel) and not step_model.use_cache
    assert (step_model.pad_id, step_model.bos_id, step_model.eos_id) == (0, 1, 2)
    assert step_model.max_output_length is None
    model.train()
    model.decoder.eval()  # one submodule already in eval mode stays so
    with inference_context(step_model):
        assert not model.training and not model.dropout.training
    assert model.training and model.dropout.training and not model.decoder.training


def test_reorder_follows_rows_in_both_modes(model) -> None:
    src_tokens = random_sources(model.config, [5, 3])
    rows = torch.tensor([1, 1, 0])
    tokens = torch.tensor([1, 1, 1])
    results = []
    for use_cache in (True, False):
        step_model = RNNStepModel(model, use_cache)
        with torch.no_grad():
            state = step_model.start(src_tokens)
            step_model.log_probs(state, torch.tensor([1, 1]))
            step_model.reorder(state, rows)
            results.append(step_model.log_probs(state, tokens + 4))
            assert state.encoding.memory.size(0) == 3
    torch.testing.assert_close(results[0], results[1])
    torch.testing.assert_close(results[0][0], results[0][1])  # two copies of sentence 1
