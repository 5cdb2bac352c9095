import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from tests.interop.marian_fixtures import ENGLISH, SOURCE_SENTENCES, random_batches
from transformer.checkpoint.layout import CHECKSUM_METADATA_KEY
from transformer.checkpoint.model_checkpoint import load_checkpoint, load_checkpoint_tokenizer
from transformer.checkpoint.weights import read_weights_metadata, weights_sha256
from transformer.config.decode import DecodeConfig
from transformer.decoding.translator import Translator
from transformer.interop.marian import MarianTokenizer, import_marian
from transformer.interop.marian_config import marian_to_config

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


def test_an_imported_checkpoint_carries_the_checksum_of_its_weights(imported_shared: Path) -> None:
    recorded = read_weights_metadata(imported_shared / "model.safetensors")[CHECKSUM_METADATA_KEY]
    assert recorded == weights_sha256(load_checkpoint(imported_shared).weights)


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


@pytest.mark.parametrize(
    ("checkpoint_name", "marian_dir_name"),
    [("imported_shared", "shared_marian_dir"), ("imported_separate", "separate_marian_dir")],
)
def test_imported_config_equals_the_hf_config(
    checkpoint_name: str, marian_dir_name: str, request: pytest.FixtureRequest
) -> None:
    transformers = pytest.importorskip("transformers")
    marian_dir = request.getfixturevalue(marian_dir_name)
    config = load_checkpoint(request.getfixturevalue(checkpoint_name)).model_config
    theirs = transformers.MarianConfig.from_pretrained(marian_dir)
    vocabulary = json.loads((marian_dir / "vocab.json").read_text(encoding="utf-8"))
    assert (config.d_model, config.d_ff, config.num_heads) == (
        theirs.d_model,
        theirs.encoder_ffn_dim,
        theirs.encoder_attention_heads,
    )
    assert (config.num_encoder_layers, config.num_decoder_layers) == (
        theirs.encoder_layers,
        theirs.decoder_layers,
    )
    assert (config.src_vocab_size, config.tgt_vocab_size) == (theirs.vocab_size, theirs.decoder_vocab_size)
    assert (config.pad_id, config.eos_id, config.start_id) == (
        theirs.pad_token_id,
        theirs.eos_token_id,
        theirs.decoder_start_token_id,
    )
    assert config.unk_id == vocabulary["<unk>"]
    assert (config.dropout, config.attention_dropout) == (theirs.dropout, theirs.attention_dropout)
    assert config.scale_embeddings == theirs.scale_embedding
    assert config.activation == {"swish": "silu", "gelu": "gelu"}[theirs.activation_function]
    hf_model = transformers.MarianMTModel.from_pretrained(marian_dir)
    assert config.layer_norm_eps == hf_model.model.encoder.layers[0].self_attn_layer_norm.eps


# Our names of a layer's tensors and HuggingFace Marian's, written out here rather than taken from the converter.
OUR_TO_HF_LAYER_NAMES = [
    ("self_attention_residual.norm", "self_attn_layer_norm"),
    ("cross_attention_residual.norm", "encoder_attn_layer_norm"),
    ("feed_forward_residual.norm", "final_layer_norm"),
    ("self_attention.", "self_attn."),
    ("cross_attention.", "encoder_attn."),
    ("feed_forward.linear_in", "fc1"),
    ("feed_forward.linear_out", "fc2"),
]


@pytest.mark.parametrize(
    ("checkpoint_name", "marian_dir_name"),
    [("imported_shared", "shared_marian_dir"), ("imported_separate", "separate_marian_dir")],
)
def test_imported_tensors_equal_the_hf_tensors(
    checkpoint_name: str, marian_dir_name: str, request: pytest.FixtureRequest
) -> None:
    transformers = pytest.importorskip("transformers")
    ours = load_checkpoint(request.getfixturevalue(checkpoint_name)).build_model()
    hf_model = transformers.MarianMTModel.from_pretrained(request.getfixturevalue(marian_dir_name))
    our_tensors, hf_tensors = ours.state_dict(), hf_model.state_dict()
    layer_names = [name for name in our_tensors if ".layers." in name]
    assert len(layer_names) == 2 * 16 + 2 * 26  # 2 encoder and 2 decoder layers, weights and biases
    for name in layer_names:
        hf_name = "model." + name
        for our_part, hf_part in OUR_TO_HF_LAYER_NAMES:
            hf_name = hf_name.replace(our_part, hf_part)
        assert torch.equal(our_tensors[name], hf_tensors[hf_name]), (name, hf_name)
    config = ours.config
    assert torch.equal(ours.src_embedding.embedding.weight, hf_tensors["model.encoder.embed_tokens.weight"])
    assert torch.equal(ours.tgt_embedding.embedding.weight, hf_tensors["model.decoder.embed_tokens.weight"])
    assert ours.output_bias is not None  # the fixture's EOS boost made the logits bias non-zero
    assert torch.equal(ours.output_bias, hf_tensors["final_logits_bias"][0])
    if config.tie_output_projection:
        assert torch.equal(hf_tensors["lm_head.weight"], hf_tensors["model.decoder.embed_tokens.weight"])
    else:
        assert torch.equal(ours.output_projection.weight, hf_tensors["lm_head.weight"])
        assert not torch.equal(hf_tensors["lm_head.weight"], hf_tensors["model.decoder.embed_tokens.weight"])
    # A sanity check of the names: the tensors differ from one another (the fixture randomised them all).
    assert not torch.equal(
        our_tensors["encoder.layers.0.self_attention.q_proj.weight"],
        our_tensors["encoder.layers.1.self_attention.q_proj.weight"],
    )


@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_imported_checkpoint_translates_with_its_marian_tokenizer(
    imported_shared: Path, shared_marian_dir: Path
) -> None:
    # The same beam search as generate() (see test_generation_parity.py), so whole sentences must match:
    # our tokenizer, model, search and detokenisation against transformers' end to end.
    transformers = pytest.importorskip("transformers")
    tokenizer = load_checkpoint_tokenizer(imported_shared)
    assert isinstance(tokenizer, MarianTokenizer)
    max_new_tokens = 12
    decode_config = DecodeConfig(
        beam_size=2,
        length_penalty=1.0,
        length_penalty_form="power",
        max_length=max_new_tokens,
        max_length_offset=1000,
    )
    translator = Translator.from_checkpoint(imported_shared, decode_config, device="cpu")
    sentences = SOURCE_SENTENCES + ENGLISH[:4]  # the last source sentence has <unk> pieces
    outputs = translator.translate(sentences + [""])
    assert len(outputs) == len(sentences) + 1 and outputs[-1] == ""
    hf_tokenizer = transformers.MarianTokenizer.from_pretrained(shared_marian_dir)
    hf_model = transformers.MarianMTModel.from_pretrained(shared_marian_dir).eval()
    config = load_checkpoint(imported_shared).model_config
    batch = hf_tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        generated = hf_model.generate(
            **batch,
            num_beams=2,
            do_sample=False,
            length_penalty=1.0,
            early_stopping=True,
            max_new_tokens=max_new_tokens,
            bad_words_ids=[[config.pad_id]],
            forced_eos_token_id=None,
        )
    expected = hf_tokenizer.batch_decode(generated, skip_special_tokens=True)
    assert outputs[:-1] == expected
    assert all(expected) and len(set(expected)) >= 4  # non-empty, input-dependent translations


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
    with pytest.raises(ValueError, match=r"replacing it would delete notes\.txt"):
        import_marian(shared_marian_dir, tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_import_of_a_directory_without_config_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"config.json: missing \(is .* a HuggingFace Marian directory\?\)"):
        import_marian(tmp_path, tmp_path / "out")
