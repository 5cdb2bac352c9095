"""ContinuousBatch against the offline searches: each sentence decodes as it would alone, whatever joins."""

import random

import pytest
import torch

from transformer import TransformerConfig
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.kernels.native_build import build_native_extension
from transformer.kernels.native_step import NativeDecoderStep, unsupported_reason
from transformer.model.transformer import Transformer
from transformer.serving.continuous_batching import ContinuousBatch, DecodedSentence, SentenceToDecode


def random_model(**overrides: object) -> Transformer:
    """An untrained model: near-uniform scores, so a wrong row, position or mask changes the tokens."""
    torch.manual_seed(0)
    values: dict = {
        "vocab_size": 40,
        "d_model": 32,
        "d_ff": 64,
        "num_heads": 4,
        "num_encoder_layers": 2,
        "num_decoder_layers": 2,
        "dropout": 0.0,
    }
    values.update(overrides)
    return Transformer(TransformerConfig(**values)).eval()


def random_sources(model: Transformer, count: int, seed: int) -> list[list[int]]:
    generator = random.Random(seed)
    eos = model.config.eos_id
    return [
        [generator.randrange(4, 40) for _ in range(generator.randrange(1, 16))] + [eos] for _ in range(count)
    ]


def run_staggered(
    batch: ContinuousBatch, sentences: list[SentenceToDecode], seed: int
) -> tuple[dict[object, DecodedSentence], dict[object, int], dict[object, int]]:
    """Admit 0-3 sentences before each step, at random; return results, admission and end steps by key."""
    generator = random.Random(seed)
    pending, results, admitted_at, ended_at = list(sentences), {}, {}, {}
    step = 0
    with torch.inference_mode():
        while pending or batch.num_sentences:
            count = generator.randrange(0, 4)
            batch.admit(pending[:count])
            for sentence in pending[:count]:
                admitted_at[sentence.key] = step
            pending = pending[count:]
            for result in batch.step():
                results[result.key] = result
                ended_at[result.key] = step
            step += 1
    return results, admitted_at, ended_at


def alone(model: Transformer, src_ids: list[int], config: DecodeConfig) -> list:
    with torch.inference_mode():
        return search(model, torch.tensor([src_ids]), config)[0]


@pytest.mark.parametrize(
    ("beam_size", "overrides"),
    [
        (1, {}),
        (3, {}),
        (2, {"positional_encoding": "learned", "max_positions": 24}),
        (1, {"attention_window": 2}),
        (2, {"norm_first": True}),
    ],
)
@pytest.mark.parametrize("native", [False, True], ids=["python step", "native step"])
def test_each_sentence_decodes_as_alone_whatever_joins_and_leaves(
    beam_size: int, overrides: dict, native: bool
) -> None:
    model = random_model(**overrides)
    native_step = None
    if native:  # the C++ step with each row's own position and self mask, against the Python search alone
        if unsupported_reason(model) is not None:
            pytest.skip(f"the native step does not cover this model: {unsupported_reason(model)}")
        build = build_native_extension()
        if build.module is None:
            pytest.skip(build.note)
        native_step = NativeDecoderStep(model, build.module)
    sources = random_sources(model, 30, seed=1)
    # Per-sentence settings that share a batch: length penalty, length limits, n-best.
    configs = [
        DecodeConfig(
            beam_size=beam_size,
            length_penalty=[0.0, 0.6, 1.0][index % 3],
            max_length_offset=[3, 8][index % 2],
            min_length=index % 3,
            nbest=1 + index % beam_size,
        )
        for index in range(len(sources))
    ]
    sentences = [SentenceToDecode(index, ids, configs[index]) for index, ids in enumerate(sources)]
    batch = ContinuousBatch(model, beam_size, native_step=native_step)
    results, _, _ = run_staggered(batch, sentences, seed=2)
    assert sorted(results) == list(range(len(sources)))
    for index, ids in enumerate(sources):
        expected = alone(model, ids, configs[index])
        found = results[index].hypotheses
        assert [item.tokens for item in found] == [item.tokens for item in expected], index
        for got, want in zip(found, expected, strict=True):
            assert got.score == pytest.approx(want.score, abs=1e-4)
            assert got.log_prob == pytest.approx(want.log_prob, abs=1e-4)
    assert batch.num_sentences == 0 and batch.num_rows == 0 and batch.source_tokens == 0


def test_a_short_sentence_leaves_long_before_a_long_one_that_came_first() -> None:
    model = random_model()
    config = DecodeConfig(beam_size=1, max_length_offset=50, min_length=40)  # the long one runs >= 40 steps
    short = DecodeConfig(beam_size=1, max_length_offset=2)
    batch = ContinuousBatch(model, 1)
    with torch.inference_mode():
        batch.admit([SentenceToDecode("long", [5, 6, 7, model.config.eos_id], config)])
        for _ in range(3):
            assert batch.step() == []
        batch.admit([SentenceToDecode("short", [5, model.config.eos_id], short)])
        ended = {}
        for step in range(3, 100):
            for result in batch.step():
                ended[result.key] = step
            if len(ended) == 2:
                break
    assert ended["short"] <= 3 + 4  # at most its 4-token limit after it joined
    assert ended["long"] >= 40
    assert batch.num_sentences == 0


def test_dropped_sentences_leave_and_the_others_decode_unchanged() -> None:
    model = random_model()
    config = DecodeConfig(beam_size=2, max_length_offset=6)
    sources = random_sources(model, 6, seed=3)
    batch = ContinuousBatch(model, 2)
    results = {}
    with torch.inference_mode():
        batch.admit([SentenceToDecode(index, ids, config) for index, ids in enumerate(sources)])
        batch.step()
        assert batch.drop({1, 4, "not running"}) == 2
        assert batch.num_sentences == 4
        while batch.num_sentences:
            results.update({result.key: result for result in batch.step()})
    assert sorted(results) == [0, 2, 3, 5]
    for index in results:
        assert results[index].hypotheses[0].tokens == alone(model, sources[index], config)[0].tokens


def test_memory_follows_the_running_sentences() -> None:
    model = random_model()
    batch = ContinuousBatch(model, 1)
    long_source = [5] * 30 + [model.config.eos_id]
    with torch.inference_mode():
        batch.admit([SentenceToDecode("long", long_source, DecodeConfig(beam_size=1, max_length_offset=1))])
        batch.admit([SentenceToDecode("short", [5, 2], DecodeConfig(beam_size=1, min_length=20))])
        while "long" in batch.keys:
            batch.step()
        # The long source's columns and the self-attention columns only it used are gone.
        assert batch.cache.layers[0].cross_key.size(2) == 2
        assert batch.cache.cross_attend_mask is not None and batch.cache.cross_attend_mask.size(-1) == 2
        assert batch.self_valid.all()


def test_admit_refuses_another_beam_size_and_an_empty_source() -> None:
    model = random_model()
    batch = ContinuousBatch(model, 2)
    with pytest.raises(ValueError, match="asks for beam size 1, this batch runs 2"):
        batch.admit([SentenceToDecode("a", [5, 2], DecodeConfig(beam_size=1))])
    with pytest.raises(ValueError, match="has no source tokens"):
        batch.admit([SentenceToDecode("b", [], DecodeConfig(beam_size=2))])
    assert batch.num_sentences == 0


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_shortlist_decodes_each_sentence_as_offline(beam_size: int) -> None:
    from transformer.data.shortlist import build_shortlist
    from transformer.decoding.shortlist import ShortlistStepModel

    model = random_model()
    sources = random_sources(model, 24, seed=4)
    # Candidates from made-up pairs: every sentence gets its own shortlist, most of them far from all 40 ids.
    generator = random.Random(5)
    pairs = [
        ([generator.randrange(4, 40)], [generator.randrange(4, 40) for _ in range(3)]) for _ in range(200)
    ]
    shortlist = build_shortlist(pairs, 40, 40, [0, 1, 2, 3], "test", per_source=3, frequent=4)
    configs = [DecodeConfig(beam_size=beam_size, max_length_offset=[3, 8][index % 2]) for index in range(24)]
    sentences = [SentenceToDecode(index, ids, configs[index]) for index, ids in enumerate(sources)]
    batch = ContinuousBatch(model, beam_size, shortlist)
    results, _, _ = run_staggered(batch, sentences, seed=6)
    restricted = ShortlistStepModel(model, shortlist)
    differs_from_full = 0
    for index, ids in enumerate(sources):
        expected = alone(restricted, ids, configs[index])
        found = results[index].hypotheses
        assert [item.tokens for item in found] == [item.tokens for item in expected], index
        for got, want in zip(found, expected, strict=True):
            assert got.log_prob == pytest.approx(want.log_prob, abs=1e-4)
        allowed = set(shortlist.sentence_tokens(ids).tolist())
        assert all(set(item.tokens) <= allowed for item in found)
        differs_from_full += [item.tokens for item in found] != [
            item.tokens for item in alone(model, ids, configs[index])
        ]
    assert differs_from_full > 0  # the shortlist did restrict: the test would see a batch that ignored it
    assert batch.num_sentences == 0 and batch.sentence_tokens == []


def test_a_covering_shortlist_in_the_batch_gives_the_full_vocabularys_results() -> None:
    from transformer.data.shortlist import build_shortlist

    model = random_model()
    sources = random_sources(model, 12, seed=7)
    shortlist = build_shortlist([([5], [6])], 40, 40, [0, 1, 2, 3], "test", per_source=0, frequent=40)
    config = DecodeConfig(beam_size=2, max_length_offset=6)
    sentences = [SentenceToDecode(index, ids, config) for index, ids in enumerate(sources)]
    with_shortlist, _, _ = run_staggered(ContinuousBatch(model, 2, shortlist), sentences, seed=8)
    without, _, _ = run_staggered(ContinuousBatch(model, 2), sentences, seed=8)
    for index in range(len(sources)):
        assert with_shortlist[index].hypotheses == without[index].hypotheses
