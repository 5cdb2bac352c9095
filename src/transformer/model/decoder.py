"""The decoder: N layers of masked self-attention, encoder-decoder attention and feed-forward (section 3.1).

Incremental decoding feeds one new token per step. Each layer then keeps the projected keys and values of
all earlier target positions (so self-attention does not recompute them) and the projected encoder output
(computed once per sentence for cross-attention) in a :class:`DecoderCache`.
"""

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from transformer.model.config import TransformerConfig
from transformer.model.encoder import build_attention, build_residual
from transformer.model.feed_forward import PositionwiseFeedForward


@dataclass
class DecoderLayerCache:
    """Projected keys and values one decoder layer reuses across decoding steps.

    Parameters
    ----------
    cross_key : torch.Tensor, shape (batch, num_heads, src_len, d_k)
        Encoder output projected by the cross-attention's ``k_proj``.
    cross_value : torch.Tensor, shape (batch, num_heads, src_len, d_v)
        Encoder output projected by the cross-attention's ``v_proj``.
    self_key : torch.Tensor or None, shape (batch, num_heads, decoded_len, d_k)
        Self-attention keys of the target positions decoded so far; None before the first step.
    self_value : torch.Tensor or None, shape (batch, num_heads, decoded_len, d_v)
        Self-attention values of the target positions decoded so far.

    Notes
    -----
    Mutated in place by :meth:`DecoderLayer.forward`, which appends each step's keys/values to ``self_key``
    and ``self_value`` along dim 2; the cross-attention projections never change after
    :meth:`Decoder.init_cache`. The cross tensors have one row per ``rows_per_source`` decoder rows, the
    self tensors one per decoder row (see :class:`DecoderCache`).
    """

    cross_key: Tensor
    cross_value: Tensor
    self_key: Tensor | None = None
    self_value: Tensor | None = None


@dataclass
class DecoderCache:
    """Everything the decoder reuses between incremental steps.

    Parameters
    ----------
    layers : list of DecoderLayerCache
        One entry per decoder layer.
    cross_attend_mask : torch.Tensor, shape (num_sentences, 1, 1, src_len), bool
        True on real source tokens, per source sentence.
    decoded_len : int
        Number of target positions already fed (the position offset of the next token).
    rows_per_source : int
        Consecutive decoder rows that share one source sentence's projected encoder output (1: one row per
        source).

    Notes
    -----
    Self-attention keys/values are per row; the projected encoder output is per *source*, and when several
    target rows decode against one source (the beams of beam search, several samples), cross-attention folds
    those rows into one query block instead of copying the encoder keys/values for every row at every step.
    The model only honours the layout; which rows exist and how they follow each other is decided by the
    search (:func:`transformer.decoding.cache_rows.reorder_decoder_cache`).
    """

    layers: list[DecoderLayerCache] = field(default_factory=list)
    cross_attend_mask: Tensor | None = None
    decoded_len: int = 0
    rows_per_source: int = 1


class DecoderLayer(nn.Module):
    """One decoder layer: masked self-attention, encoder-decoder attention, feed-forward.

    Parameters
    ----------
    config : TransformerConfig
        Model hyper-parameters.

    Notes
    -----
    Each of the three sub-layers is wrapped in a residual connection with dropout and LayerNorm.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.self_attention = build_attention(config)
        self.self_attention_residual = build_residual(config)
        self.cross_attention = build_attention(config)
        self.cross_attention_residual = build_residual(config)
        self.feed_forward = PositionwiseFeedForward(
            d_model=config.d_model, d_ff=config.d_ff, activation=config.activation
        )
        self.feed_forward_residual = build_residual(config)

    def forward(
        self,
        hidden: Tensor,
        memory: Tensor | None,
        self_attend_mask: Tensor | None,
        cross_attend_mask: Tensor | None,
        cache: DecoderLayerCache | None = None,
        need_weights: bool = False,
        rows_per_source: int = 1,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Apply the layer to target positions, fully or incrementally.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, tgt_len, d_model)
            Layer input; during incremental decoding only the new positions.
        memory : torch.Tensor or None, shape (batch, src_len, d_model)
            Encoder output; may be None when ``cache`` holds its projections.
        self_attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, tgt_len, key_len)
            True where a target position may attend to an earlier one (causal, optionally windowed).
        cross_attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, tgt_len, src_len)
            True on real source tokens.
        cache : DecoderLayerCache or None
            Reused projections; when given, the new keys/values are appended to it.
        need_weights : bool
            Also return self- and cross-attention weights.
        rows_per_source : int
            With ``cache``: consecutive rows that share one source sentence's encoder output (its beams).

        Returns
        -------
        hidden : torch.Tensor, shape (batch, tgt_len, d_model)
            Layer output.
        self_weights : torch.Tensor or None, shape (batch, num_heads, tgt_len, key_len)
            Masked self-attention weights when ``need_weights``.
        cross_weights : torch.Tensor or None, shape (batch, num_heads, tgt_len, src_len)
            Encoder-decoder attention weights when ``need_weights``.

        Notes
        -----
        Section 3.2.3: queries of the cross-attention come from the decoder, keys and values from the encoder.
        """
        attention_input = self.self_attention_residual.normalize_input(hidden)
        query, key, value = self.self_attention.project_self(
            attention_input
        )  # (batch, num_heads, tgt_len, d_k)
        if cache is not None:
            if cache.self_key is not None and cache.self_value is not None:
                key = torch.cat([cache.self_key, key], dim=2)  # (batch, num_heads, key_len, d_k)
                value = torch.cat([cache.self_value, value], dim=2)
            cache.self_key, cache.self_value = key, value
        attended, self_weights = self.self_attention.attend(query, key, value, self_attend_mask, need_weights)
        hidden = self.self_attention_residual.add(hidden, attended)

        cross_input = self.cross_attention_residual.normalize_input(hidden)
        cross_query = self.cross_attention.project_query(cross_input)  # (rows, num_heads, tgt_len, d_k)
        if cache is not None:
            attended, cross_weights = self._attend_cached_source(
                cross_query, cache, cross_attend_mask, rows_per_source, need_weights
            )
        elif memory is not None:
            cross_key, cross_value = self.cross_attention.project_key_value(memory, memory)
            attended, cross_weights = self.cross_attention.attend(
                cross_query, cross_key, cross_value, cross_attend_mask, need_weights
            )
        else:
            raise ValueError("DecoderLayer needs the encoder output (memory) or a cache of its projection")
        hidden = self.cross_attention_residual.add(hidden, attended)
        hidden = self.feed_forward_residual.add(
            hidden, self.feed_forward(self.feed_forward_residual.normalize_input(hidden))
        )
        return hidden, self_weights, cross_weights

    def _attend_cached_source(
        self,
        query: Tensor,
        cache: DecoderLayerCache,
        cross_attend_mask: Tensor | None,
        rows_per_source: int,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        """Cross-attend every row to its source's cached encoder keys/values, rows of one source folded together."""
        rows, num_heads, tgt_len, d_k = query.shape
        num_sentences = rows // rows_per_source
        # (rows, heads, tgt_len, d_k) -> (sentences, heads, rows_per_source * tgt_len, d_k)
        grouped = query.view(num_sentences, rows_per_source, num_heads, tgt_len, d_k).transpose(1, 2)
        grouped = grouped.reshape(num_sentences, num_heads, rows_per_source * tgt_len, d_k)
        attended, weights = self.cross_attention.attend(
            grouped, cache.cross_key, cache.cross_value, cross_attend_mask, need_weights
        )
        attended = attended.reshape(rows, tgt_len, -1)  # (rows, tgt_len, d_model)
        if weights is not None:
            src_len = weights.size(-1)
            weights = weights.view(num_sentences, num_heads, rows_per_source, tgt_len, src_len).transpose(
                1, 2
            )
            weights = weights.reshape(rows, num_heads, tgt_len, src_len)
        return attended, weights


class Decoder(nn.Module):
    """A stack of ``num_decoder_layers`` decoder layers.

    Parameters
    ----------
    config : TransformerConfig
        Model hyper-parameters.

    Notes
    -----
    With ``norm_first`` a final LayerNorm normalises the output before the pre-softmax projection.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_decoder_layers))
        self.final_norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        )

    def init_cache(self, memory: Tensor, cross_attend_mask: Tensor) -> DecoderCache:
        """Project the encoder output once for every layer's cross-attention.

        Parameters
        ----------
        memory : torch.Tensor, shape (batch, src_len, d_model)
            Encoder output.
        cross_attend_mask : torch.Tensor, shape (batch, 1, 1, src_len), bool
            True on real source tokens.

        Returns
        -------
        DecoderCache
            Empty self-attention caches and filled cross-attention keys/values.

        Notes
        -----
        Without this, every decoding step would re-project the whole source in every layer.
        """
        layers = []
        for layer in self.layers:
            assert isinstance(layer, DecoderLayer)
            cross_key, cross_value = layer.cross_attention.project_key_value(memory, memory)
            # Lay the keys out so that key.transpose(-2, -1) is contiguous and the values contiguous: every
            # decoding step multiplies by them, and a strided operand would be copied at every step.
            cross_key = cross_key.transpose(-2, -1).contiguous().transpose(-2, -1)
            cross_value = cross_value.contiguous()
            layers.append(DecoderLayerCache(cross_key=cross_key, cross_value=cross_value))
        return DecoderCache(layers=layers, cross_attend_mask=cross_attend_mask)

    def forward(
        self,
        hidden: Tensor,
        memory: Tensor | None,
        self_attend_mask: Tensor | None,
        cross_attend_mask: Tensor | None,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Decode embedded target tokens.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, tgt_len, d_model)
            Embedded target tokens (shifted right) plus positional encodings.
        memory : torch.Tensor or None, shape (batch, src_len, d_model)
            Encoder output; None when ``cache`` is given.
        self_attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, tgt_len, key_len)
            Causal (and optionally windowed) mask.
        cross_attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, tgt_len, src_len)
            True on real source tokens.
        cache : DecoderCache or None
            Incremental-decoding state, updated in place.
        need_weights : bool
            Collect attention weights.

        Returns
        -------
        hidden : torch.Tensor, shape (batch, tgt_len, d_model)
            Decoder output.
        self_weights : list of torch.Tensor
            Per layer, shape (batch, num_heads, tgt_len, key_len), when ``need_weights``.
        cross_weights : list of torch.Tensor
            Per layer, shape (batch, num_heads, tgt_len, src_len), when ``need_weights``.

        Notes
        -----
        Section 3.1: each layer's output feeds the next, and every layer's encoder-decoder attention reads
        the same final encoder output. The layer caches are updated in place, but ``cache.decoded_len`` is
        not: the caller (:meth:`Transformer.decode`) advances it, since it also picks the positional offset.
        """
        all_self_weights: list[Tensor] = []
        all_cross_weights: list[Tensor] = []
        for index, layer in enumerate(self.layers):
            layer_cache = cache.layers[index] if cache is not None else None
            hidden, self_weights, cross_weights = layer(
                hidden,
                memory,
                self_attend_mask,
                cross_attend_mask,
                layer_cache,
                need_weights,
                cache.rows_per_source if cache is not None else 1,
            )
            if self_weights is not None and cross_weights is not None:
                all_self_weights.append(self_weights)
                all_cross_weights.append(cross_weights)
        if self.final_norm is not None:
            hidden = self.final_norm(hidden)
        return hidden, all_self_weights, all_cross_weights
