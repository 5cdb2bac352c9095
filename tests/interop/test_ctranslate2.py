"""CTranslate2 export: its greedy (and, where the models agree on forbidden tokens, beam) outputs equal ours.

CTranslate2 removes suppressed tokens (PAD, BOS) *before* its softmax, our search after it, so beam scores
differ by the probability mass of those tokens. Greedy choices never differ; the beam comparison uses models
that give the forbidden tokens no probability (their logits bias set to -30).
"""

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.interop.marian_fixtures import ENGLISH, SOURCE_SENTENCES, pad_batch, write_our_checkpoint
from transformer.checkpoint.model_checkpoint import load_checkpoint, save_checkpoint
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.decoding.translator import Translator
from transformer.model.transformer import Transformer

OFFSET = 5


def export(checkpoint_dir: Path, output_dir: Path, quantization: str | None = None) -> Any:
    pytest.importorskip("ctranslate2")
    from transformer.interop.ctranslate2 import CTranslate2Translator, export_ctranslate2

    return CTranslate2Translator.from_directory(
        export_ctranslate2(checkpoint_dir, output_dir, quantization), threads=1
    )


def our_outputs(
    model: Transformer, src_ids: list[list[int]], beam_size: int, alpha: float
) -> list[list[int]]:
    config = DecodeConfig(
        beam_size=beam_size, length_penalty=alpha, length_penalty_form="power", max_length_offset=OFFSET
    )
    hypotheses = search(model, pad_batch(src_ids, model.config.pad_id), config)
    return [items[0].tokens for items in hypotheses]


@pytest.mark.parametrize(
    "checkpoint_name", ["paper_checkpoint", "variant_checkpoint", "imported_shared", "imported_separate"]
)
def test_greedy_matches_ours(checkpoint_name: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    checkpoint_dir = request.getfixturevalue(checkpoint_name)
    translator = export(checkpoint_dir, tmp_path / "ct2")
    model = load_checkpoint(checkpoint_dir).build_model()
    src_ids = [translator.encode(text) for text in SOURCE_SENTENCES + ENGLISH[:20]]
    assert translator.translate_ids(src_ids, beam_size=1, max_length_offset=OFFSET) == our_outputs(
        model, src_ids, 1, 0.0
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"norm_first": True, "output_bias": True, "activation": "silu"},
        {"positional_encoding": "learned", "max_positions": 128, "share_embeddings": False},
    ],
)
def test_other_architectures_greedy_match_ours(overrides: dict, tmp_path: Path) -> None:
    checkpoint_dir = write_our_checkpoint(tmp_path / "model", seed=8, **overrides)
    translator = export(checkpoint_dir, tmp_path / "ct2")
    model = load_checkpoint(checkpoint_dir).build_model()
    src_ids = [translator.encode(text) for text in SOURCE_SENTENCES + ENGLISH[:20]]
    expected = our_outputs(model, src_ids, 1, 0.0)
    assert translator.translate_ids(src_ids, beam_size=1, max_length_offset=OFFSET) == expected


@pytest.mark.parametrize("checkpoint_name", ["variant_checkpoint", "imported_shared"])
@pytest.mark.parametrize(("beam_size", "alpha"), [(4, 1.0), (4, 0.6), (3, 2.0)])
def test_beam_matches_ours_when_forbidden_tokens_have_no_probability(
    checkpoint_name: str, beam_size: int, alpha: float, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    checkpoint = load_checkpoint(request.getfixturevalue(checkpoint_name))
    model = checkpoint.build_model()
    assert model.output_bias is not None
    config = model.config
    # Marian's BOS is its EOS, which stays allowed.
    forbidden = [config.pad_id] + ([config.bos_id] if config.bos_id != config.eos_id else [])
    with torch.no_grad():
        model.output_bias[forbidden] = -30.0
    save_checkpoint(tmp_path / "model", model, model.config, checkpoint.tokenizer_files())
    translator = export(tmp_path / "model", tmp_path / "ct2")
    src_ids = [translator.encode(text) for text in SOURCE_SENTENCES + ENGLISH[:20]]
    ours = our_outputs(model, src_ids, beam_size, alpha)
    assert (
        translator.translate_ids(src_ids, beam_size=beam_size, length_penalty=alpha, max_length_offset=OFFSET)
        == ours
    )
    ended_by_eos = [len(tokens) < len(ids) + OFFSET for tokens, ids in zip(ours, src_ids, strict=True)]
    assert any(ended_by_eos)


def test_translate_gives_our_translators_text(paper_checkpoint: Path, tmp_path: Path) -> None:
    translator = export(paper_checkpoint, tmp_path / "ct2")
    ours = Translator.from_checkpoint(
        paper_checkpoint, DecodeConfig(beam_size=1, max_length_offset=OFFSET), device="cpu"
    )
    sentences = [*SOURCE_SENTENCES, "", "   "]
    assert translator.translate(sentences, beam_size=1, max_length_offset=OFFSET) == ours.translate(sentences)


def test_export_writes_model_tokenizer_and_config(imported_separate: Path, tmp_path: Path) -> None:
    export(imported_separate, tmp_path / "ct2", quantization="int8")
    names = {path.name for path in (tmp_path / "ct2").iterdir()}
    assert {
        "model.bin",
        "config.json",
        "transformer_config.json",
        "source.spm",
        "target.spm",
        "vocab.json",
        "target_vocab.json",
    } <= names
    settings = json.loads((tmp_path / "ct2" / "config.json").read_text())
    assert (settings["decoder_start_token"], settings["eos_token"]) == ("<pad>", "</s>")


def test_unsupported_model_and_quantization_are_named(tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    from transformer.interop.ctranslate2 import CTranslate2Translator, export_ctranslate2

    checkpoint_dir = write_our_checkpoint(tmp_path / "model", attention_scoring="additive")
    with pytest.raises(
        ValueError, match=r"TransformerConfig\.attention_scoring='additive' cannot be exported to CTranslate2"
    ):
        export_ctranslate2(checkpoint_dir, tmp_path / "ct2")
    with pytest.raises(ValueError, match="quantization='int3' is not one of"):
        export_ctranslate2(checkpoint_dir, tmp_path / "ct2", quantization="int3")
    with pytest.raises(ValueError, match=r"no transformer_config\.json"):
        CTranslate2Translator.from_directory(tmp_path)


def shortlisted_copy(checkpoint_dir: Path, destination: Path, per_source: int, frequent: int) -> Path:
    """Copy a checkpoint and store beside it a shortlist built from made-up pairs of its own sentences."""
    import random
    import shutil

    from transformer.checkpoint.model_checkpoint import load_checkpoint_tokenizer
    from transformer.data.shortlist import (
        SHORTLIST_FILE,
        build_shortlist,
        save_shortlist,
        vocabulary_fingerprint,
    )

    shutil.copytree(checkpoint_dir, destination)
    tokenizer = load_checkpoint_tokenizer(destination)
    config = load_checkpoint(destination).model_config
    generator = random.Random(0)
    sources = [tokenizer.encode(text) for text in SOURCE_SENTENCES + ENGLISH]
    pairs = [(ids, [generator.randrange(4, config.tgt_vocab_size) for _ in range(4)]) for ids in sources]
    fingerprint = vocabulary_fingerprint(tokenizer, config.src_vocab_size)
    special = [config.pad_id, config.bos_id, config.eos_id, config.unk_id]
    table = build_shortlist(
        pairs, config.src_vocab_size, config.tgt_vocab_size, special, fingerprint, per_source, frequent
    )
    save_shortlist(table, destination / SHORTLIST_FILE)
    return destination


def test_the_shortlist_is_exported_as_ctranslate2s_vocabulary_map(
    paper_checkpoint: Path, tmp_path: Path
) -> None:
    pytest.importorskip("ctranslate2")
    from transformer.data.shortlist import load_shortlist
    from transformer.decoding.greedy import greedy_search
    from transformer.decoding.shortlist import ShortlistStepModel
    from transformer.interop.ctranslate2 import CTranslate2Translator, export_ctranslate2

    checkpoint_dir = shortlisted_copy(paper_checkpoint, tmp_path / "ours", per_source=3, frequent=5)
    export_ctranslate2(checkpoint_dir, tmp_path / "ct2")
    lines = (tmp_path / "ct2" / "vmap.txt").read_text(encoding="utf-8").splitlines()
    shortlist = load_shortlist(checkpoint_dir / "shortlist.safetensors")
    assert lines[0].startswith("\t") and len(lines[0].split(" ")) == shortlist.always.numel()
    assert all(len(line.split("\t")) == 2 and line.split("\t")[0] for line in lines[1:])
    with_map = CTranslate2Translator.from_directory(tmp_path / "ct2", threads=1, use_vmap=True)
    model = load_checkpoint(checkpoint_dir).build_model()
    greedy = DecodeConfig(beam_size=1, length_penalty=0.0, max_length_offset=OFFSET)
    restricted = ShortlistStepModel(model, shortlist)
    changed = 0
    for text in SOURCE_SENTENCES + ENGLISH[:10]:
        ids = with_map.encode(text)
        # One sentence per batch: CTranslate2's batch union is then this sentence's own shortlist, as ours.
        ours = greedy_search(restricted, pad_batch([ids], model.config.pad_id), greedy)[0][0].tokens
        assert with_map.translate_ids([ids], beam_size=1, max_length_offset=OFFSET) == [ours]
        assert set(ours) <= set(shortlist.sentence_tokens(ids).tolist())
        changed += ours != our_outputs(model, [ids], 1, 0.0)[0]
    assert changed > 0  # the map restricted the output


def test_without_a_shortlist_no_map_and_use_vmap_is_refused(paper_checkpoint: Path, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    from transformer.interop.ctranslate2 import CTranslate2Translator, export_ctranslate2

    export_ctranslate2(paper_checkpoint, tmp_path / "ct2")
    assert not (tmp_path / "ct2" / "vmap.txt").exists()
    with pytest.raises(ValueError, match=r"ct2/vmap.txt: no vocabulary map in this export"):
        CTranslate2Translator.from_directory(tmp_path / "ct2", use_vmap=True)
