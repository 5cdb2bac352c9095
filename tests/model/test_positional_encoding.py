import math

import pytest
import torch

from transformer.model.positional_encoding import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_table,
)


def test_sinusoidal_values_follow_the_paper_formula() -> None:
    table = sinusoidal_table(50, 16)
    pos, i = 7, 3
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(pos / 10000 ** (2 * i / 16)), abs=1e-6)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos / 10000 ** (2 * i / 16)), abs=1e-6)
    assert torch.equal(table[0, 0::2], torch.zeros(8))
    assert torch.equal(table[0, 1::2], torch.ones(8))


def test_sinusoidal_encoding_extends_beyond_its_initial_table() -> None:
    encoding = SinusoidalPositionalEncoding(d_model=8, initial_length=4)
    long = encoding(10, offset=3)
    assert long.shape == (10, 8)
    torch.testing.assert_close(long, sinusoidal_table(13, 8)[3:])


def test_sinusoidal_encoding_rejects_odd_width() -> None:
    with pytest.raises(ValueError, match="even"):
        SinusoidalPositionalEncoding(d_model=7)


def test_learned_embedding_refuses_too_long_input_with_clear_error() -> None:
    embedding = LearnedPositionalEmbedding(d_model=8, max_positions=5)
    assert embedding(5).shape == (5, 8)
    with pytest.raises(ValueError, match="max_positions=5"):
        embedding(6)
    with pytest.raises(ValueError, match="position 5"):
        embedding(1, offset=5)


def test_concatenated_layout_is_a_column_permutation_of_the_interleaved_one() -> None:
    interleaved = sinusoidal_table(20, 8)
    concatenated = sinusoidal_table(20, 8, layout="concatenated")
    torch.testing.assert_close(concatenated[:, :4], interleaved[:, 0::2])
    torch.testing.assert_close(concatenated[:, 4:], interleaved[:, 1::2])
    extended = SinusoidalPositionalEncoding(d_model=8, initial_length=2, layout="concatenated")(20)
    torch.testing.assert_close(extended, concatenated)
