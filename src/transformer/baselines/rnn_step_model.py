"""The recurrent model's adapter to the searches (the step-model protocol of ``transformer.decoding``).

Greedy search, beam search, n-best lists and the Translator drive any model through ``start``, ``log_probs``
and ``reorder``. :class:`RNNStepModel` answers them for :class:`~transformer.baselines.rnn.RNNEncoderDecoder`:
the source is encoded once, and each step feeds one token per row and carries the LSTM states and h~ (or,
without the cache, re-runs the decoder over the row's whole prefix).
"""

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional as F

from transformer.baselines.rnn import RNNDecoderState, RNNEncoderDecoder, RNNEncoding
from transformer.model.special_tokens import SpecialTokenIds


@dataclass
class RNNSearchState:
    """Per-row decoding state of an :class:`RNNStepModel`.

    Parameters
    ----------
    encoding : RNNEncoding
        Every row's encoder outputs, attention keys and source padding mask.
    initial : RNNDecoderState
        Every row's decoder state before the first token (the bridged encoder states, h~_0 = 0).
    current : RNNDecoderState or None
        With the cache, the state after the tokens fed so far; None without it.
    tgt_prefix : torch.Tensor, shape (rows, decoded_len), int64
        Decoder input fed so far (the start token first); grown only without the cache.

    Notes
    -----
    Without the cache ``initial`` is where every step's re-run of the prefix starts; with it ``initial`` is
    kept only so that both modes reorder the same fields and stay comparable.
    """

    encoding: RNNEncoding
    initial: RNNDecoderState
    current: RNNDecoderState | None
    tgt_prefix: Tensor


class RNNStepModel(SpecialTokenIds):
    """Adapt an :class:`~transformer.baselines.rnn.RNNEncoderDecoder` to the step-model protocol.

    Parameters
    ----------
    model : RNNEncoderDecoder
        The model; the search puts it in eval mode (``transformer.decoding.step_model.inference_context``).
    use_cache : bool
        Feed one token per step and carry the recurrent state (``DecodeConfig.use_cache``); False re-runs
        the decoder over the whole prefix every step (the same tokens and scores, quadratic cost).

    Notes
    -----
    Satisfies ``transformer.decoding.step_model.StepModel`` structurally: this package may not import the
    decoding package, which sits above it. Log-probabilities are a float32 ``log_softmax`` of the logits,
    whatever the model's dtype, as for the Transformer.
    """

    model: RNNEncoderDecoder

    def __init__(self, model: RNNEncoderDecoder, use_cache: bool = True) -> None:
        self.model = model
        self.use_cache = use_cache

    @property
    def max_output_length(self) -> int | None:
        """The most tokens a hypothesis may have: no limit.

        Returns
        -------
        None
            A recurrent decoder has no position table to run out of.

        Notes
        -----
        The searches cap their length limits with this (a Transformer with learned positions returns its
        table's size); here the source length plus the offset alone decides.
        """
        return None

    def start(self, src_tokens: Tensor) -> RNNSearchState:
        """Encode the source and prepare an empty decoder state.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, right-padded with ``pad_id``.

        Returns
        -------
        RNNSearchState
            One row per sentence, nothing decoded yet.

        Notes
        -----
        The encoder and the attention keys run once here, not at every step.
        """
        encoding, initial = self.model.encode(src_tokens)
        tgt_prefix = src_tokens.new_empty((src_tokens.size(0), 0))
        return RNNSearchState(encoding, initial, initial if self.use_cache else None, tgt_prefix)

    def log_probs(self, state: RNNSearchState, last_tokens: Tensor) -> Tensor:
        """Run the decoder for one step and normalise its logits.

        Parameters
        ----------
        state : RNNSearchState
            The rows' state; its recurrent state (or prefix) is extended by ``last_tokens``.
        last_tokens : torch.Tensor, shape (rows,), int64
            Newest token of every row.

        Returns
        -------
        torch.Tensor, shape (rows, tgt_vocab_size), float32
            Next-token log-probabilities.

        Notes
        -----
        Without the cache the decoder re-runs from ``initial`` over the whole prefix and only the last
        position's logits are kept: the check that carrying the state changes nothing.
        """
        if state.current is not None:
            logits, _, state.current = self.model.decode(last_tokens[:, None], state.encoding, state.current)
        else:
            state.tgt_prefix = torch.cat([state.tgt_prefix, last_tokens[:, None]], dim=1)  # (rows, len)
            logits, _, _ = self.model.decode(state.tgt_prefix, state.encoding, state.initial)
        return F.log_softmax(logits[:, -1], dim=-1, dtype=torch.float32)

    def reorder(self, state: RNNSearchState, row_indices: Tensor) -> None:
        """Select rows of every per-row tensor of the state, in place.

        Parameters
        ----------
        state : RNNSearchState
            The rows' state, changed in place.
        row_indices : torch.Tensor, shape (new_rows,), int64
            For each new row, the old row it continues.

        Returns
        -------
        None

        Notes
        -----
        The encoder outputs are copied per row (beams of one sentence hold equal copies); with the small
        widths of a recurrent model this costs less than the Transformer's per-layer keys and values would.
        """
        state.encoding = state.encoding.select_rows(row_indices)
        state.initial = state.initial.select_rows(row_indices)
        if state.current is not None:
            state.current = state.current.select_rows(row_indices)
        state.tgt_prefix = state.tgt_prefix.index_select(0, row_indices)
