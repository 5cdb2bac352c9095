import os
from pathlib import Path

import pytest
import torch

from transformer.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from transformer.config import DecodeConfig, TransformerConfig
from transformer.model.transformer import Transformer

CONFIG = TransformerConfig(
    vocab_size=30, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1
)


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
