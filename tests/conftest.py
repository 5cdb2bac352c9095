"""Shared fixtures: a tiny model config and a fixed seed for every test."""

import pytest
import torch

from transformer import TransformerConfig


@pytest.fixture(autouse=True)
def fixed_seed() -> None:
    torch.manual_seed(1234)


@pytest.fixture
def tiny_config() -> TransformerConfig:
    return TransformerConfig(
        vocab_size=40,
        d_model=32,
        d_ff=64,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dropout=0.0,
    )
