"""Position information added to the embeddings (paper section 3.5; Table 2 row E)."""

import math

import torch
from torch import Tensor, nn


def sinusoidal_table(num_positions: int, d_model: int, layout: str = "interleaved") -> Tensor:
    """Compute the sinusoidal encodings of positions 0 .. num_positions - 1.

    Parameters
    ----------
    num_positions : int
        Number of positions.
    d_model : int
        Encoding width; must be even.
    layout : {"interleaved", "concatenated"}
        "interleaved" puts sin(pos * w_i) in column 2i and cos in column 2i + 1 (the paper's formula);
        "concatenated" puts all sines first, then all cosines (HuggingFace Marian, fairseq).

    Returns
    -------
    torch.Tensor, shape (num_positions, d_model), float32
        PE[pos, 2i] = sin(pos / 10000^(2i / d_model)), PE[pos, 2i + 1] = cos(pos / 10000^(2i / d_model)).

    Notes
    -----
    Both layouts use the same frequencies w_i = 10000^(-2i / d_model); they differ only in column order,
    which matters when loading weights trained with the other layout.
    """
    positions = torch.arange(num_positions, dtype=torch.float64)[:, None]
    inverse_frequencies = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
    )
    angles = positions * inverse_frequencies  # (num_positions, d_model / 2)
    table = torch.empty(num_positions, d_model, dtype=torch.float64)
    if layout == "concatenated":
        table[:, : d_model // 2] = torch.sin(angles)
        table[:, d_model // 2 :] = torch.cos(angles)
    else:
        table[:, 0::2] = torch.sin(angles)
        table[:, 1::2] = torch.cos(angles)
    return table.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoidal position encodings that work for any length.

    Parameters
    ----------
    d_model : int
        Encoding width; must be even.
    initial_length : int
        Positions precomputed at construction; longer inputs extend the table on demand.
    layout : {"interleaved", "concatenated"}
        Column order of sines and cosines (see :func:`sinusoidal_table`).

    Notes
    -----
    The table is a non-persistent buffer: it is not saved in checkpoints, since it is a pure function of
    ``d_model``. Section 3.5 chose sinusoids because they "may allow the model to extrapolate to sequence
    lengths longer than the ones encountered during training".
    """

    def __init__(self, *, d_model: int, initial_length: int = 1024, layout: str = "interleaved") -> None:
        super().__init__()
        if d_model % 2:
            raise ValueError(f"sinusoidal positional encoding needs an even d_model, got {d_model}")
        self.d_model = d_model
        self.layout = layout
        self.table: Tensor
        self.register_buffer("table", sinusoidal_table(initial_length, d_model, layout), persistent=False)

    def forward(self, seq_len: int, offset: int = 0) -> Tensor:
        """Return the encodings of positions ``offset .. offset + seq_len - 1``.

        Parameters
        ----------
        seq_len : int
            Number of positions.
        offset : int
            First position (non-zero during incremental decoding).

        Returns
        -------
        torch.Tensor, shape (seq_len, d_model)
            Encodings to add to the embeddings.

        Notes
        -----
        Extends the table when a longer sequence arrives, so there is no maximum length.
        """
        end = offset + seq_len
        if end > self.table.size(0):
            new_length = max(end, 2 * self.table.size(0))
            self.table = sinusoidal_table(new_length, self.d_model, self.layout).to(self.table.device)
        return self.table[offset:end]


class LearnedPositionalEmbedding(nn.Module):
    """A learned vector per position, up to ``max_positions`` (Table 2, row E).

    Parameters
    ----------
    d_model : int
        Embedding width.
    max_positions : int
        Number of positions with a learned vector.

    Notes
    -----
    The paper found learned embeddings "nearly identical" to sinusoids (Table 2, row E: 25.7 vs 25.8 BLEU) but
    they cannot represent positions beyond ``max_positions``: such inputs are an error, never truncated.
    """

    def __init__(self, *, d_model: int, max_positions: int) -> None:
        super().__init__()
        self.max_positions = max_positions
        self.embedding = nn.Embedding(max_positions, d_model)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)

    def forward(self, seq_len: int, offset: int = 0) -> Tensor:
        """Return the embeddings of positions ``offset .. offset + seq_len - 1``.

        Parameters
        ----------
        seq_len : int
            Number of positions.
        offset : int
            First position.

        Returns
        -------
        torch.Tensor, shape (seq_len, d_model)
            Learned position vectors.

        Raises
        ------
        ValueError
            When ``offset + seq_len`` exceeds ``max_positions``.

        Notes
        -----
        A too-long sequence gets a ValueError that names ``max_positions`` and the way out, not the index
        error ``nn.Embedding`` would give.
        """
        end = offset + seq_len
        if end > self.max_positions:
            raise ValueError(
                f"sequence needs position {end - 1} but the learned positional embedding has "
                f"max_positions={self.max_positions}; raise max_positions or use sinusoidal encodings"
            )
        positions = torch.arange(offset, end, device=self.embedding.weight.device)
        return self.embedding(positions)
