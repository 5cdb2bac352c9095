"""Additive (Bahdanau) attention scoring, the alternative to dot products that section 3.2.1 compares.

score(q, k) = w^T tanh(W_q q + W_k k), computed per head. The paper notes it beats unscaled dot products for
large d_k but is slower and uses more memory: the tanh is applied to a (query_len, key_len, d_k) tensor.
"""

import torch
from torch import Tensor, nn

from transformer.model.scaled_dot_product_attention import attend_with_scores


class AdditiveScore(nn.Module):
    """Additive compatibility function of Bahdanau et al. (2015), applied to every head in parallel.

    Parameters
    ----------
    num_heads : int
        Number of attention heads; each has its own scoring parameters.
    d_k : int
        Dimension of each head's queries and keys (also the hidden size of the scoring network).

    Notes
    -----
    Holds ``query_weight`` and ``key_weight`` of shape (num_heads, d_k, d_k) and ``score_vector`` of shape
    (num_heads, d_k). Memory is O(batch * heads * query_len * key_len * d_k): use it for short sequences.
    """

    def __init__(self, *, num_heads: int, d_k: int) -> None:
        super().__init__()
        self.query_weight = nn.Parameter(nn.init.xavier_uniform_(torch.empty(num_heads, d_k, d_k)))
        self.key_weight = nn.Parameter(nn.init.xavier_uniform_(torch.empty(num_heads, d_k, d_k)))
        self.score_vector = nn.Parameter(nn.init.normal_(torch.empty(num_heads, d_k), std=d_k**-0.5))

    def forward(self, query: Tensor, key: Tensor) -> Tensor:
        """Score every query against every key.

        Parameters
        ----------
        query : torch.Tensor, shape (batch, num_heads, query_len, d_k)
            Projected queries.
        key : torch.Tensor, shape (batch, num_heads, key_len, d_k)
            Projected keys.

        Returns
        -------
        torch.Tensor, shape (batch, num_heads, query_len, key_len)
            Unnormalised scores.

        Notes
        -----
        No 1/sqrt(d_k) scaling: the tanh already bounds each term.
        """
        query_hidden = query @ self.query_weight[None]  # (batch, num_heads, query_len, d_k)
        key_hidden = key @ self.key_weight[None]  # (batch, num_heads, key_len, d_k)
        hidden = (query_hidden[:, :, :, None, :] + key_hidden[:, :, None, :, :]).tanh()
        # hidden: (batch, num_heads, query_len, key_len, d_k)
        return (hidden * self.score_vector[None, :, None, None, :]).sum(dim=-1)


def additive_attention(
    scorer: AdditiveScore,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attend_mask: Tensor | None,
    dropout_p: float,
) -> tuple[Tensor, Tensor]:
    """Attend with additive scores instead of scaled dot products.

    Parameters
    ----------
    scorer : AdditiveScore
        The scoring network.
    query : torch.Tensor, shape (batch, num_heads, query_len, d_k)
        Projected queries.
    key : torch.Tensor, shape (batch, num_heads, key_len, d_k)
        Projected keys.
    value : torch.Tensor, shape (batch, num_heads, key_len, d_v)
        Projected values.
    attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, query_len, key_len)
        True where the query may attend to the key.
    dropout_p : float
        Dropout probability on the attention weights.

    Returns
    -------
    output : torch.Tensor, shape (batch, num_heads, query_len, d_v)
        Attention output per head.
    weights : torch.Tensor, shape (batch, num_heads, query_len, key_len)
        Attention probabilities.

    Notes
    -----
    Shares the masked softmax with the dot-product path, so masking behaves identically.
    """
    return attend_with_scores(scorer(query, key), value, attend_mask, dropout_p)
