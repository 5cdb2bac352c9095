import os
from pathlib import Path

import pytest
import torch

from tests.checkpoint.random_checkpoints import CONFIG, SOME_TENSOR, save_random_model, save_without_checksum
from transformer.checkpoint.layout import CheckpointError
from transformer.checkpoint.model_checkpoint import load_checkpoint, save_checkpoint
from transformer.config.decode import DecodeConfig
from transformer.decoding.translator import Translator
from transformer.model.transformer import Transformer

OVERFLOWING = "decoder.layers.0.feed_forward.linear_out.weight"


class NumberTokenizer:
    """Words are their ids: "3 4 5" is [3, 4, 5]."""

    vocab_size = CONFIG.vocab_size

    def encode(self, text: str) -> list[int]:
        return [int(word) for word in text.split()]

    def decode(self, ids: list[int]) -> str:
        return " ".join(str(token_id) for token_id in ids)


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
