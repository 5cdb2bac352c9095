"""Scaled dot-product attention, Eq. (1) of the paper: softmax(Q K^T / sqrt(d_k)) V.

Two paths compute the same function. When the caller does not need the attention weights, the fused kernel
``torch.nn.functional.scaled_dot_product_attention`` runs: it never materialises the full
``(query_len, key_len)`` probability matrix on the memory-efficient and flash backends, so memory stays
linear in length. When the weights are needed (visualisation, tests), the explicit formula runs.
"""

import torch
from torch import Tensor
from torch.nn import functional as F

from transformer.model.dropout import dropout

ATTENTION_IMPLEMENTATIONS = ("fused", "explicit", "auto")
#: Longest query or key length for which "auto" uses the explicit formula unless a measurement on the machine
#: at hand (``transformer.autotune.attention_probe``) says otherwise; see the Notes below.
EXPLICIT_MAX_LENGTH = 256


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attend_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    implementation: str = "fused",
    explicit_max_length: int = EXPLICIT_MAX_LENGTH,
) -> tuple[Tensor, Tensor | None]:
    """Mix value vectors by softmax-normalised, scaled query-key dot products.

    Parameters
    ----------
    query : torch.Tensor, shape (batch, num_heads, query_len, d_k)
        Projected queries.
    key : torch.Tensor, shape (batch, num_heads, key_len, d_k)
        Projected keys.
    value : torch.Tensor, shape (batch, num_heads, key_len, d_v)
        Projected values.
    attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, query_len, key_len)
        True where the query may attend to the key; None allows every pair.
    dropout_p : float
        Dropout probability on the attention weights; pass 0.0 at evaluation time.
    need_weights : bool
        Also return the attention weights (uses the explicit formula instead of the fused kernel).
    implementation : {"fused", "explicit", "auto"}
        Which path computes the output when weights are not needed: the fused kernel, the explicit formula,
        or "auto": explicit while both lengths are at most ``explicit_max_length``, fused beyond.
    explicit_max_length : int
        The length threshold of "auto" (0: always fused).

    Returns
    -------
    output : torch.Tensor, shape (batch, num_heads, query_len, d_v)
        Attention output per head.
    weights : torch.Tensor or None, shape (batch, num_heads, query_len, key_len)
        The attention probabilities (after dropout) when ``need_weights``, else None.

    Notes
    -----
    Eq. (1) of Vaswani et al. (2017). The 1/sqrt(d_k) factor keeps the variance of q . k near 1 when the
    components of q and k have unit variance, so the softmax does not saturate (section 3.2.1). A query
    whose row of ``attend_mask`` is entirely False gets a zero output and zero gradient, never NaN.

    Why "auto": on CPUs the fused kernel has a fixed overhead that plain matrix products beat at sentence
    lengths (measured 3.5x in bf16 at length 128), while from a few hundred positions on the fused kernel
    wins on time and, above all, keeps memory linear in length. Where the two cross depends on the machine
    (on GPUs the fused kernels win from short lengths on), so training and translation measure it once per
    machine and set ``explicit_max_length``. Both paths agree to 1e-5 in fp32.
    """
    if implementation not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(f"implementation={implementation!r} is not one of {ATTENTION_IMPLEMENTATIONS}")
    short = max(query.size(-2), key.size(-2)) <= explicit_max_length
    if need_weights or implementation == "explicit" or (implementation == "auto" and short):
        # Scaling the queries (query_len x d_k) is cheaper than scaling the scores (query_len x key_len).
        scores = torch.matmul(query * query.size(-1) ** -0.5, key.transpose(-2, -1))
        output, weights = attend_with_scores(scores, value, attend_mask, dropout_p)
        return output, weights if need_weights else None
    if attend_mask is None:
        return F.scaled_dot_product_attention(query, key, value, dropout_p=dropout_p), None
    # A query with no allowed key would give NaN in some kernels: let it see every key, then zero its output.
    query_has_key = attend_mask.any(dim=-1, keepdim=True)  # (..., query_len, 1)
    output = F.scaled_dot_product_attention(
        query, key, value, attn_mask=attend_mask | ~query_has_key, dropout_p=dropout_p
    )
    return output.masked_fill(~query_has_key, 0.0), None


def attend_with_scores(
    scores: Tensor, value: Tensor, attend_mask: Tensor | None, dropout_p: float
) -> tuple[Tensor, Tensor]:
    """Normalise attention scores with a masked softmax and take the weighted sum of values.

    Parameters
    ----------
    scores : torch.Tensor, shape (batch, num_heads, query_len, key_len)
        Unnormalised compatibility of each query with each key (dot-product or additive).
    value : torch.Tensor, shape (batch, num_heads, key_len, d_v)
        Projected values.
    attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, query_len, key_len)
        True where the query may attend to the key; None allows every pair.
    dropout_p : float
        Dropout probability on the attention weights.

    Returns
    -------
    output : torch.Tensor, shape (batch, num_heads, query_len, d_v)
        Attention output per head.
    weights : torch.Tensor, shape (batch, num_heads, query_len, key_len)
        Attention probabilities after masking and dropout.

    Notes
    -----
    Masked scores are set to the dtype's most negative finite value rather than -inf, and the weights are
    zeroed there afterwards, so a fully masked row yields zeros (and zero gradients) instead of NaN.
    """
    if attend_mask is not None:
        scores = scores.masked_fill(~attend_mask, torch.finfo(scores.dtype).min)
    # Normalise in float32 even under bf16 autocast (which leaves softmax in bf16 on CPUs): 8 mantissa bits
    # are too coarse for attention probabilities; the fused kernel accumulates in float32 too.
    low_precision = scores.dtype in (torch.float16, torch.bfloat16)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32 if low_precision else None).to(value.dtype)
    if attend_mask is not None:
        weights = weights.masked_fill(~attend_mask, 0.0)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return torch.matmul(weights, value), weights
