import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from tests.interop.marian_fixtures import SOURCE_SENTENCES, random_batches
from transformer.config import DecodeConfig
from transformer.interop.marian import MarianTokenizer, import_marian
from transformer.interop.marian_config import marian_to_config
from transformer.training.checkpoint import load_checkpoint
from transformer.translator import Translator, load_checkpoint_tokenizer

BASE_CONFIG: dict[str, Any] = {
    "model_type": "marian",
    "vocab_size": 100,
    "d_model": 32,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "activation_function": "swish",
    "scale_embedding": True,
    "pad_token_id": 99,
    "eos_token_id": 0,
    "decoder_start_token_id": 99,
}


def assert_same_logits(checkpoint_dir: Path, marian_dir: Path) -> None:
    """Equal to 1e-4 in float32 and, showing that the conversion itself is exact, to 1e-9 in float64."""
    transformers = pytest.importorskip("transformers")
    ours = load_checkpoint(checkpoint_dir).build_model()
    theirs = transformers.MarianMTModel.from_pretrained(marian_dir).eval()
    src, tgt = random_batches(ours.config, seed=5)
    assert src.eq(ours.config.pad_id).any()  # a padded batch
    for dtype, tolerance in ((torch.float32, 1e-4), (torch.float64, 1e-9)):
        with torch.no_grad():
            expected = theirs.to(dtype)(
                input_ids=src, attention_mask=src.ne(ours.config.pad_id), decoder_input_ids=tgt
            ).logits
            assert (ours.to(dtype)(src, tgt) - expected).abs().max().item() < tolerance


def test_import_matches_transformers_logits(imported_shared: Path, shared_marian_dir: Path) -> None:
    config = load_checkpoint(imported_shared).model_config
    assert (config.activation, config.sinusoidal_layout, config.output_bias) == ("silu", "concatenated", True)
    assert (config.share_embeddings, config.tie_output_projection, config.scale_embeddings) == (
        True,
        True,
        True,
    )
    assert (config.pad_id, config.eos_id, config.bos_id, config.start_id, config.unk_id) == (99, 0, 0, 99, 1)
    assert_same_logits(imported_shared, shared_marian_dir)


def test_import_of_separate_vocabularies_matches_transformers(
    imported_separate: Path, separate_marian_dir: Path
) -> None:
    config = load_checkpoint(imported_separate).model_config
    assert (config.src_vocab_size, config.tgt_vocab_size) == (100, 80)
    assert (config.share_embeddings, config.tie_output_projection, config.activation) == (
        False,
        False,
        "gelu",
    )
    assert_same_logits(imported_separate, separate_marian_dir)


def test_import_reads_pytorch_bin_with_position_tables(shared_marian_dir: Path, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    legacy = tmp_path / "legacy"
    shutil.copytree(shared_marian_dir, legacy)
    tensors = load_file(str(legacy / "model.safetensors"))
    positions = transformers.MarianMTModel.from_pretrained(
        shared_marian_dir
    ).model.encoder.embed_positions.weight
    tensors["model.encoder.embed_positions.weight"] = positions.detach().clone()
    tensors["lm_head.weight"] = tensors["model.shared.weight"].clone()
    torch.save(tensors, legacy / "pytorch_model.bin")
    (legacy / "model.safetensors").unlink()
    assert_same_logits(import_marian(legacy, tmp_path / "imported"), shared_marian_dir)
    tensors["model.encoder.embed_positions.weight"] = torch.randn_like(positions)
    torch.save(tensors, legacy / "pytorch_model.bin")
    with pytest.raises(
        ValueError, match=r"model\.encoder\.embed_positions\.weight is not the sinusoidal table"
    ):
        import_marian(legacy, tmp_path / "learned")


def test_imported_checkpoint_translates_with_its_marian_tokenizer(imported_shared: Path) -> None:
    tokenizer = load_checkpoint_tokenizer(imported_shared)
    assert isinstance(tokenizer, MarianTokenizer)
    translator = Translator.from_checkpoint(
        imported_shared, DecodeConfig(beam_size=2, max_length_offset=3), device="cpu"
    )
    outputs = translator.translate(SOURCE_SENTENCES[:2] + [""])
    assert len(outputs) == 3 and outputs[2] == "" and all(isinstance(text, str) for text in outputs)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"normalize_before": True}, "normalize_before"),
        ({"normalize_embedding": True}, "normalize_embedding"),
        ({"add_final_layer_norm": True}, "add_final_layer_norm"),
        ({"static_position_embeddings": False}, "static_position_embeddings"),
        ({"activation_function": "gelu_new"}, "activation_function"),
        ({"decoder_ffn_dim": 128}, "decoder_ffn_dim"),
        ({"decoder_attention_heads": 8}, "decoder_attention_heads"),
        ({"model_type": "bart"}, "model_type"),
        ({"eos_token_id": [0, 1]}, "eos_token_id"),
        ({"d_model": None}, "d_model"),
        ({"pad_token_id": 500}, "pad_id"),
    ],
)
def test_unrepresentable_config_names_the_field(change: dict, field: str) -> None:
    values = {**BASE_CONFIG, **change}
    with pytest.raises(ValueError, match=field) as error:
        marian_to_config(values, "dir/config.json", unk_id=1, share_embeddings=True, output_bias=False)
    assert str(error.value).startswith("dir/config.json: ")


def test_import_refuses_a_config_field_by_name(shared_marian_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(shared_marian_dir, broken)
    values = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**values, "normalize_before": True}))
    with pytest.raises(ValueError, match=r"config.json: normalize_before=True cannot be represented"):
        import_marian(broken, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_import_refuses_leftover_tensors(shared_marian_dir: Path, tmp_path: Path) -> None:
    from safetensors.torch import save_file

    extra = tmp_path / "extra"
    shutil.copytree(shared_marian_dir, extra)
    tensors = load_file(str(extra / "model.safetensors"))
    tensors["model.encoder.layernorm_embedding.weight"] = torch.ones(32)
    save_file(tensors, str(extra / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"model\.encoder\.layernorm_embedding\.weight"):
        import_marian(extra, tmp_path / "out")


def test_import_will_not_overwrite_an_unrelated_directory(shared_marian_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="does not hold a converted model"):
        import_marian(shared_marian_dir, tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_import_of_a_directory_without_config_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"config.json: missing \(is .* a HuggingFace Marian directory\?\)"):
        import_marian(tmp_path, tmp_path / "out")
