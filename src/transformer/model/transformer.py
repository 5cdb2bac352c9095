"""The encoder-decoder Transformer of figure 1: embeddings, encoder, decoder and the pre-softmax projection."""

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from transformer.model.config import TransformerConfig
from transformer.model.decoder import Decoder, DecoderCache
from transformer.model.dropout import Dropout
from transformer.model.embeddings import TokenEmbedding
from transformer.model.encoder import Encoder
from transformer.model.masks import (
    build_causal_mask,
    build_padding_mask,
    build_window_mask,
    combine_attend_masks,
    padding_to_attend_mask,
)
from transformer.model.multihead_attention import MultiHeadAttention
from transformer.model.positional_encoding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding


@dataclass
class AttentionWeights:
    """Attention probabilities of every layer and head, for inspection and plots.

    Parameters
    ----------
    encoder_self : list of torch.Tensor
        Per encoder layer, shape (batch, num_heads, src_len, src_len).
    decoder_self : list of torch.Tensor
        Per decoder layer, shape (batch, num_heads, tgt_len, tgt_len).
    cross : list of torch.Tensor
        Per decoder layer, shape (batch, num_heads, tgt_len, src_len).

    Notes
    -----
    Rows are queries, columns keys; each row sums to one over the allowed keys in eval mode (attention
    dropout, when configured, rescales the weights in training mode).
    """

    encoder_self: list[Tensor] = field(default_factory=list)
    decoder_self: list[Tensor] = field(default_factory=list)
    cross: list[Tensor] = field(default_factory=list)


class Transformer(nn.Module):
    """The Transformer of Vaswani et al. (2017) for sequence-to-sequence tasks.

    Parameters
    ----------
    config : TransformerConfig
        Model hyper-parameters (see ``TransformerConfig.base``, ``.big``, ``.table2``).

    Notes
    -----
    Padding masks come from ``config.pad_id``; the causal mask is built inside. Source and target
    embeddings share one matrix when ``config.share_embeddings`` and the target embedding doubles as the
    pre-softmax projection when ``config.tie_output_projection`` (section 3.4). Projections are initialised
    Xavier-uniform with zero biases; embeddings from N(0, d_model^-1/2).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.src_embedding = TokenEmbedding(
            vocab_size=config.src_vocab_size,
            d_model=config.d_model,
            pad_id=config.pad_id,
            scale=config.scale_embeddings,
        )
        self.tgt_embedding = (
            self.src_embedding
            if config.share_embeddings
            else TokenEmbedding(
                vocab_size=config.tgt_vocab_size,
                d_model=config.d_model,
                pad_id=config.pad_id,
                scale=config.scale_embeddings,
            )
        )
        # None for positional_encoding "none": the embeddings alone, no position information at all.
        self.positional_encoding: SinusoidalPositionalEncoding | LearnedPositionalEmbedding | None
        if config.positional_encoding == "learned":
            self.positional_encoding = LearnedPositionalEmbedding(
                d_model=config.d_model, max_positions=config.max_positions
            )
        elif config.positional_encoding == "sinusoidal":
            self.positional_encoding = SinusoidalPositionalEncoding(
                d_model=config.d_model, layout=config.sinusoidal_layout
            )
        else:
            self.positional_encoding = None
        self.embedding_dropout = Dropout(config.dropout)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.output_projection = (
            None
            if config.tie_output_projection
            else nn.Linear(config.d_model, config.tgt_vocab_size, bias=False)
        )
        self.output_bias: Tensor | None
        if config.output_bias:
            # A buffer, as Marian's final_logits_bias: loaded from checkpoints, not trained.
            self.register_buffer("output_bias", torch.zeros(config.tgt_vocab_size))
        else:
            self.output_bias = None
        self._init_projections()

    def _init_projections(self) -> None:
        for module in (self.encoder, self.decoder):
            for submodule in module.modules():
                if isinstance(submodule, nn.Linear):
                    nn.init.xavier_uniform_(submodule.weight)
                    if submodule.bias is not None:
                        nn.init.zeros_(submodule.bias)
        if self.output_projection is not None:
            nn.init.normal_(self.output_projection.weight, std=self.config.d_model**-0.5)

    def set_explicit_attention_max_length(self, length: int) -> None:
        """Set the length up to which ``attention_implementation: auto`` uses the explicit formula.

        Parameters
        ----------
        length : int
            Longest query or key length computed with explicit matrix products; longer ones use the fused
            kernel (0: always fused).

        Returns
        -------
        None

        Notes
        -----
        Where the two paths cross depends on the machine (CPU kind, GPU, precision), so it is a runtime
        setting measured by ``transformer.autotune.attention_probe``, not part of the config saved with the
        model. It has no effect with ``attention_implementation`` "fused" or "explicit".
        """
        if length < 0:
            raise ValueError(f"explicit attention max length {length} must be non-negative")
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):
                module.explicit_max_length = length

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Count the model's parameters, shared matrices once.

        Parameters
        ----------
        trainable_only : bool
            Count only parameters with ``requires_grad``.

        Returns
        -------
        int
            Number of scalar parameters.

        Notes
        -----
        Base with a 37,000-token shared, tied vocabulary: 63,082,496 (the paper reports 65M);
        big: 214,245,376 (the paper reports 213M).
        """
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    def embed(self, tokens: Tensor, embedding: TokenEmbedding, offset: int = 0) -> Tensor:
        """Embed tokens, add positional encodings and apply dropout (section 3.4, 3.5, 5.4).

        Parameters
        ----------
        tokens : torch.Tensor, shape (batch, seq_len), int64
            Token ids.
        embedding : TokenEmbedding
            The source or target embedding.
        offset : int
            Position of the first token (non-zero during incremental decoding).

        Returns
        -------
        torch.Tensor, shape (batch, seq_len, d_model)
            Input of the encoder or decoder stack.

        Notes
        -----
        Section 5.4: dropout is applied "to the sums of the embeddings and the positional encodings". With
        ``positional_encoding="none"`` nothing is added (``offset`` is then unused): a token gets the same
        vector wherever it stands, so the encoder cannot tell word orders apart (it is permutation-equivariant).
        """
        embedded = embedding(tokens)
        if self.positional_encoding is None:
            return self.embedding_dropout(embedded)
        positions = self.positional_encoding(tokens.size(1), offset)  # (seq_len, d_model)
        return self.embedding_dropout(embedded + positions.to(embedded.dtype))

    def encode(self, src_tokens: Tensor) -> Tensor:
        """Encode source sentences.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, right-padded with ``pad_id``.

        Returns
        -------
        torch.Tensor, shape (batch, src_len, d_model)
            The encoder output ("memory") that :meth:`decode` attends to.

        Notes
        -----
        The memory carries no mask of its own: pass ``build_padding_mask(src_tokens, config.pad_id)`` to
        :meth:`decode` with it, or the decoder attends to the padding positions' meaningless outputs too.
        """
        memory, _ = self._encode(src_tokens, need_weights=False)
        return memory

    def _encode(self, src_tokens: Tensor, need_weights: bool) -> tuple[Tensor, list[Tensor]]:
        src_padding_mask = build_padding_mask(src_tokens, self.config.pad_id)
        attend_mask: Tensor | None = padding_to_attend_mask(src_padding_mask)  # (batch, 1, 1, src_len)
        if self.config.attention_window is not None:
            src_len = src_tokens.size(1)
            window = build_window_mask(
                src_len, src_len, self.config.attention_window, causal=False, device=src_tokens.device
            )
            attend_mask = combine_attend_masks(attend_mask, window)
        hidden = self.embed(src_tokens, self.src_embedding)
        return self.encoder(hidden, attend_mask, need_weights)

    def init_decoder_cache(self, memory: Tensor, src_padding_mask: Tensor) -> DecoderCache:
        """Prepare incremental decoding: project the encoder output once per layer.

        Parameters
        ----------
        memory : torch.Tensor, shape (batch, src_len, d_model)
            Output of :meth:`encode`.
        src_padding_mask : torch.Tensor, shape (batch, src_len), bool
            True on source padding.

        Returns
        -------
        DecoderCache
            State to pass to :meth:`decode` at every step.

        Notes
        -----
        Cross-attention keys and values depend on the source only, so projecting them here once spares every
        step re-projecting the whole source in every layer; the self-attention part starts empty. Searches
        rearrange its rows with :func:`transformer.decoding.cache_rows.reorder_decoder_cache` when beams are
        re-ranked.
        """
        return self.decoder.init_cache(memory, padding_to_attend_mask(src_padding_mask))

    def decode(
        self,
        tgt_tokens: Tensor,
        memory: Tensor | None,
        src_padding_mask: Tensor | None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """Predict the next token at every target position.

        Parameters
        ----------
        tgt_tokens : torch.Tensor, shape (batch, tgt_len), int64
            Decoder input: ``bos_id`` followed by the target prefix. With ``cache``, only the new tokens.
        memory : torch.Tensor or None, shape (batch, src_len, d_model)
            Encoder output; may be None when ``cache`` is given.
        src_padding_mask : torch.Tensor or None, shape (batch, src_len), bool
            True on source padding; may be None when ``cache`` is given.
        cache : DecoderCache or None
            Incremental state from :meth:`init_decoder_cache`, updated in place.

        Returns
        -------
        torch.Tensor, shape (batch, tgt_len, tgt_vocab_size)
            Unnormalised next-token scores (logits).

        Notes
        -----
        Cached and uncached decoding give the same logits (tested). With a cache, ``tgt_tokens`` are placed
        at positions from ``cache.decoded_len`` on and appended to the cached keys/values, so feed only the
        tokens not fed before: re-feeding the prefix would shift every position.
        """
        logits, _, _ = self._decode(tgt_tokens, memory, src_padding_mask, cache, need_weights=False)
        return logits

    def decode_hidden(
        self,
        tgt_tokens: Tensor,
        memory: Tensor | None,
        src_padding_mask: Tensor | None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """Run the decoder stack without the output projection: what :meth:`decode` projects.

        Parameters
        ----------
        tgt_tokens : torch.Tensor, shape (batch, tgt_len), int64
            Decoder input, as for :meth:`decode`.
        memory : torch.Tensor or None, shape (batch, src_len, d_model)
            Encoder output; may be None when ``cache`` is given.
        src_padding_mask : torch.Tensor or None, shape (batch, src_len), bool
            True on source padding; may be None when ``cache`` is given.
        cache : DecoderCache or None
            Incremental state, updated in place as by :meth:`decode`.

        Returns
        -------
        torch.Tensor, shape (batch, tgt_len, d_model)
            Final decoder states; ``project_output`` of them equals :meth:`decode`'s logits.

        Notes
        -----
        For a vocabulary shortlist (:mod:`transformer.decoding.shortlist`), which projects onto a few rows
        of the output matrix instead of all of them.
        """
        hidden, _, _ = self._decode_hidden(tgt_tokens, memory, src_padding_mask, cache, need_weights=False)
        return hidden

    def _decode(
        self,
        tgt_tokens: Tensor,
        memory: Tensor | None,
        src_padding_mask: Tensor | None,
        cache: DecoderCache | None,
        need_weights: bool,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        hidden, self_weights, cross_weights = self._decode_hidden(
            tgt_tokens, memory, src_padding_mask, cache, need_weights
        )
        return self.project_output(hidden), self_weights, cross_weights

    def _decode_hidden(
        self,
        tgt_tokens: Tensor,
        memory: Tensor | None,
        src_padding_mask: Tensor | None,
        cache: DecoderCache | None,
        need_weights: bool,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        offset = cache.decoded_len if cache is not None else 0
        new_len = tgt_tokens.size(1)
        key_len = offset + new_len
        device = tgt_tokens.device
        self_mask: Tensor | None
        if self.config.attention_window is not None:
            self_mask = build_window_mask(new_len, key_len, self.config.attention_window, True, device)
        elif new_len == 1:
            self_mask = None  # the newest position may see every earlier one: nothing to mask
        else:
            self_mask = build_causal_mask(new_len, key_len, device=device)
        if cache is not None:
            cross_mask = cache.cross_attend_mask
        elif src_padding_mask is not None:
            cross_mask = padding_to_attend_mask(src_padding_mask)
        else:
            cross_mask = None
        hidden = self.embed(tgt_tokens, self.tgt_embedding, offset)
        hidden, self_weights, cross_weights = self.decoder(
            hidden, memory, self_mask, cross_mask, cache, need_weights
        )
        if cache is not None:
            cache.decoded_len = key_len
        return hidden, self_weights, cross_weights

    def project_output(self, hidden: Tensor) -> Tensor:
        """Map decoder states to vocabulary scores (the pre-softmax linear transformation).

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, tgt_len, d_model)
            Decoder output.

        Returns
        -------
        torch.Tensor, shape (batch, tgt_len, tgt_vocab_size)
            Logits.

        Notes
        -----
        Uses the target embedding matrix when ``tie_output_projection`` (section 3.4); adds ``output_bias``
        when the config asks for one (converted Marian models).
        """
        if self.output_projection is not None:
            logits = self.output_projection(hidden)
        else:
            logits = F.linear(hidden, self.tgt_embedding.weight.to(hidden.dtype))
        return logits if self.output_bias is None else logits + self.output_bias.to(logits.dtype)

    def forward(self, src_tokens: Tensor, tgt_tokens: Tensor) -> Tensor:
        """Score every target position given the source (teacher forcing).

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, right-padded with ``pad_id``.
        tgt_tokens : torch.Tensor, shape (batch, tgt_len), int64
            Decoder input: ``bos_id`` then the target tokens, right-padded.

        Returns
        -------
        torch.Tensor, shape (batch, tgt_len, tgt_vocab_size)
            Logits; position t predicts target token t + 1 of the input.

        Notes
        -----
        No information flows from target positions > t to the logits at t (tested). Section 3.1: the
        decoder's self-attention is masked, and with the output embeddings offset by one position this
        "ensures that the predictions for position i can depend only on the known outputs at positions less
        than i". One call thus trains every position of a sentence at once.
        """
        memory = self.encode(src_tokens)
        return self.decode(tgt_tokens, memory, build_padding_mask(src_tokens, self.config.pad_id))

    def forward_with_attention(
        self, src_tokens: Tensor, tgt_tokens: Tensor
    ) -> tuple[Tensor, AttentionWeights]:
        """Like :meth:`forward`, also returning every attention map.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids.
        tgt_tokens : torch.Tensor, shape (batch, tgt_len), int64
            Decoder input.

        Returns
        -------
        logits : torch.Tensor, shape (batch, tgt_len, tgt_vocab_size)
            Same as :meth:`forward`.
        attention : AttentionWeights
            Encoder self-, decoder self- and cross-attention weights of every layer and head.

        Notes
        -----
        Uses the explicit attention formula, so it is slower and uses quadratic memory: for inspection only.
        """
        memory, encoder_weights = self._encode(src_tokens, need_weights=True)
        src_padding_mask = build_padding_mask(src_tokens, self.config.pad_id)
        logits, self_weights, cross_weights = self._decode(
            tgt_tokens, memory, src_padding_mask, None, need_weights=True
        )
        return logits, AttentionWeights(encoder_weights, self_weights, cross_weights)
