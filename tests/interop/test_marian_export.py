import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.interop.marian_fixtures import ENGLISH, SOURCE_SENTENCES, random_batches, write_our_checkpoint
from transformer.checkpoint.model_checkpoint import load_checkpoint
from transformer.data.pipeline.tokenizer import Tokenizer
from transformer.interop.marian import export_marian, import_marian

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

EXPECTED_FILES = [
    "config.json",
    "converted_from.json",
    "generation_config.json",
    "model.safetensors",
    "source.spm",
    "target.spm",
    "tokenizer_config.json",
    "vocab.json",
]


def load_exported(directory: Path, warnings: list[str]) -> tuple[Any, Any]:
    transformers = pytest.importorskip("transformers")
    model, info = transformers.MarianMTModel.from_pretrained(directory, output_loading_info=True)
    tokenizer = transformers.MarianTokenizer.from_pretrained(directory)
    assert (
        info["missing_keys"] == set()
        and info["unexpected_keys"] == set()
        and info["mismatched_keys"] == set()
    )
    assert not [
        message
        for message in warnings
        if any(word in message for word in ("MISSING", "UNEXPECTED", "newly initialized", "not used"))
    ]
    return model.eval(), tokenizer


@pytest.mark.parametrize(
    ("checkpoint_name", "exported_name"),
    [("paper_checkpoint", "exported_paper"), ("variant_checkpoint", "exported_variant")],
)
def test_export_loads_in_transformers_with_equal_logits(
    checkpoint_name: str, exported_name: str, request: pytest.FixtureRequest, transformers_warnings: list[str]
) -> None:
    checkpoint_dir, exported = (
        request.getfixturevalue(checkpoint_name),
        request.getfixturevalue(exported_name),
    )
    assert sorted(path.name for path in exported.iterdir()) == EXPECTED_FILES
    ours = load_checkpoint(checkpoint_dir).build_model()
    assert ours.config.sinusoidal_layout == "interleaved"
    theirs, _ = load_exported(exported, transformers_warnings)
    src, tgt = random_batches(ours.config, seed=6)
    for dtype, tolerance in ((torch.float32, 1e-4), (torch.float64, 1e-9)):
        with torch.no_grad():
            expected = ours.to(dtype)(src, tgt)
            actual = theirs.to(dtype)(
                input_ids=src, attention_mask=src.ne(ours.config.pad_id), decoder_input_ids=tgt
            ).logits
        assert (actual - expected).abs().max().item() < tolerance


def test_exported_tokenizer_gives_our_ids(
    exported_paper: Path, paper_checkpoint: Path, transformers_warnings: list[str]
) -> None:
    _, theirs = load_exported(exported_paper, transformers_warnings)
    ours = Tokenizer.load(paper_checkpoint / "tokenizer.model")
    for text in SOURCE_SENTENCES + ENGLISH[:30]:
        ids = ours.encode(text)
        assert theirs(text)["input_ids"] == [*ids, 2], text
        if 3 not in ids:  # transformers drops <unk> when skipping special tokens; our tokenizer shows " ⁇ "
            assert theirs.decode(ids, skip_special_tokens=True) == ours.decode(ids)


def test_round_trip_keeps_the_logits(
    exported_variant: Path, variant_checkpoint: Path, tmp_path: Path
) -> None:
    original = load_checkpoint(variant_checkpoint).build_model()
    back = load_checkpoint(import_marian(exported_variant, tmp_path / "back")).build_model()
    assert back.config.sinusoidal_layout == "concatenated"
    assert (back.config.pad_id, back.config.bos_id, back.config.eos_id, back.config.start_id) == (0, 1, 2, 1)
    src, tgt = random_batches(original.config, seed=7)
    with torch.no_grad():
        assert (back(src, tgt) - original(src, tgt)).abs().max().item() < 1e-4
    reexported = export_marian(tmp_path / "back", tmp_path / "again")
    assert json.loads((reexported / "config.json").read_text()) == json.loads(
        (exported_variant / "config.json").read_text()
    )


def test_generation_config_forbids_what_our_search_forbids(exported_paper: Path) -> None:
    settings = json.loads((exported_paper / "generation_config.json").read_text())
    assert settings["bad_words_ids"] == [[0], [1]]
    # Our search stops like early_stopping=True and forces no EOS at the length limit (#28 item 7).
    assert settings["early_stopping"] is True and settings["forced_eos_token_id"] is None
    assert json.loads((exported_paper / "config.json").read_text())["forced_eos_token_id"] is None
    assert (settings["decoder_start_token_id"], settings["eos_token_id"], settings["pad_token_id"]) == (
        1,
        2,
        0,
    )


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"norm_first": True}, "norm_first"),
        ({"positional_encoding": "learned"}, "positional_encoding"),
        ({"attention_scoring": "additive"}, "attention_scoring"),
        ({"d_k": 4}, "d_k"),
        ({"layer_norm_eps": 1e-6}, "layer_norm_eps"),
    ],
)
def test_unexportable_model_names_the_field(overrides: dict, field: str, tmp_path: Path) -> None:
    checkpoint_dir = write_our_checkpoint(tmp_path / "model", **overrides)
    with pytest.raises(ValueError, match=rf"TransformerConfig.{field}=.* cannot be exported to MarianMT"):
        export_marian(checkpoint_dir, tmp_path / "exported")
    assert not (tmp_path / "exported").exists()
