"""Multi-head attention (paper section 3.2.2): h parallel attentions over learned projections.

MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O with head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).
One module serves the three uses in the model: encoder self-attention, masked decoder self-attention and
encoder-decoder (cross) attention. For incremental decoding the projection and the attention are also
exposed separately, so a decoder can cache projected keys and values.
"""

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from transformer.model.additive_attention import AdditiveScore, additive_attention
from transformer.model.scaled_dot_product_attention import (
    ATTENTION_IMPLEMENTATIONS,
    EXPLICIT_MAX_LENGTH,
    SCORE_SCALINGS,
    attend_with_scores,
    attention_logits,
    scaled_dot_product_attention,
)

ATTENTION_SCORINGS = ("dot_product", "additive")
#: ``hook(query_heads, key_heads, logits, attend_mask) -> logits``: sees (and may replace) the attention logits.
LogitsHook = Callable[[Tensor, Tensor, Tensor, Tensor | None], Tensor]


def _same_tensors(held: list[Tensor], versions: list[int], current: list[Tensor], now: list[int]) -> bool:
    """Whether ``current`` are the very storages in ``held``, unmodified since ``versions`` were read."""
    if len(held) != len(current) or versions != now:
        return False
    return all(
        old.data_ptr() == new.data_ptr() and old.dtype == new.dtype and old.shape == new.shape
        for old, new in zip(held, current, strict=True)
    )


def split_heads(hidden: Tensor, num_heads: int) -> Tensor:
    """Split the last dimension into heads and move heads before positions.

    Parameters
    ----------
    hidden : torch.Tensor, shape (batch, seq_len, num_heads * head_dim)
        Projected vectors of all heads, concatenated.
    num_heads : int
        Number of heads.

    Returns
    -------
    torch.Tensor, shape (batch, num_heads, seq_len, head_dim)
        A view with one slice per head.

    Notes
    -----
    Inverse of :func:`merge_heads`. Head i takes features ``i * head_dim`` to ``(i + 1) * head_dim`` of
    the projection, so one (d_model, h * d_k) matrix equals the paper's h separate W_i projections of
    section 3.2.2. No copy is made: the result is a (non-contiguous) view of ``hidden``.
    """
    batch_size, seq_len, _ = hidden.shape
    return hidden.view(batch_size, seq_len, num_heads, -1).transpose(1, 2)


def split_fused_heads(projected: Tensor, num_heads: int) -> tuple[Tensor, Tensor, Tensor]:
    """Split one fused query/key/value projection into the three, each split into heads.

    Parameters
    ----------
    projected : torch.Tensor, shape (batch, seq_len, 3 * num_heads * head_dim)
        The output of the fused projection: queries, then keys, then values.
    num_heads : int
        Number of heads.

    Returns
    -------
    tuple of torch.Tensor, each shape (batch, num_heads, seq_len, head_dim)
        Queries, keys and values, views of ``projected``.

    Notes
    -----
    Self-attention projects the same input three times, so one (d_model, 3 * h * d_k) matrix product replaces
    three; the float and the int8 modules both fuse that way (only where d_k equals d_v, so the three chunks
    are equal in width).
    """
    query, key, value = projected.chunk(3, dim=-1)
    return split_heads(query, num_heads), split_heads(key, num_heads), split_heads(value, num_heads)


def merge_heads(hidden: Tensor) -> Tensor:
    """Concatenate the heads' outputs along the feature dimension (the Concat of the paper).

    Parameters
    ----------
    hidden : torch.Tensor, shape (batch, num_heads, seq_len, head_dim)
        Output of each head.

    Returns
    -------
    torch.Tensor, shape (batch, seq_len, num_heads * head_dim)
        Heads concatenated per position.

    Notes
    -----
    Inverse of :func:`split_heads`: MultiHead = Concat(head_1, ..., head_h) W^O in section 3.2.2. The
    transposed input is generally not contiguous, so ``reshape`` usually copies it here.
    """
    batch_size, num_heads, seq_len, head_dim = hidden.shape
    return hidden.transpose(1, 2).reshape(batch_size, seq_len, num_heads * head_dim)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate query, key, value and output projections.

    Parameters
    ----------
    d_model : int
        Width of the inputs and of the output.
    num_heads : int
        Number of heads h.
    d_k : int, optional
        Width of each head's queries and keys; defaults to ``d_model // num_heads``.
    d_v : int, optional
        Width of each head's values; defaults to ``d_model // num_heads``.
    dropout : float
        Dropout on the attention weights (the paper uses none here; its dropout is on the residuals).
    bias : bool
        Whether the four projections have biases.
    scoring : {"dot_product", "additive"}
        Compatibility function: scaled dot product (Eq. 1) or additive (Bahdanau).
    implementation : {"fused", "explicit", "auto"}
        How dot-product attention is computed when weights are not needed (see
        :func:`transformer.model.scaled_dot_product_attention.scaled_dot_product_attention`).
    scaling : {"sqrt", "none", "linear"}
        Factor on the dot products: 1/sqrt(d_k) (Eq. 1), 1 or 1/d_k. Must be "sqrt" with additive scoring,
        which has no such factor.

    Notes
    -----
    ``d_k`` and ``d_v`` may differ from ``d_model // num_heads``, as in Table 2 rows (A) and (B). The
    projections are ``nn.Linear`` attributes ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj``, so weights
    map one-to-one onto ``torch.nn.MultiheadAttention`` and HuggingFace Marian.

    ``logits_hook`` (None by default, not a constructor argument) lets an inspection tool see the attention
    logits, the scores just before the mask and the softmax: while set, :meth:`attend` computes them
    explicitly, calls ``logits_hook(query_heads, key_heads, logits, attend_mask)`` and normalises what it
    returns. ``transformer.experiments.attention_scoring.attention_statistics`` uses it to measure scores and
    their gradients.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_k: int | None = None,
        d_v: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        scoring: str = "dot_product",
        implementation: str = "fused",
        scaling: str = "sqrt",
    ) -> None:
        super().__init__()
        if d_model <= 0 or num_heads <= 0:
            raise ValueError(f"d_model={d_model} and num_heads={num_heads} must be positive")
        if (d_k is None or d_v is None) and d_model % num_heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}; set d_k and d_v explicitly"
            )
        if implementation not in ATTENTION_IMPLEMENTATIONS:
            raise ValueError(f"implementation={implementation!r} is not one of {ATTENTION_IMPLEMENTATIONS}")
        if scoring not in ATTENTION_SCORINGS:
            raise ValueError(f"scoring={scoring!r} is not one of {ATTENTION_SCORINGS}")
        if scaling not in SCORE_SCALINGS:
            raise ValueError(f"scaling={scaling!r} is not one of {SCORE_SCALINGS}")
        if scoring == "additive" and scaling != "sqrt":
            raise ValueError(
                f"scaling={scaling!r} applies to dot products; additive scoring has no scale factor"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout={dropout} must be in [0, 1)")
        self.num_heads = num_heads
        self.d_k = d_k if d_k is not None else d_model // num_heads
        self.d_v = d_v if d_v is not None else d_model // num_heads
        if self.d_k <= 0 or self.d_v <= 0:
            raise ValueError(f"d_k={self.d_k} and d_v={self.d_v} must be positive")
        self.dropout = dropout
        self.implementation = implementation
        self.scaling = scaling
        self.logits_hook: LogitsHook | None = None
        # The length threshold of implementation="auto"; training and translation set it from a measurement
        # on the machine at hand (transformer.autotune.attention_probe).
        self.explicit_max_length = EXPLICIT_MAX_LENGTH
        self.q_proj = nn.Linear(d_model, num_heads * self.d_k, bias=bias)
        self.k_proj = nn.Linear(d_model, num_heads * self.d_k, bias=bias)
        self.v_proj = nn.Linear(d_model, num_heads * self.d_v, bias=bias)
        self.out_proj = nn.Linear(num_heads * self.d_v, d_model, bias=bias)
        self.additive_score = (
            AdditiveScore(num_heads=num_heads, d_k=self.d_k) if scoring == "additive" else None
        )
        # Inference-only stack of the q/k/v weights (see _fused_projection); not part of the state dict.
        self._fused_cache: tuple[list[Tensor], list[int], Tensor, Tensor | None] | None = None

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attend_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from every query position to the key/value positions.

        Parameters
        ----------
        query : torch.Tensor, shape (batch, query_len, d_model)
            Inputs that ask (the decoder state for cross-attention).
        key : torch.Tensor, shape (batch, key_len, d_model)
            Inputs that are matched (the encoder output for cross-attention).
        value : torch.Tensor, shape (batch, key_len, d_model)
            Inputs that are mixed; usually the same tensor as ``key``.
        attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, query_len, key_len)
            True where attention is allowed; None allows every pair.
        need_weights : bool
            Also return the attention weights of every head.

        Returns
        -------
        output : torch.Tensor, shape (batch, query_len, d_model)
            Attention output after the output projection.
        weights : torch.Tensor or None, shape (batch, num_heads, query_len, key_len)
            Attention probabilities per head when ``need_weights``, else None.

        Notes
        -----
        Self-attention passes the same tensor three times; then one matrix product computes the query, key
        and value projections together.
        """
        if query is key and key is value:
            query_heads, key_heads, value_heads = self.project_self(query)
        else:
            query_heads = self.project_query(query)
            key_heads, value_heads = self.project_key_value(key, value)
        return self.attend(query_heads, key_heads, value_heads, attend_mask, need_weights)

    def project_self(self, hidden: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Project one input into queries, keys and values with a single matrix product.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, seq_len, d_model)
            Input of self-attention.

        Returns
        -------
        query, key, value : torch.Tensor, each shape (batch, num_heads, seq_len, head_dim)
            Projected and split into heads.

        Notes
        -----
        Equivalent to calling ``q_proj``, ``k_proj`` and ``v_proj`` separately; the concatenated weight keeps
        the parameters separate (and loadable from other libraries) while doing one GEMM instead of three.
        When ``d_k != d_v`` the three projections run separately.
        """
        if self.d_k != self.d_v:
            key, value = self.project_key_value(hidden, hidden)
            return self.project_query(hidden), key, value
        weight, bias = self._fused_projection()
        projected = F.linear(hidden, weight, bias)  # (batch, seq_len, 3 * num_heads * head_dim)
        return split_fused_heads(projected, self.num_heads)

    def _fused_projection(self) -> tuple[Tensor, Tensor | None]:
        """Return the q/k/v weights (and biases) stacked into one matrix, (3 * num_heads * d_k, d_model).

        With autograd on, the stack is rebuilt every call so gradients reach the three parameters. Without it
        (inference), the stack is kept and rebuilt only when a parameter was replaced or changed in place
        (``Tensor._version``), so decoding does not copy the weights at every step.
        """
        parameters = [self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]
        biases = [self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]
        has_bias = all(bias is not None for bias in biases)
        if has_bias:
            parameters += [bias for bias in biases if bias is not None]
        if torch.is_grad_enabled() and any(parameter.requires_grad for parameter in parameters):
            self._fused_cache = None
            return torch.cat(parameters[:3]), torch.cat(parameters[3:]) if has_bias else None
        versions = [parameter._version for parameter in parameters]
        cache = self._fused_cache
        if cache is None or not _same_tensors(cache[0], cache[1], parameters, versions):
            with torch.no_grad():
                weight = torch.cat(parameters[:3])
                bias = torch.cat(parameters[3:]) if has_bias else None
            # The detached views keep the storages they stacked alive, so a replaced parameter can never get
            # the same address (and so pass for unchanged) while this cache exists.
            cache = ([parameter.detach() for parameter in parameters], versions, weight, bias)
            self._fused_cache = cache
        return cache[2], cache[3]

    def project_query(self, query: Tensor) -> Tensor:
        """Project queries and split them into heads.

        Parameters
        ----------
        query : torch.Tensor, shape (batch, query_len, d_model)
            Query inputs.

        Returns
        -------
        torch.Tensor, shape (batch, num_heads, query_len, d_k)
            Projected queries per head.

        Notes
        -----
        Applies ``q_proj`` (W^Q for all heads at once). Kept apart from the key/value projection because in
        encoder-decoder attention (section 3.2.3) the queries come from the decoder while keys and values
        come from the encoder, which decoding projects once and caches.
        """
        return split_heads(self.q_proj(query), self.num_heads)

    def project_key_value(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Project keys and values and split them into heads.

        Parameters
        ----------
        key : torch.Tensor, shape (batch, key_len, d_model)
            Key inputs.
        value : torch.Tensor, shape (batch, key_len, d_model)
            Value inputs.

        Returns
        -------
        key_heads : torch.Tensor, shape (batch, num_heads, key_len, d_k)
            Projected keys per head.
        value_heads : torch.Tensor, shape (batch, num_heads, key_len, d_v)
            Projected values per head.

        Notes
        -----
        Decoding calls this once per sentence for cross-attention (the encoder output does not change) and
        once per step for the newest target position in self-attention, appending to a cache.
        """
        return split_heads(self.k_proj(key), self.num_heads), split_heads(self.v_proj(value), self.num_heads)

    def attend(
        self,
        query_heads: Tensor,
        key_heads: Tensor,
        value_heads: Tensor,
        attend_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend with already projected heads and apply the output projection.

        Parameters
        ----------
        query_heads : torch.Tensor, shape (batch, num_heads, query_len, d_k)
            Projected queries.
        key_heads : torch.Tensor, shape (batch, num_heads, key_len, d_k)
            Projected keys (possibly cached).
        value_heads : torch.Tensor, shape (batch, num_heads, key_len, d_v)
            Projected values (possibly cached).
        attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, query_len, key_len)
            True where attention is allowed.
        need_weights : bool
            Also return the attention weights.

        Returns
        -------
        output : torch.Tensor, shape (batch, query_len, d_model)
            Attention output after ``out_proj`` (W^O).
        weights : torch.Tensor or None, shape (batch, num_heads, query_len, key_len)
            Attention probabilities per head, or None.

        Notes
        -----
        Taking projected heads lets incremental decoding pass cached keys and values without projecting them
        again. Attention dropout is active only in training mode. The explicit weights are computed only
        when needed (``need_weights``, additive scoring, ``logits_hook``, or the explicit path of
        ``implementation``).
        """
        dropout_p = self.dropout if self.training else 0.0
        weights: Tensor | None
        if self.logits_hook is not None:
            if self.additive_score is not None:
                logits = self.additive_score(query_heads, key_heads)
            else:
                logits = attention_logits(query_heads, key_heads, self.scaling)
            logits = self.logits_hook(query_heads, key_heads, logits, attend_mask)
            heads, weights = attend_with_scores(logits, value_heads, attend_mask, dropout_p)
            weights = weights if need_weights else None
        elif self.additive_score is not None:
            heads, weights = additive_attention(
                self.additive_score, query_heads, key_heads, value_heads, attend_mask, dropout_p
            )
            weights = weights if need_weights else None
        else:
            heads, weights = scaled_dot_product_attention(
                query_heads,
                key_heads,
                value_heads,
                attend_mask,
                dropout_p,
                need_weights,
                self.implementation,
                self.explicit_max_length,
                self.scaling,
            )
        return self.out_proj(merge_heads(heads)), weights
