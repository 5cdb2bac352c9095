"""Additive (Bahdanau) attention scoring, the alternative to dot products that section 3.2.1 compares.

score(q, k) = w^T tanh(W_q q + W_k k), computed per head. The paper notes it beats unscaled dot products for
large d_k but is slower and uses more memory: the tanh is applied to a (query_len, key_len, d_k) tensor.
"""

import math

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

    Initialisation: Glorot (Xavier) uniform per head, each head's W_q and W_k as a d_k -> d_k layer,
    U(-sqrt(3 / d_k), sqrt(3 / d_k)), and its score vector as a d_k -> 1 layer, U(-sqrt(6 / (d_k + 1)), ...).
    Why Glorot: it is how every other projection of this model is initialised (as in the paper's
    tensor2tensor code), so the scoring comparison of section 3.2.1 changes the compatibility function and
    nothing else; and for unit-variance queries and keys it gives scores of standard deviation about 1 at
    every d_k, the spread of the scaled dot products, so neither scorer starts sharper (tested). Not Bahdanau
    et al.'s own (2015, appendix: W_a, U_a ~ N(0, 0.001^2), v_a = 0): that starts every score at exactly 0,
    uniform attention with no gradient into W_a and U_a until v_a moves, a choice made for a recurrent model
    trained for days. Until issue #29 this module applied ``xavier_uniform_`` to the stacked
    (num_heads, d_k, d_k) tensor, whose fans torch reads as d_k^2 and num_heads * d_k, with v ~ N(0, 1 / d_k):
    the score spread then fell from 0.45 at d_k = 4 to 0.19 at d_k = 128, attention near uniform at the start
    exactly where additive scoring did worst.
    """

    def __init__(self, *, num_heads: int, d_k: int) -> None:
        super().__init__()
        hidden_bound = math.sqrt(6.0 / (d_k + d_k))  # Glorot: fan_in = fan_out = d_k per head
        score_bound = math.sqrt(6.0 / (d_k + 1))  # Glorot: fan_in = d_k, fan_out = 1
        self.query_weight = nn.Parameter(
            torch.empty(num_heads, d_k, d_k).uniform_(-hidden_bound, hidden_bound)
        )
        self.key_weight = nn.Parameter(torch.empty(num_heads, d_k, d_k).uniform_(-hidden_bound, hidden_bound))
        self.score_vector = nn.Parameter(torch.empty(num_heads, d_k).uniform_(-score_bound, score_bound))

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
