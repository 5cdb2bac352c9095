"""Sampling: the drawn distribution is the truncated, renormalised softmax; seeds reproduce; top-k 1 is greedy."""

import dataclasses
import math
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor

from tests.decoding.oracle_step_model import EOS, A, B, C, TableStepModel, log, oracle_sources, random_tables
from tests.decoding.test_transformer_decoding import padded_sources
from transformer import Transformer, TransformerConfig
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.decoding.greedy import greedy_search
from transformer.decoding.sampling import counter_uniforms, hash_32, sample_search, sampling_distribution
from transformer.model.quantization import quantize_for_inference

PAD, BOS = 0, 1
#: First-token probabilities of the fixed model over ids 3..9 (EOS has 0 at the first step).
WORD_PROBABILITIES = [0.30, 0.22, 0.15, 0.12, 0.09, 0.07, 0.05]
WORDS = list(range(3, 3 + len(WORD_PROBABILITIES)))


@dataclass
class FixedState:
    steps: Tensor


class FixedDistributionStepModel:
    """One word drawn from WORD_PROBABILITIES, then EOS for sure; vectorised, so 20,000 rows are cheap."""

    pad_id, bos_id, eos_id = PAD, BOS, EOS

    def start(self, src_tokens: Tensor) -> FixedState:
        return FixedState(torch.zeros(src_tokens.size(0), dtype=torch.long))

    def log_probs(self, state: FixedState, last_tokens: Tensor) -> Tensor:
        first = torch.full((3 + len(WORD_PROBABILITIES),), -math.inf)
        first[3:] = torch.tensor(WORD_PROBABILITIES).log()
        then = torch.full_like(first, -math.inf)
        then[EOS] = 0.0
        rows = torch.where((state.steps == 0)[:, None], first, then)
        state.steps = state.steps + 1
        return rows

    def reorder(self, state: FixedState, row_indices: Tensor) -> None:
        state.steps = state.steps[row_indices]


def reference_distribution(config: DecodeConfig) -> dict[int, float]:
    """The truncated, renormalised distribution, written out rule by rule in plain Python."""
    scaled = [p ** (1 / config.temperature) for p in WORD_PROBABILITIES]
    probabilities = {word: value / sum(scaled) for word, value in zip(WORDS, scaled, strict=True)}
    ranked = sorted(WORDS, key=lambda word: -probabilities[word])
    kept = ranked[: config.top_k] if config.top_k else ranked
    kept_mass = sum(probabilities[word] for word in kept)
    nucleus, mass = [], 0.0
    for word in kept:
        if mass < config.top_p:
            nucleus.append(word)
        mass += probabilities[word] / kept_mass
    final = [word for word in nucleus if probabilities[word] >= config.epsilon] or ranked[:1]
    total = sum(probabilities[word] for word in final)
    return {word: probabilities[word] / total for word in final}


def chi_squared_p_value(counts: dict[int, int], expected: dict[int, float], draws: int) -> float:
    """Pearson's test of counts against a distribution; a token outside its support fails outright."""
    if set(counts) - set(expected):
        return 0.0
    statistic = sum((counts.get(word, 0) - draws * p) ** 2 / (draws * p) for word, p in expected.items())
    degrees = len(expected) - 1
    if degrees == 0:
        return 1.0
    # The chi-squared survival function is the regularised upper incomplete gamma function.
    return float(torch.special.gammaincc(torch.tensor(degrees / 2), torch.tensor(statistic / 2)))


def draw_counts(config: DecodeConfig) -> dict[int, int]:
    [samples] = sample_search(FixedDistributionStepModel(), torch.tensor([[5, EOS]]), config)
    assert len(samples) == config.nbest
    counts: dict[int, int] = {}
    for sample in samples:
        [word] = sample.tokens
        counts[word] = counts.get(word, 0) + 1
    return counts


DRAWS = 20_000
SETTINGS = [
    DecodeConfig(sampling=True, nbest=DRAWS),
    DecodeConfig(sampling=True, nbest=DRAWS, temperature=0.7),
    DecodeConfig(sampling=True, nbest=DRAWS, top_k=3),
    DecodeConfig(sampling=True, nbest=DRAWS, top_p=0.6),
    DecodeConfig(sampling=True, nbest=DRAWS, epsilon=0.08),
    DecodeConfig(sampling=True, nbest=DRAWS, temperature=1.5, top_k=5, top_p=0.75, epsilon=0.1),
]


def test_the_reference_truncations_keep_the_tokens_worked_out_by_hand() -> None:
    # Top-p 0.6: 0.30 + 0.22 = 0.52 < 0.6, so the third word (0.15) crosses it and is kept.
    assert set(reference_distribution(SETTINGS[3])) == set(WORDS[:3])
    assert set(reference_distribution(SETTINGS[2])) == set(WORDS[:3])
    assert set(reference_distribution(SETTINGS[4])) == set(WORDS[:5])  # 0.09 >= 0.08 > 0.07
    assert reference_distribution(SETTINGS[2])[WORDS[0]] == pytest.approx(0.30 / 0.67)


@pytest.mark.parametrize("config", SETTINGS, ids=["plain", "temperature", "top-k", "top-p", "epsilon", "all"])
def test_samples_follow_the_truncated_renormalised_softmax(config: DecodeConfig) -> None:
    counts = draw_counts(config)
    assert chi_squared_p_value(counts, reference_distribution(config), DRAWS) > 1e-3


@pytest.mark.parametrize(
    ("config", "wrong"),
    [
        # The test has the power to see each rule applied wrongly or not at all.
        (SETTINGS[1], dataclasses.replace(SETTINGS[1], temperature=1.0)),
        (SETTINGS[1], dataclasses.replace(SETTINGS[1], temperature=0.8)),
        (SETTINGS[2], dataclasses.replace(SETTINGS[2], top_k=4)),
        (SETTINGS[3], dataclasses.replace(SETTINGS[3], top_p=0.5)),  # the crossing token dropped
        (SETTINGS[4], dataclasses.replace(SETTINGS[4], epsilon=0.1)),
    ],
)
def test_the_chi_squared_test_rejects_a_wrong_truncation(config: DecodeConfig, wrong: DecodeConfig) -> None:
    assert reference_distribution(wrong) != pytest.approx(reference_distribution(config))
    assert chi_squared_p_value(draw_counts(config), reference_distribution(wrong), DRAWS) < 1e-6


def lowbias32(value: int) -> int:
    """Wellons's lowbias32 with Python's unbounded integers, reduced modulo 2**32 at each product."""
    value ^= value >> 16
    value = (value * 0x7FEB352D) % 2**32
    value ^= value >> 15
    value = (value * 0x846CA68B) % 2**32
    return value ^ (value >> 16)


def test_uniforms_are_uniform_and_the_hash_is_lowbias32() -> None:
    values = [0, 1, 2, 12345, 2**31 - 1, 2**31, 2**32 - 1]
    assert hash_32(torch.tensor(values)).tolist() == [lowbias32(value) for value in values]
    uniforms = counter_uniforms(torch.arange(50_000), step=3)
    assert float(uniforms.min()) >= 0.0 and float(uniforms.max()) < 1.0
    deciles = torch.histc(uniforms, bins=10, min=0.0, max=1.0)
    assert ((deciles - 5000).abs() < 250).all()  # 3.5 standard deviations


def test_sampling_distribution_always_keeps_the_most_probable_token() -> None:
    log_probs = torch.tensor([[math.log(0.5), math.log(0.3), math.log(0.2)]])
    probabilities, order = sampling_distribution(log_probs, DecodeConfig(sampling=True, epsilon=0.6))
    assert order is not None and order[0].tolist() == [0, 1, 2]
    assert probabilities[0].tolist() == pytest.approx([0.5, 0.0, 0.0])


def test_top_k_one_is_greedy_search_on_an_oracle() -> None:
    tables = random_tables(seed=3, num_tables=4, max_prefix_len=4)
    src_tokens = oracle_sources(0, 1, 2, 3, lengths=(3, 4, 2, 5))
    config = DecodeConfig(beam_size=1, max_length_offset=3)
    greedy = greedy_search(TableStepModel(*tables), src_tokens, config)
    for seed in (0, 1, 2):
        sampled_config = dataclasses.replace(config, sampling=True, top_k=1, temperature=0.5, seed=seed)
        assert sample_search(TableStepModel(*tables), src_tokens, sampled_config) == greedy


def test_samples_report_the_models_own_log_probability() -> None:
    table = {(): {A: 0.5, B: 0.5}, (A,): {C: 0.5, EOS: 0.5}, (B,): {EOS: 1.0}, (A, C): {EOS: 1.0}}
    config = DecodeConfig(sampling=True, nbest=64, temperature=3.0, length_penalty=0.0)
    [samples] = sample_search(TableStepModel(table), oracle_sources(0), config)
    expected = {(A,): log(0.5, 0.5), (B,): log(0.5, 1.0), (A, C): log(0.5, 0.5, 1.0)}
    assert {tuple(sample.tokens) for sample in samples} == set(expected)
    for sample in samples:
        assert sample.log_prob == pytest.approx(expected[tuple(sample.tokens)])
    assert [sample.score for sample in samples] == sorted((s.score for s in samples), reverse=True)


def test_a_seed_gives_the_same_samples_whatever_the_batch() -> None:
    tables = random_tables(seed=5, num_tables=3, max_prefix_len=5)
    src_tokens = oracle_sources(0, 1, 2, 1, lengths=(2, 3, 4, 5))
    config = DecodeConfig(sampling=True, nbest=4, seed=11, max_length_offset=4)
    batched = sample_search(TableStepModel(*tables), src_tokens, config)
    for row in range(src_tokens.size(0)):
        alone = sample_search(TableStepModel(*tables), src_tokens[row : row + 1, : 2 + row], config)
        assert alone == [batched[row]]
    reversed_batch = sample_search(TableStepModel(*tables), src_tokens.flip(0), config)
    assert reversed_batch == batched[::-1]
    other_seed = sample_search(TableStepModel(*tables), src_tokens, dataclasses.replace(config, seed=12))
    assert other_seed != batched


def test_search_dispatches_sampling_and_refuses_mbr() -> None:
    config = DecodeConfig(sampling=True, nbest=3, seed=2)
    step_model = FixedDistributionStepModel()
    assert search(step_model, torch.tensor([[5, EOS]]), config) == sample_search(
        step_model, torch.tensor([[5, EOS]]), config
    )
    with pytest.raises(ValueError, match="mbr_search"):
        search(step_model, torch.tensor([[5, EOS]]), DecodeConfig(mbr=4))


@pytest.fixture
def random_model(tiny_config: TransformerConfig) -> Transformer:
    return Transformer(tiny_config).eval()


def test_transformer_sampling_is_the_same_cached_uncached_and_top_k_one_is_greedy(
    random_model: Transformer, tiny_config: TransformerConfig
) -> None:
    src_tokens = padded_sources(tiny_config, [7, 3, 5, 6], torch.Generator().manual_seed(0))
    config = DecodeConfig(sampling=True, nbest=3, temperature=1.3, top_p=0.9, max_length_offset=5, seed=4)
    cached = sample_search(random_model, src_tokens, config)
    uncached = sample_search(random_model, src_tokens, dataclasses.replace(config, use_cache=False))
    assert [[h.tokens for h in s] for s in cached] == [[h.tokens for h in s] for s in uncached]
    assert len({tuple(h.tokens) for s in cached for h in s}) > 4  # samples differ from one another
    greedy_config = DecodeConfig(beam_size=1, max_length_offset=5)
    top_one = dataclasses.replace(greedy_config, sampling=True, top_k=1)
    greedy = greedy_search(random_model, src_tokens, greedy_config)
    assert [[h.tokens for h in s] for s in sample_search(random_model, src_tokens, top_one)] == [
        [h.tokens for h in s] for s in greedy
    ]


def test_int8_sampling_with_top_k_one_is_int8_greedy(tiny_config: TransformerConfig) -> None:
    model = quantize_for_inference(Transformer(tiny_config).eval())
    src_tokens = padded_sources(tiny_config, [6, 4], torch.Generator().manual_seed(1))
    greedy = greedy_search(model, src_tokens, DecodeConfig(beam_size=1, max_length_offset=4))
    top_one = DecodeConfig(sampling=True, top_k=1, max_length_offset=4)
    assert [s[0].tokens for s in sample_search(model, src_tokens, top_one)] == [s[0].tokens for s in greedy]
