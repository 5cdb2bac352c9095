"""Scaled dot-product attention, Eq. (1) of the paper: softmax(Q K^T / sqrt(d_k)) V.

The scale is the paper's 1/sqrt(d_k) by default; 1 (unscaled dot products) and 1/d_k can be chosen instead, to
test section 3.2.1's argument for 1/sqrt(d_k) (``transformer experiment attention-scoring``). Two paths
compute the same function. When the caller does not need the attention weights, the fused kernel
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
#: How q . k is scaled: "sqrt" 1/sqrt(d_k) (Eq. 1), "none" not at all, "linear" 1/d_k. The same names as
#: ``TransformerConfig.attention_scaling``, which is checked against its own copy of this list.
SCORE_SCALINGS = ("sqrt", "none", "linear")


def score_scale(d_k: int, scaling: str = "sqrt") -> float:
    """Give the factor that multiplies q . k before the softmax.

    Parameters
    ----------
    d_k : int
        Width of each head's queries and keys.
    scaling : {"sqrt", "none", "linear"}
        The scaling rule (see :data:`SCORE_SCALINGS`).

    Returns
    -------
    float
        ``d_k ** -0.5`` for "sqrt", 1.0 for "none", ``1 / d_k`` for "linear".

    Raises
    ------
    ValueError
        For another name.

    Notes
    -----
    Section 3.2.1: if the components of q and k are independent with mean 0 and variance 1, q . k has mean 0
    and variance d_k, so "sqrt" gives scores of unit variance, "none" of variance d_k and "linear" of variance
    1/d_k.
    """
    if scaling == "sqrt":
        return float(d_k**-0.5)
    if scaling == "none":
        return 1.0
    if scaling == "linear":
        return 1.0 / d_k
    raise ValueError(f"scaling={scaling!r} is not one of {SCORE_SCALINGS}")


def attention_logits(query: Tensor, key: Tensor, scaling: str = "sqrt") -> Tensor:
    """Compute the scaled dot products that the softmax of Eq. (1) normalises.

    Parameters
    ----------
    query : torch.Tensor, shape (batch, num_heads, query_len, d_k)
        Projected queries.
    key : torch.Tensor, shape (batch, num_heads, key_len, d_k)
        Projected keys.
    scaling : {"sqrt", "none", "linear"}
        The factor applied to q . k (:func:`score_scale`).

    Returns
    -------
    torch.Tensor, shape (batch, num_heads, query_len, key_len)
        ``scale * Q K^T``, unmasked.

    Notes
    -----
    The queries (query_len x d_k) are scaled rather than the scores (query_len x key_len), which is cheaper;
    "none" multiplies by nothing at all. The explicit path of :func:`scaled_dot_product_attention` and the
    attention statistics of ``transformer.experiments.attention_scoring.attention_statistics`` both use this
    function, so the logits those statistics see are the ones the model computes.
    """
    factor = score_scale(query.size(-1), scaling)
    scaled = query if scaling == "none" else query * factor
    return torch.matmul(scaled, key.transpose(-2, -1))


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attend_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    implementation: str = "fused",
    explicit_max_length: int = EXPLICIT_MAX_LENGTH,
    scaling: str = "sqrt",
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
    scaling : {"sqrt", "none", "linear"}
        The factor on q . k: 1/sqrt(d_k) (the paper), 1 or 1/d_k; see :func:`score_scale`.

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
    machine and set ``explicit_max_length``. Both paths agree to 1e-5 in fp32, for every scaling. The fused
    kernel gets ``scale=`` only for a scaling other than "sqrt", so the default runs exactly as before.
    """
    if implementation not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(f"implementation={implementation!r} is not one of {ATTENTION_IMPLEMENTATIONS}")
    # None: the kernel's own 1/sqrt(d_k); checks the name for the fused path too.
    fused_scale = None if scaling == "sqrt" else score_scale(query.size(-1), scaling)
    short = max(query.size(-2), key.size(-2)) <= explicit_max_length
    if need_weights or implementation == "explicit" or (implementation == "auto" and short):
        scores = attention_logits(query, key, scaling)
        output, weights = attend_with_scores(scores, value, attend_mask, dropout_p)
        return output, weights if need_weights else None
    if attend_mask is None:
        return F.scaled_dot_product_attention(query, key, value, dropout_p=dropout_p, scale=fused_scale), None
    # A query with no allowed key would give NaN in some kernels: let it see every key, then zero its output.
    query_has_key = attend_mask.any(dim=-1, keepdim=True)  # (..., query_len, 1)
    output = F.scaled_dot_product_attention(
        query, key, value, attn_mask=attend_mask | ~query_has_key, dropout_p=dropout_p, scale=fused_scale
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
