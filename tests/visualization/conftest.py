"""Fixtures for the visualization tests: real attention weights of a tiny random model, and PNG checks.

The PNG helpers come as a fixture because pytest runs with ``--import-mode=importlib``, under which test
modules cannot import a sibling helper module.
"""

from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib import colormaps
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from transformer import Transformer, TransformerConfig
from transformer.model.transformer import AttentionWeights

SOURCE_TOKENS = ["▁Ein", "▁Mann", "▁mit", "▁Hut", "▁sitzt", ".", "</s>"]
TARGET_TOKENS = ["<s>", "▁A", "▁man", "▁in", "▁a", "▁hat", "."]  # decoder input: <s> then target pieces


@pytest.fixture
def tiny_attention(tiny_config: TransformerConfig) -> tuple[AttentionWeights, list[str], list[str]]:
    model = Transformer(tiny_config).eval()
    src_tokens = torch.randint(4, tiny_config.vocab_size, (2, len(SOURCE_TOKENS)))
    tgt_tokens = torch.randint(4, tiny_config.vocab_size, (2, len(TARGET_TOKENS)))
    tgt_tokens[:, 0] = tiny_config.bos_id
    with torch.no_grad():
        _, attention = model.forward_with_attention(src_tokens, tgt_tokens)
    return attention, list(SOURCE_TOKENS), list(TARGET_TOKENS)


class PngInspector:
    """Load PNGs checking that they are real, non-blank images, and count pixels of a given colour."""

    @staticmethod
    def load(path: Path, min_bytes: int = 10_000) -> np.ndarray:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
        assert len(data) > min_bytes, f"{path} is only {len(data)} bytes"
        image = imread(path)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 200
        assert image[..., :3].std() > 0.05, f"{path} looks blank"
        return image

    @staticmethod
    def count_near(image: np.ndarray, colour: str | tuple[float, ...], tolerance: float = 0.08) -> int:
        """Pixels within ``tolerance`` of ``colour`` (a matplotlib colour) in every RGB channel."""
        distance = np.abs(image[..., :3] - np.asarray(to_rgb(colour))[None, None, :])
        return int((distance < tolerance).all(axis=-1).sum())

    @staticmethod
    def viridis(fraction: float) -> tuple[float, float, float]:
        red, green, blue, _ = colormaps["viridis"](fraction)
        return red, green, blue


@pytest.fixture
def png() -> PngInspector:
    return PngInspector()
