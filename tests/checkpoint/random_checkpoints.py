"""Small checkpoints for the tests of :mod:`transformer.checkpoint`: a random model, with or without checksum."""

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from transformer.checkpoint.model_checkpoint import save_checkpoint
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

CONFIG = TransformerConfig(
    vocab_size=30, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1
)
SOME_TENSOR = "decoder.layers.0.feed_forward_residual.norm.bias"


def save_random_model(path: Path, seed: int, config: TransformerConfig = CONFIG) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(config)
    save_checkpoint(path, model, config, {"tokenizer.model": b"tokenizer-bytes"})
    return model


def save_without_checksum(directory: Path, weights: dict[str, torch.Tensor]) -> None:
    """A checkpoint as written before checksums were recorded (the fixture of #15 is one too)."""
    directory.mkdir()
    metadata = {"format": "transformer-checkpoint-v1", "model_config": json.dumps(CONFIG.to_dict())}
    save_file(weights, str(directory / "model.safetensors"), metadata=metadata)
