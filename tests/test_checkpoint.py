import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from transformer.checkpoint import (
    CHECKSUM_METADATA_KEY,
    CheckpointError,
    load_checkpoint,
    read_weights_metadata,
    resolve_checkpoint,
    save_checkpoint,
    weights_sha256,
)
from transformer.config.decode import DecodeConfig
from transformer.decoding.translator import Translator
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

CONFIG = TransformerConfig(
    vocab_size=30, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1
)


SOME_TENSOR = "decoder.layers.0.feed_forward_residual.norm.bias"
OVERFLOWING = "decoder.layers.0.feed_forward.linear_out.weight"


class NumberTokenizer:
    """Words are their ids: "3 4 5" is [3, 4, 5]."""

    vocab_size = CONFIG.vocab_size

    def encode(self, text: str) -> list[int]:
        return [int(word) for word in text.split()]

    def decode(self, ids: list[int]) -> str:
        return " ".join(str(token_id) for token_id in ids)


def save_random_model(path: Path, seed: int, config: TransformerConfig = CONFIG) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(config)
    save_checkpoint(path, model, config, {"tokenizer.model": b"tokenizer-bytes"})
    return model


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    model = save_random_model(tmp_path / "a", seed=1)
    loaded = load_checkpoint(tmp_path / "a").build_model()
    assert loaded.config == CONFIG
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor)
    assert (tmp_path / "a" / "tokenizer.model").read_bytes() == b"tokenizer-bytes"
    assert not list(tmp_path.glob(".*"))  # no temporary directories left behind


def test_unreadable_checkpoint_gives_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(tmp_path / "bad")
    with pytest.raises(CheckpointError, match="no checkpoint here"):
        load_checkpoint(tmp_path)


def test_weights_only_checkpoint_keeps_its_search_settings_and_normal_file_modes(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Transformer(CONFIG)
    settings = DecodeConfig(beam_size=2, length_penalty=1.0)
    save_checkpoint(tmp_path / "a", model, CONFIG, {"tokenizer.model": b"tok"}, decode_config=settings)
    assert load_checkpoint(tmp_path / "a").decode_config == settings
    old_umask = os.umask(0o022)
    try:
        save_checkpoint(tmp_path / "b", model, CONFIG, {"tokenizer.model": b"tok"})
    finally:
        os.umask(old_umask)
    modes = {path.name: path.stat().st_mode & 0o777 for path in (tmp_path / "b").iterdir()}
    assert modes == {"model.safetensors": 0o644, "tokenizer.model": 0o644}
    assert load_checkpoint(tmp_path / "b").decode_config is None


def overwrite_middle(path: Path, garbage: bytes) -> None:
    """Overwrite bytes in the middle of a file in place, as a bad disk or a botched copy would."""
    with path.open("r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        handle.write(garbage)


def test_a_checkpoint_records_the_sha256_of_its_weights(tmp_path: Path) -> None:
    save_random_model(tmp_path / "a", seed=1)
    metadata = read_weights_metadata(tmp_path / "a" / "model.safetensors")
    checkpoint = load_checkpoint(tmp_path / "a")
    assert metadata[CHECKSUM_METADATA_KEY] == weights_sha256(checkpoint.weights)
    assert len(metadata[CHECKSUM_METADATA_KEY]) == 64
    changed = {**checkpoint.weights, SOME_TENSOR: checkpoint.weights[SOME_TENSOR] + 1e-6}
    assert weights_sha256(changed) != metadata[CHECKSUM_METADATA_KEY]


def test_damaged_weights_are_refused_naming_the_file(tmp_path: Path) -> None:
    save_random_model(tmp_path / "a", seed=1)
    # Finite floats (0x3f3f3f3f is 0.75): only the checksum can tell these bytes from real weights.
    overwrite_middle(tmp_path / "a" / "model.safetensors", b"\x3f" * 4096)
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(tmp_path / "a")
    assert str(refused.value) == (
        f"{tmp_path / 'a' / 'model.safetensors'}: the weights do not match the SHA-256 recorded when they were "
        "saved; the file is damaged (restore it from a copy, or use another checkpoint)"
    )


def save_without_checksum(directory: Path, weights: dict[str, torch.Tensor]) -> None:
    """A checkpoint as written before checksums were recorded (the fixture of #15 is one too)."""
    directory.mkdir()
    metadata = {"format": "transformer-checkpoint-v1", "model_config": json.dumps(CONFIG.to_dict())}
    save_file(weights, str(directory / "model.safetensors"), metadata=metadata)


def test_a_checkpoint_without_a_checksum_loads_but_non_finite_weights_are_refused(tmp_path: Path) -> None:
    save_random_model(tmp_path / "a", seed=1)
    weights = load_checkpoint(tmp_path / "a").weights
    save_without_checksum(tmp_path / "old", weights)
    loaded = load_checkpoint(tmp_path / "old").weights
    assert all(torch.equal(loaded[name], weights[name]) for name in weights)
    damaged = dict(weights)
    damaged[SOME_TENSOR] = damaged[SOME_TENSOR].clone()
    damaged[SOME_TENSOR][[0, 3]] = torch.tensor([float("nan"), float("inf")])
    save_without_checksum(tmp_path / "damaged", damaged)
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(tmp_path / "damaged")
    assert str(refused.value) == (
        f"{tmp_path / 'damaged' / 'model.safetensors'}: {SOME_TENSOR} holds 2 NaN or infinite value(s); "
        "the weights are damaged"
    )


def test_a_model_that_computes_nan_scores_stops_translating_naming_its_weights(tmp_path: Path) -> None:
    model = save_random_model(tmp_path / "a", seed=1)
    weights = load_checkpoint(tmp_path / "a").weights
    # Finite but absurd weights, as garbage bytes in a file without a checksum can be: the scores overflow.
    weights[OVERFLOWING] = torch.full_like(weights[OVERFLOWING], 3e38)
    save_without_checksum(tmp_path / "overflowing", weights)
    tokenizer = NumberTokenizer()
    translator = Translator(load_checkpoint(tmp_path / "overflowing").build_model(), tokenizer, device="cpu")
    translator.weights_file = tmp_path / "overflowing" / "model.safetensors"
    with pytest.raises(ValueError) as refused:
        translator.translate(["3 4 5"])
    assert str(refused.value) == (
        f"{tmp_path / 'overflowing' / 'model.safetensors'}: the model computes NaN scores (its weights are "
        "damaged or overflow); nothing was translated"
    )
    healthy = Translator(model, tokenizer, DecodeConfig(beam_size=1, max_length_offset=2), device="cpu")
    assert len(healthy.translate(["3 4 5"])) == 1  # the same sentence, with sane weights


def test_a_file_of_a_checkpoint_means_its_directory(tmp_path: Path) -> None:
    save_random_model(tmp_path / "run" / "checkpoints" / "step-00000944", seed=1)
    checkpoint_dir = tmp_path / "run" / "checkpoints" / "step-00000944"
    assert resolve_checkpoint(checkpoint_dir / "model.safetensors") == checkpoint_dir
    assert resolve_checkpoint(checkpoint_dir / "tokenizer.model") == checkpoint_dir
    (tmp_path / "notes.txt").write_text("not a checkpoint\n", encoding="utf-8")
    with pytest.raises(CheckpointError) as refused:
        resolve_checkpoint(tmp_path / "notes.txt")
    assert str(refused.value) == (
        f"{tmp_path / 'notes.txt'}: a file, not a checkpoint; pass a checkpoint directory (holding "
        "model.safetensors) or a run"
    )


@pytest.mark.parametrize("role", ["latest", "best"])
def test_an_index_naming_a_missing_checkpoint_names_it(tmp_path: Path, role: str) -> None:
    checkpoints = tmp_path / "run" / "checkpoints"
    save_random_model(checkpoints / "step-00000500", seed=1)
    index = {"latest": "step-00000944", "best": None, "checkpoints": ["step-00000500", "step-00000944"]}
    if role == "best":
        index = {**index, "latest": "step-00000500", "best": "step-00000944"}
    (checkpoints / "index.json").write_text(json.dumps(index), encoding="utf-8")
    with pytest.raises(CheckpointError) as refused:
        resolve_checkpoint(tmp_path / "run")
    assert str(refused.value) == (
        f"{checkpoints / 'index.json'}: names step-00000944 as the {role} checkpoint, but "
        f"{checkpoints / 'step-00000944'} does not exist (pass another checkpoint directory explicitly)"
    )
    assert resolve_checkpoint(checkpoints / "step-00000500") == checkpoints / "step-00000500"
