"""Decoding with a vocabulary shortlist: the full vocabulary's results when it covers it, in every search and
precision; per-sentence normalisation; the measured step coverage; and the checkpoint's shortlist file."""

import copy
import shutil
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from tests.conftest import requires_cpu_bf16
from transformer.checkpoint.model_checkpoint import load_checkpoint, load_checkpoint_tokenizer
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.batch import pad_sequences
from transformer.data.shortlist import SHORTLIST_FILE, Shortlist, ShortlistError, vocabulary_fingerprint
from transformer.decoding.beam_search import search
from transformer.decoding.checkpoint_shortlist import build_checkpoint_shortlist, load_checkpoint_shortlist
from transformer.decoding.greedy import greedy_search
from transformer.decoding.shortlist import RestrictedProjection, ShortlistStepModel
from transformer.decoding.shortlist_coverage import measure_step_coverage
from transformer.decoding.translator import Translator
from transformer.model.quantization import quantize_for_inference
from transformer.model.transformer import Transformer

SENTENCES = ["the cat sees the dog", "a small house", "the dog runs to the small cat", "a cat"]
SEARCHES = [
    DecodeConfig(beam_size=1, max_length_offset=8),
    DecodeConfig(beam_size=3, nbest=2, max_length_offset=8),
    DecodeConfig(sampling=True, nbest=3, seed=7, top_k=10, max_length_offset=8),
]


def shortlist_of(
    model: Transformer, tokenizer, candidates: dict[int, list[int]], always: list[int]
) -> Shortlist:
    """A hand-made shortlist: ``candidates`` per source id, ``always`` for every sentence."""
    size = model.config.src_vocab_size
    lists = [sorted(candidates.get(source, [])) for source in range(size)]
    offsets = torch.tensor([0, *torch.tensor([len(items) for items in lists]).cumsum(0).tolist()])
    flat = torch.tensor([token for items in lists for token in items], dtype=torch.long)
    return Shortlist(
        vocabulary_fingerprint(tokenizer, size),
        model.config.tgt_vocab_size,
        offsets,
        flat,
        torch.tensor(sorted(set(always)), dtype=torch.long),
    )


@pytest.fixture
def loaded(trained_run: Path) -> tuple[Transformer, object, torch.Tensor]:
    checkpoint = load_checkpoint(trained_run)
    tokenizer = load_checkpoint_tokenizer(checkpoint.path)
    model = checkpoint.build_model().eval()
    assert isinstance(model, Transformer)
    sources = [[*tokenizer.encode(sentence), model.config.eos_id] for sentence in SENTENCES]
    return model, tokenizer, pad_sequences(sources, model.config.pad_id)


def covering(model: Transformer, tokenizer) -> Shortlist:
    return shortlist_of(model, tokenizer, {}, list(range(model.config.tgt_vocab_size)))


@pytest.mark.parametrize("config", SEARCHES, ids=["greedy", "beam", "sampling"])
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_a_covering_shortlist_gives_the_full_vocabularys_results(loaded, config, precision) -> None:
    model, tokenizer, src_tokens = loaded
    if precision == "int8":
        model = quantize_for_inference(copy.deepcopy(model))
    expected = search(model, src_tokens, config)
    assert search(ShortlistStepModel(model, covering(model, tokenizer)), src_tokens, config) == expected
    # Candidates per source piece that add up to the whole vocabulary do the same.
    everything = list(range(model.config.tgt_vocab_size))
    per_source = shortlist_of(
        model, tokenizer, {int(token): everything for token in src_tokens.flatten()}, [2]
    )
    assert search(ShortlistStepModel(model, per_source), src_tokens, config) == expected


@requires_cpu_bf16
def test_a_covering_shortlist_in_bf16(loaded) -> None:
    model, tokenizer, src_tokens = loaded
    model = copy.deepcopy(model).to(torch.bfloat16)
    for config in SEARCHES:
        expected = search(model, src_tokens, config)
        assert search(ShortlistStepModel(model, covering(model, tokenizer)), src_tokens, config) == expected


def test_each_row_is_normalised_over_its_own_sentences_shortlist(loaded) -> None:
    model, _, _ = loaded
    torch.manual_seed(0)
    hidden = torch.randn(3, model.config.d_model)
    first, second = torch.tensor([2, 5, 9, 20]), torch.tensor([2, 7, 9])
    projection = RestrictedProjection(model, [first, second])
    assert projection.size == 5  # the union {2, 5, 7, 9, 20}
    with torch.inference_mode():
        log_probs = projection.log_probs(hidden, torch.tensor([0, 1, 1]))
        logits = model.project_output(hidden[:, None])[:, 0]
    for row, allowed in enumerate([first, second, second]):
        expected = F.log_softmax(logits[row, allowed], dim=-1)
        torch.testing.assert_close(log_probs[row, allowed], expected)
        outside = torch.ones(model.config.tgt_vocab_size, dtype=torch.bool)
        outside[allowed] = False
        assert bool(log_probs[row, outside].isneginf().all())


def test_a_translation_does_not_depend_on_its_batch(loaded) -> None:
    model, tokenizer, src_tokens = loaded
    # A small shortlist: each source piece's candidates are itself and the next ids, plus EOS and two pieces.
    pieces = {token: [token, token + 1, token + 2] for token in range(4, model.config.tgt_vocab_size - 2)}
    shortlist = shortlist_of(model, tokenizer, pieces, [2, 3, 10, 11])
    step_model = ShortlistStepModel(model, shortlist)
    config = DecodeConfig(beam_size=3, max_length_offset=8)
    batched = search(step_model, src_tokens, config)
    for index in range(src_tokens.size(0)):
        row = src_tokens[index : index + 1]
        alone = search(step_model, row[:, : int((row != 0).sum())], config)
        assert [hypothesis.tokens for hypothesis in alone[0]] == [
            hypothesis.tokens for hypothesis in batched[index]
        ]
        for ours, theirs in zip(alone[0], batched[index], strict=True):
            assert ours.log_prob == pytest.approx(theirs.log_prob, abs=1e-5)
        allowed = set(shortlist.sentence_tokens(row[0]).tolist())
        assert all(set(hypothesis.tokens) <= allowed for hypothesis in batched[index])


def test_step_coverage_counts_the_full_vocabularys_greedy_tokens(loaded, trained_run: Path) -> None:
    model, tokenizer, src_tokens = loaded
    greedy = DecodeConfig(beam_size=1, max_length_offset=8)
    translator = Translator.from_checkpoint(trained_run, greedy, "cpu")
    assert measure_step_coverage(translator, SENTENCES, covering(model, tokenizer)).fraction == 1.0
    chosen = [hypotheses[0].tokens for hypotheses in greedy_search(model, src_tokens, greedy)]
    common = sorted({token for tokens in chosen for token in tokens})[:3]  # the shortlist holds these only
    partial = shortlist_of(model, tokenizer, {}, [2, *common])
    coverage = measure_step_coverage(translator, [*SENTENCES, "  "], partial)
    assert coverage.steps == sum(len(tokens) for tokens in chosen)
    assert coverage.covered == sum(token in common for tokens in chosen for token in tokens)
    assert coverage.mean_shortlist_size == len(partial.always)
    # Where the shortlist held every step's best token, the shortlisted search gives the same tokens.
    restricted = greedy_search(ShortlistStepModel(model, partial), src_tokens, greedy)
    for tokens, found in zip(chosen, restricted, strict=True):
        if set(tokens) <= set(common):
            assert found[0].tokens == tokens


def test_another_vocabularys_shortlist_is_refused_naming_both(loaded) -> None:
    model, tokenizer, _ = loaded
    stranger = Shortlist(
        "0123456789abcdef",
        150,
        torch.zeros(151, dtype=torch.long),
        torch.zeros(0, dtype=torch.long),
        torch.tensor([2]),
    )
    expected = vocabulary_fingerprint(tokenizer, model.config.src_vocab_size)
    with pytest.raises(ValueError, match=f"built for vocabulary 0123456789abcdef, the model's is {expected}"):
        Translator(model, tokenizer, device="cpu", shortlist=stranger)


def test_the_checkpoint_shortlist_is_built_from_the_runs_data_and_used(
    trained_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    built = build_checkpoint_shortlist(run, per_source=20, frequent=30)
    checkpoint_dir = built.path.parent
    assert built.path.name == SHORTLIST_FILE and built.pairs == 300
    assert built.source_file == run / "data" / "train.en"
    # Not a tokenizer file: the checkpoint still loads and does not carry it along.
    checkpoint = load_checkpoint(checkpoint_dir)
    assert SHORTLIST_FILE not in checkpoint.tokenizer_files()
    shortlist = load_checkpoint_shortlist(run)
    assert torch.equal(shortlist.candidates, built.shortlist.candidates)
    config = DecodeConfig(beam_size=2, max_length_offset=8)
    texts = Translator.from_checkpoint(run, config, "cpu", shortlist=True).translate(SENTENCES)
    assert len(texts) == len(SENTENCES)
    (tmp_path / "other").mkdir()
    with pytest.raises(ShortlistError, match=r"other/shortlist.safetensors: no such shortlist file"):
        Translator.from_checkpoint(run, config, "cpu", shortlist=tmp_path / "other" / SHORTLIST_FILE)


def test_an_averaged_checkpoint_needs_the_files_named(tmp_path: Path, trained_run: Path) -> None:
    checkpoint_dir = tmp_path / "lonely"
    shutil.copytree(load_checkpoint(trained_run).path, checkpoint_dir)
    (checkpoint_dir / "trainer_state.json").unlink()
    with pytest.raises(ShortlistError, match=r"no readable trainer_state.json .* pass the training pairs"):
        build_checkpoint_shortlist(checkpoint_dir)
    with pytest.raises(ValueError, match="--source and --target go together"):
        build_checkpoint_shortlist(checkpoint_dir, source_file=tmp_path / "a")


@pytest.mark.parametrize("fp32_kernels", ["mkl", "onednn"])
def test_a_covering_shortlist_through_the_translator_whatever_the_fp32_kernel(
    loaded, fp32_kernels: str
) -> None:
    from transformer.model.fp32_kernels import onednn_linear_unavailable_reason

    if fp32_kernels == "onednn" and onednn_linear_unavailable_reason() is not None:
        pytest.skip(str(onednn_linear_unavailable_reason()))
    model, tokenizer, _ = loaded
    config = DecodeConfig(beam_size=3, max_length_offset=8)
    plain = Translator(copy.deepcopy(model), tokenizer, config, "cpu", fp32_kernels=fp32_kernels)
    shortlisted = Translator(
        copy.deepcopy(model),
        tokenizer,
        config,
        "cpu",
        fp32_kernels=fp32_kernels,
        shortlist=covering(model, tokenizer),
    )
    expected = [[(item.text, item.score) for item in found] for found in plain.translate_nbest(SENTENCES)]
    found = [[(item.text, item.score) for item in found] for found in shortlisted.translate_nbest(SENTENCES)]
    assert found == expected


class FullWidthOnly:
    """A shortlisted step model seen through its full-width interface alone (no ``column_log_probs``)."""

    def __init__(self, step_model: ShortlistStepModel) -> None:
        self.inner = step_model
        self.pad_id, self.bos_id, self.eos_id = step_model.pad_id, step_model.bos_id, step_model.eos_id
        self.start, self.log_probs, self.reorder = step_model.start, step_model.log_probs, step_model.reorder
        self.max_output_length = getattr(step_model, "max_output_length", None)
        self.model = step_model.model

    def __getattr__(self, name: str):
        if name.startswith("column_"):
            raise AttributeError(name)
        return getattr(self.inner, name)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("min_length", [0, 3])
def test_greedy_over_the_unions_columns_equals_the_whole_width(loaded, precision, min_length) -> None:
    model, tokenizer, src_tokens = loaded
    if precision == "int8":
        model = quantize_for_inference(copy.deepcopy(model))
    # Each source piece allows itself and the next ids; the special tokens and a few pieces always.
    size = model.config.tgt_vocab_size
    pieces = {token: [token, token + 1, token + 2] for token in range(4, size - 2)}
    shortlist = shortlist_of(model, tokenizer, pieces, [0, 1, 2, 3, 10, 11])
    step_model = ShortlistStepModel(model, shortlist)
    state = step_model.start(src_tokens)
    union = step_model.column_token_ids(state)
    assert 6 < union.numel() < size  # a real restriction, so the columns differ from the vocabulary
    config = DecodeConfig(beam_size=1, max_length_offset=8, min_length=min_length)
    columns = greedy_search(step_model, src_tokens, config)
    whole = greedy_search(FullWidthOnly(step_model), src_tokens, config)
    assert [[(h.tokens, h.log_prob, h.score) for h in found] for found in columns] == [
        [(h.tokens, h.log_prob, h.score) for h in found] for found in whole
    ]
    assert any(len(found[0].tokens) > 1 for found in columns)
    # Every output token is a column's token; the columns' scores are the full width's at those tokens.
    with torch.inference_mode():
        last = torch.full((src_tokens.size(0),), model.config.bos_id)
        narrow = step_model.column_log_probs(step_model.start(src_tokens), last)
        wide = step_model.log_probs(step_model.start(src_tokens), last)
    assert torch.equal(narrow, wide[:, union])
    outside = torch.ones(size, dtype=torch.bool)
    outside[union] = False
    assert bool(wide[:, outside].isneginf().all())


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("min_length", [0, 3])
def test_beam_search_over_the_unions_columns_equals_the_whole_width(loaded, precision, min_length) -> None:
    model, tokenizer, src_tokens = loaded
    if precision == "int8":
        model = quantize_for_inference(copy.deepcopy(model))
    size = model.config.tgt_vocab_size
    pieces = {token: [token, token + 1, token + 2] for token in range(4, size - 2)}
    step_model = ShortlistStepModel(model, shortlist_of(model, tokenizer, pieces, [0, 1, 2, 3, 10, 11]))
    with torch.inference_mode():
        union = step_model.column_token_ids(step_model.start(src_tokens))
    assert 6 < union.numel() < size
    config = DecodeConfig(beam_size=3, nbest=3, max_length_offset=8, min_length=min_length)
    columns = search(step_model, src_tokens, config)
    whole = search(FullWidthOnly(step_model), src_tokens, config)
    found = [[(h.tokens, h.log_prob, h.score) for h in hypotheses] for hypotheses in columns]
    assert found == [[(h.tokens, h.log_prob, h.score) for h in hypotheses] for hypotheses in whole]
    assert all(len(hypotheses) == 3 for hypotheses in columns)  # every slot filled: nbest compared whole
    # Every token is a token of the union (a column index taken for a token would mostly fall outside it).
    tokens = {token for hypotheses in columns for hypothesis in hypotheses for token in hypothesis.tokens}
    assert tokens <= set(union.tolist()) and max(tokens) > union.numel()


def test_a_shortlist_without_the_special_tokens_keeps_the_whole_width(loaded) -> None:
    from transformer.decoding.greedy import scored_columns

    model, tokenizer, src_tokens = loaded
    without_bos = shortlist_of(model, tokenizer, {}, [0, 2, 5, 6])
    step_model = ShortlistStepModel(model, without_bos)
    special_ids = torch.tensor([model.config.pad_id, model.config.bos_id, model.config.eos_id])
    config = DecodeConfig(beam_size=1)
    with torch.inference_mode():
        state = step_model.start(src_tokens)
        assert scored_columns(step_model, state, special_ids, config, None) is None
        with_all = ShortlistStepModel(model, shortlist_of(model, tokenizer, {}, [0, 1, 2, 5, 6]))
        found = scored_columns(with_all, with_all.start(src_tokens), special_ids, config, None)
        assert found is not None and found[0].tolist() == [0, 1, 2, 5, 6] and found[1].tolist() == [0, 1, 2]
        blocked = DecodeConfig(beam_size=1, no_repeat_ngram=2)
        assert scored_columns(with_all, with_all.start(src_tokens), special_ids, blocked, None) is None
        empty = ShortlistStepModel(model, shortlist_of(model, tokenizer, {}, []))
        assert scored_columns(empty, empty.start(src_tokens), special_ids, config, None) is None
