"""Token embeddings scaled by sqrt(d_model) (paper section 3.4)."""

import math

import torch
from torch import Tensor, nn


class TokenEmbedding(nn.Module):
    """Look up a learned vector per token and multiply it by sqrt(d_model).

    Parameters
    ----------
    vocab_size : int
        Number of tokens.
    d_model : int
        Embedding width.
    pad_id : int
        Id of the padding token; its vector starts at zero and receives no gradient from the lookup (with a
        tied output projection the logits still update it).
    scale : bool
        Multiply by sqrt(d_model) as the paper does (section 3.4).

    Notes
    -----
    Weights start from N(0, d_model^-1/2): after the sqrt(d_model) scaling the embedded tokens have unit
    variance, matching the sinusoidal encodings in magnitude, and the same matrix used as the (tied) output
    projection gives logits of unit variance. ``weight`` can be shared between source and target embeddings
    and the pre-softmax projection (section 3.4).
    """

    def __init__(self, *, vocab_size: int, d_model: int, pad_id: int, scale: bool = True) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.scale = math.sqrt(d_model) if scale else 1.0
        nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)
        with torch.no_grad():
            self.embedding.weight[pad_id].zero_()

    @property
    def weight(self) -> Tensor:
        """The embedding matrix, shape (vocab_size, d_model).

        Returns
        -------
        torch.Tensor, shape (vocab_size, d_model)
            The ``nn.Embedding`` parameter itself, not a copy.

        Notes
        -----
        Unscaled: the sqrt(d_model) factor is applied in :meth:`forward` only. Section 3.4 shares this
        matrix with the pre-softmax linear transformation, which uses it unscaled.
        """
        return self.embedding.weight

    def forward(self, tokens: Tensor) -> Tensor:
        """Embed token ids.

        Parameters
        ----------
        tokens : torch.Tensor, shape (batch, seq_len), int64
            Token ids.

        Returns
        -------
        torch.Tensor, shape (batch, seq_len, d_model)
            Scaled embeddings.

        Raises
        ------
        IndexError
            From ``nn.Embedding``, for an id outside ``[0, vocab_size)``.

        Notes
        -----
        Section 3.4: the embeddings are multiplied by sqrt(d_model) (``scale``, 1 when scaling is off), so they
        are not drowned by the positional encodings added next.
        """
        return self.embedding(tokens) * self.scale
