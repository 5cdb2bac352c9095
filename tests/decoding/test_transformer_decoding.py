"""Greedy and beam search with a real (tiny, random or briefly trained) Transformer."""

import dataclasses

import pytest
import torch
from torch.nn import functional as F

from tests.decoding.assertions import assert_same_hypotheses
from transformer import Transformer, TransformerConfig
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import beam_search, search
from transformer.decoding.greedy import greedy_search

SEARCHES = [greedy_search, beam_search]


def padded_sources(config: TransformerConfig, lengths: list[int], generator: torch.Generator) -> torch.Tensor:
    """Random sentences of the given lengths (EOS included), right-padded."""
    src_tokens = torch.full((len(lengths), max(lengths)), config.pad_id)
    for row, length in enumerate(lengths):
        src_tokens[row, : length - 1] = torch.randint(
            4, config.vocab_size, (length - 1,), generator=generator
        )
        src_tokens[row, length - 1] = config.eos_id
    return src_tokens


@pytest.fixture
def random_model(tiny_config: TransformerConfig) -> Transformer:
    return Transformer(tiny_config).eval()


@pytest.fixture
def src_tokens(tiny_config: TransformerConfig) -> torch.Tensor:
    return padded_sources(tiny_config, [7, 3, 5, 1, 6], torch.Generator().manual_seed(0))


@pytest.mark.parametrize("search_function", SEARCHES)
def test_cached_and_uncached_decoding_give_the_same_tokens(random_model, src_tokens, search_function) -> None:
    config = DecodeConfig(max_length_offset=6, nbest=1 if search_function is greedy_search else 3)
    cached = search_function(random_model, src_tokens, config)
    uncached = search_function(random_model, src_tokens, dataclasses.replace(config, use_cache=False))
    assert_same_hypotheses(cached, uncached, tolerance=1e-4)


def test_beam_size_one_equals_greedy(random_model, src_tokens) -> None:
    config = DecodeConfig(beam_size=1, max_length_offset=8)
    assert beam_search(random_model, src_tokens, config) == greedy_search(random_model, src_tokens, config)
    assert search(random_model, src_tokens, config) == greedy_search(random_model, src_tokens, config)


@pytest.mark.parametrize("search_function", SEARCHES)
def test_batched_decoding_equals_one_sentence_at_a_time(random_model, src_tokens, search_function) -> None:
    config = DecodeConfig(max_length_offset=5, nbest=1 if search_function is greedy_search else 2)
    batched = search_function(random_model, src_tokens, config)
    lengths = src_tokens.ne(random_model.config.pad_id).sum(dim=1).tolist()
    alone = [
        search_function(random_model, src_tokens[row : row + 1, :length], config)[0]
        for row, length in enumerate(lengths)
    ]
    assert_same_hypotheses(batched, alone, tolerance=1e-4)


@pytest.mark.parametrize("search_function", SEARCHES)
def test_output_length_stays_within_source_length_plus_offset(
    random_model, src_tokens, search_function
) -> None:
    # An untrained model rarely predicts EOS: the limit ends its hypotheses.
    config = DecodeConfig(max_length_offset=3, nbest=1 if search_function is greedy_search else 4)
    found = search_function(random_model, src_tokens, config)
    limits = (src_tokens.ne(random_model.config.pad_id).sum(dim=1) + 3).tolist()
    assert all(
        len(h.tokens) <= limit for sentence, limit in zip(found, limits, strict=True) for h in sentence
    )
    assert [len(sentence[0].tokens) for sentence in found] == limits
    capped = search_function(random_model, src_tokens, dataclasses.replace(config, max_length=4))
    assert max(len(h.tokens) for sentence in capped for h in sentence) == 4


@pytest.mark.parametrize("search_function", SEARCHES)
def test_min_length_equal_to_max_length_forces_the_output_length(
    random_model, src_tokens, search_function
) -> None:
    config = DecodeConfig(min_length=9, max_length=9, nbest=1 if search_function is greedy_search else 4)
    found = search_function(random_model, src_tokens, config)
    assert {len(h.tokens) for sentence in found for h in sentence} == {9}
    assert {len(sentence) for sentence in found} == {config.nbest}


def test_greedy_log_prob_is_the_model_score_of_its_output(random_model, src_tokens) -> None:
    [[hypothesis]] = greedy_search(random_model, src_tokens[:1], DecodeConfig(max_length_offset=4))
    config = random_model.config
    ends_with_eos = len(hypothesis.tokens) < 7 + 4
    output = hypothesis.tokens + [config.eos_id] * ends_with_eos
    tgt_input = torch.tensor([[config.bos_id, *output[:-1]]])
    with torch.no_grad():
        log_probs = F.log_softmax(random_model(src_tokens[:1, :7], tgt_input), dim=-1)[0]
    expected = log_probs[torch.arange(len(output)), torch.tensor(output)].sum().item()
    assert hypothesis.log_prob == pytest.approx(expected, abs=1e-4)
    assert hypothesis.score == pytest.approx(expected / ((5 + len(output)) / 6) ** 0.6, abs=1e-4)


def test_without_length_penalty_the_best_hypothesis_has_the_highest_log_prob(
    random_model, src_tokens
) -> None:
    config = DecodeConfig(beam_size=4, nbest=4, length_penalty=0.0, max_length_offset=4)
    for sentence in beam_search(random_model, src_tokens, config):
        assert [h.score for h in sentence] == [h.log_prob for h in sentence]
        assert sentence[0].log_prob == max(h.log_prob for h in sentence)


COPY_TRAINING_STEPS = 400


@pytest.fixture(scope="module")
def copy_model() -> Transformer:
    """A tiny model trained for a few seconds to copy sentences of 2 to 6 tokens (plus EOS)."""
    torch.manual_seed(0)
    config = TransformerConfig(
        vocab_size=14,
        d_model=32,
        d_ff=128,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dropout=0.0,
    )
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    # Warm up, then decay linearly to zero: the last steps settle the model so every copy is exact.
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min((step + 1) / 30, (COPY_TRAINING_STEPS - step) / (COPY_TRAINING_STEPS - 30)),
    )
    generator = torch.Generator().manual_seed(0)
    for _ in range(COPY_TRAINING_STEPS):
        lengths = torch.randint(3, 8, (32,), generator=generator).tolist()
        src_tokens = padded_sources(config, lengths, generator)
        # Teacher forcing: BOS + the sentence without its EOS predicts the sentence with its EOS.
        tgt_input = torch.cat([torch.full((32, 1), config.bos_id), src_tokens[:, :-1]], dim=1)
        tgt_input = tgt_input.masked_fill(tgt_input == config.eos_id, config.pad_id)
        logits = model(src_tokens, tgt_input)
        loss = F.cross_entropy(logits.reshape(-1, 14), src_tokens.reshape(-1), ignore_index=config.pad_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    return model.eval()


@pytest.mark.parametrize("config", [DecodeConfig(beam_size=1), DecodeConfig(beam_size=4, nbest=2)])
def test_trained_copy_model_decodes_exact_copies(copy_model, config: DecodeConfig) -> None:
    lengths = [3, 7, 5, 4, 6, 7, 3, 5, 6, 6, 4, 7, 5, 3, 6, 4]  # 2 to 6 tokens plus EOS, as trained
    src_tokens = padded_sources(copy_model.config, lengths, torch.Generator().manual_seed(1))
    found = search(copy_model, src_tokens, config)
    expected = [[token for token in row if token not in (0, 2)] for row in src_tokens.tolist()]
    assert [sentence[0].tokens for sentence in found] == expected
    assert all(len(sentence) == config.nbest for sentence in found)
