"""The attentional LSTM encoder-decoder the Transformer replaced: the recurrent baseline of the comparison.

A bidirectional LSTM reads the source; a linear bridge turns its final states into the decoder's initial
states; an LSTM decoder with global attention (:class:`~transformer.baselines.rnn_attention.GlobalAttention`)
and input feeding (Luong et al., 2015) predicts the target. The model has the Transformer's interface where
the package relies on it: ``forward(src_tokens, tgt_input)`` returns logits, ``config`` carries the vocabulary
and special ids, and ``num_parameters()`` counts. The searches drive it through
:class:`~transformer.baselines.rnn_step_model.RNNStepModel`, which imports this module (never the reverse).
"""

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from transformer.baselines.rnn_attention import GlobalAttention
from transformer.baselines.rnn_config import RNNConfig

#: Every parameter starts uniform in [-0.1, 0.1], as in Luong et al. (2015), section 4.1.
INIT_RANGE = 0.1


@dataclass
class RNNEncoding:
    """What the decoder reads of a batch of source sentences, one row per decoder row.

    Parameters
    ----------
    memory : torch.Tensor, shape (rows, src_len, hidden_size)
        Encoder outputs h̄_s: the two directions' states concatenated (zeros at padding).
    keys : torch.Tensor, shape (rows, src_len, hidden_size)
        The source side of the attention scores (``GlobalAttention.prepare_keys``).
    src_padding_mask : torch.Tensor, shape (rows, src_len), bool
        True on source padding.

    Notes
    -----
    Beam search duplicates rows: :meth:`select_rows` copies the encoder outputs per beam, which the LSTM's
    small memory (one vector per source position) makes affordable, unlike the Transformer's per-layer keys.
    """

    memory: Tensor
    keys: Tensor
    src_padding_mask: Tensor

    def select_rows(self, row_indices: Tensor) -> "RNNEncoding":
        """Keep, duplicate or permute rows.

        Parameters
        ----------
        row_indices : torch.Tensor, shape (new_rows,), int64
            For each new row, the old row it continues.

        Returns
        -------
        RNNEncoding
            A new encoding with ``new_rows`` rows.

        Notes
        -----
        ``index_select`` copies, so the old encoding stays valid: the uncached search keeps its initial
        decoder state beside the encoding and reorders both with the same indices.
        """
        return RNNEncoding(
            self.memory.index_select(0, row_indices),
            self.keys.index_select(0, row_indices),
            self.src_padding_mask.index_select(0, row_indices),
        )


@dataclass
class RNNDecoderState:
    """The recurrent state the decoder carries from one target position to the next.

    Parameters
    ----------
    hidden : torch.Tensor, shape (num_decoder_layers, rows, hidden_size)
        LSTM hidden states h of every layer.
    cell : torch.Tensor, shape (num_decoder_layers, rows, hidden_size)
        LSTM cell states c of every layer.
    feed : torch.Tensor, shape (rows, hidden_size)
        The attentional hidden state h~ of the previous step, zeros before the first (input feeding; unused
        without it).

    Notes
    -----
    This is the whole of an LSTM decoder's "cache": unlike the Transformer's, it does not grow with the
    decoded length, which is why recurrent decoding costs the same per step however long the output.
    """

    hidden: Tensor
    cell: Tensor
    feed: Tensor

    def select_rows(self, row_indices: Tensor) -> "RNNDecoderState":
        """Keep, duplicate or permute rows.

        Parameters
        ----------
        row_indices : torch.Tensor, shape (new_rows,), int64
            For each new row, the old row it continues.

        Returns
        -------
        RNNDecoderState
            A new state with ``new_rows`` rows.

        Notes
        -----
        Rows are the second dimension of ``hidden`` and ``cell`` (PyTorch's LSTM puts layers first) and the
        first of ``feed``; selecting along the wrong one would mix layers silently when the counts agree.
        """
        return RNNDecoderState(
            self.hidden.index_select(1, row_indices),
            self.cell.index_select(1, row_indices),
            self.feed.index_select(0, row_indices),
        )


class RNNEncoderDecoder(nn.Module):
    """Bidirectional LSTM encoder, LSTM decoder with global attention and input feeding.

    Parameters
    ----------
    config : RNNConfig
        Model hyper-parameters.

    Notes
    -----
    Encoder: embeddings (dropout) into a ``num_encoder_layers``-layer bidirectional LSTM of
    ``hidden_size // 2`` units per direction, run on packed sequences so the backward direction starts at each
    sentence's last real token; h̄_s = [→h_s; ←h_s]. Bridge (the choice of this implementation): the top
    encoder layer's final forward state and final backward state, concatenated, x = [→h_n; ←h_1], give every
    decoder layer l its initial state h_0^l = tanh(W_h^l x + b_h^l) and c_0^l = W_c^l x + b_c^l (two linear
    layers, ``bridge_hidden`` and ``bridge_cell``, with ``num_decoder_layers * hidden_size`` outputs; the
    cell state is unbounded, so no tanh there), which works for any pair of layer counts. Decoder: at step t
    the LSTM reads [embedding(y_{t-1}); h~_{t-1}] (input feeding, Luong et al. 2015 section 3.3; h~_0 = 0),
    its top state h_t attends over the h̄_s, h~_t = tanh(W_c [c_t; h_t]) (eq. 5), and p(y_t | y_<t, x) =
    softmax(W_s h~_t) (eq. 6), W_s tied to the target embedding when ``tie_output_projection``. Dropout
    applies to the embeddings, between stacked LSTM layers and to h~_t (the dropped h~_t is also what is fed
    back, as in OpenNMT). Parameters are initialised uniformly in [-0.1, 0.1] (Luong et al., section 4.1),
    the padding embedding to 0.
    """

    def __init__(self, config: RNNConfig) -> None:
        super().__init__()
        self.config = config
        hidden_size = config.hidden_size
        self.src_embedding = nn.Embedding(
            config.src_vocab_size, config.embedding_dim, padding_idx=config.pad_id
        )
        self.tgt_embedding = (
            self.src_embedding
            if config.share_embeddings
            else nn.Embedding(config.tgt_vocab_size, config.embedding_dim, padding_idx=config.pad_id)
        )
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = nn.LSTM(
            config.embedding_dim,
            hidden_size // 2,
            num_layers=config.num_encoder_layers,
            dropout=config.dropout if config.num_encoder_layers > 1 else 0.0,
            batch_first=True,
            bidirectional=True,
        )
        decoder_layers = config.num_decoder_layers
        self.bridge_hidden = nn.Linear(hidden_size, decoder_layers * hidden_size)
        self.bridge_cell = nn.Linear(hidden_size, decoder_layers * hidden_size)
        self.decoder = nn.LSTM(
            config.embedding_dim + (hidden_size if config.input_feeding else 0),
            hidden_size,
            num_layers=decoder_layers,
            dropout=config.dropout if decoder_layers > 1 else 0.0,
            batch_first=True,
        )
        self.attention = GlobalAttention(hidden_size, config.attention)
        self.output_projection = (
            None
            if config.tie_output_projection
            else nn.Linear(hidden_size, config.tgt_vocab_size, bias=False)
        )
        self._init_parameters()

    def _init_parameters(self) -> None:
        for parameter in self.parameters():
            nn.init.uniform_(parameter, -INIT_RANGE, INIT_RANGE)
        embeddings = (
            [self.src_embedding]
            if self.tgt_embedding is self.src_embedding
            else [self.src_embedding, self.tgt_embedding]
        )
        with torch.no_grad():
            for embedding in embeddings:
                embedding.weight[self.config.pad_id].zero_()

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
        The same count as ``Transformer.num_parameters``: ``nn.Module.parameters`` yields a shared embedding
        once, so a joint, tied vocabulary is counted once, and models of the two architectures compare.
        """
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    def encode(self, src_tokens: Tensor) -> tuple[RNNEncoding, RNNDecoderState]:
        """Encode source sentences and bridge the encoder's final states to the decoder's initial state.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, right-padded with ``pad_id``.

        Returns
        -------
        encoding : RNNEncoding
            Encoder outputs, attention keys and the padding mask.
        state : RNNDecoderState
            The decoder's initial state: bridged LSTM states and a zero h~_0.

        Notes
        -----
        The source is packed by length, so padding changes neither the outputs at real positions nor the
        final states: a sentence encodes the same alone or in any batch (up to float rounding).
        """
        config = self.config
        src_padding_mask = src_tokens.eq(config.pad_id)
        lengths = (~src_padding_mask).sum(dim=1).clamp(min=1).cpu()
        embedded = self.dropout(self.src_embedding(src_tokens))  # (batch, src_len, embedding_dim)
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        outputs, (final_hidden, _) = self.encoder(packed)
        memory, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src_tokens.size(1))
        # final_hidden: (num_encoder_layers * 2, batch, hidden_size // 2), the top layer's directions last.
        top = torch.cat([final_hidden[-2], final_hidden[-1]], dim=-1)  # (batch, hidden_size)
        batch = src_tokens.size(0)
        layers, hidden_size = config.num_decoder_layers, config.hidden_size
        # Row-major (batch, layers, hidden) -> layers first, as nn.LSTM wants its states.
        hidden = torch.tanh(self.bridge_hidden(top)).view(batch, layers, hidden_size).transpose(0, 1)
        cell = self.bridge_cell(top).view(batch, layers, hidden_size).transpose(0, 1)
        feed = memory.new_zeros(batch, hidden_size)
        encoding = RNNEncoding(memory, self.attention.prepare_keys(memory), src_padding_mask)
        return encoding, RNNDecoderState(hidden.contiguous(), cell.contiguous(), feed)

    def decode(
        self, tgt_tokens: Tensor, encoding: RNNEncoding, state: RNNDecoderState
    ) -> tuple[Tensor, Tensor, RNNDecoderState]:
        """Run the decoder over target tokens from a given state: teacher forcing, or one search step.

        Parameters
        ----------
        tgt_tokens : torch.Tensor, shape (rows, tgt_len), int64
            Decoder input: the start token and the target prefix, or only the newest token of each row when
            continuing from the state a previous call returned.
        encoding : RNNEncoding
            The rows' encoder outputs.
        state : RNNDecoderState
            The state before the first of ``tgt_tokens``: :meth:`encode`'s, or a previous call's.

        Returns
        -------
        logits : torch.Tensor, shape (rows, tgt_len, tgt_vocab_size)
            Next-token scores at every position.
        attention : torch.Tensor, shape (rows, tgt_len, src_len), float32
            The attention weights a_t(s) of every position.
        state : RNNDecoderState
            The state after the last of ``tgt_tokens`` (a new object; ``state`` is not changed).

        Notes
        -----
        Feeding a prefix token by token, passing each call's state to the next, gives the logits of feeding
        it at once (tested): that is the incremental decoding of the searches. With input feeding every
        position waits for the previous h~, so the decoder runs one step at a time; without it the LSTM runs
        over the whole target in one call and attention handles every position at once.
        """
        embedded = self.dropout(self.tgt_embedding(tgt_tokens))  # (rows, tgt_len, embedding_dim)
        lstm_state = (state.hidden, state.cell)
        if not self.config.input_feeding:
            outputs, lstm_state = self.decoder(embedded, lstm_state)
            attentional, weights = self.attention(
                outputs, encoding.keys, encoding.memory, encoding.src_padding_mask
            )
            attentional = self.dropout(attentional)
            feed = attentional[:, -1]
        else:
            feed = state.feed
            steps, step_weights = [], []
            for position in range(tgt_tokens.size(1)):
                step_input = torch.cat([embedded[:, position], feed.to(embedded.dtype)], dim=-1)[:, None]
                output, lstm_state = self.decoder(step_input, lstm_state)  # output: (rows, 1, hidden_size)
                step_attentional, step_weight = self.attention(
                    output, encoding.keys, encoding.memory, encoding.src_padding_mask
                )
                step_attentional = self.dropout(step_attentional)
                feed = step_attentional[:, 0]
                steps.append(step_attentional)
                step_weights.append(step_weight)
            attentional, weights = torch.cat(steps, dim=1), torch.cat(step_weights, dim=1)
        return self.project_output(attentional), weights, RNNDecoderState(*lstm_state, feed)

    def project_output(self, attentional: Tensor) -> Tensor:
        """Map attentional hidden states to vocabulary scores, p(y_t | y_<t, x) = softmax(W_s h~_t).

        Parameters
        ----------
        attentional : torch.Tensor, shape (rows, tgt_len, hidden_size)
            h~_t.

        Returns
        -------
        torch.Tensor, shape (rows, tgt_len, tgt_vocab_size)
            Logits.

        Notes
        -----
        Luong et al. (2015) eq. 6, without a bias. With ``tie_output_projection`` W_s is the target
        embedding matrix, as the Transformer ties its pre-softmax projection (its section 3.4), which saves
        ``tgt_vocab_size * hidden_size`` parameters.
        """
        if self.output_projection is not None:
            return self.output_projection(attentional)
        return F.linear(attentional, self.tgt_embedding.weight.to(attentional.dtype))

    def forward(self, src_tokens: Tensor, tgt_tokens: Tensor) -> Tensor:
        """Score every target position given the source (teacher forcing).

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, right-padded with ``pad_id``.
        tgt_tokens : torch.Tensor, shape (batch, tgt_len), int64
            Decoder input: the start token then the target tokens, right-padded.

        Returns
        -------
        torch.Tensor, shape (batch, tgt_len, tgt_vocab_size)
            Logits; position t predicts target token t + 1 of the input.

        Notes
        -----
        The Transformer's signature, so the trainer, validation and perplexity call either model the same
        way. Target padding comes after each sentence's last real token, so the recurrence reaches it only
        after every position that counts in the loss: no target mask is needed.
        """
        logits, _ = self.forward_with_attention(src_tokens, tgt_tokens)
        return logits

    def forward_with_attention(self, src_tokens: Tensor, tgt_tokens: Tensor) -> tuple[Tensor, Tensor]:
        """Like :meth:`forward`, also returning the attention weights.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, right-padded with ``pad_id``.
        tgt_tokens : torch.Tensor, shape (batch, tgt_len), int64
            Decoder input.

        Returns
        -------
        logits : torch.Tensor, shape (batch, tgt_len, tgt_vocab_size)
            Same as :meth:`forward`.
        attention : torch.Tensor, shape (batch, tgt_len, src_len), float32
            a_t(s) for every target position t and source position s; zero on source padding.

        Notes
        -----
        One alignment per target position (the model has one attention "head" and "layer"): the soft
        alignments Bahdanau et al. (2015) plot in their figure 3.
        """
        encoding, state = self.encode(src_tokens)
        logits, weights, _ = self.decode(tgt_tokens, encoding, state)
        return logits, weights
