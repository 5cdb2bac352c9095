"""The interface a search algorithm drives: one next-token distribution per row and step.

Greedy and beam search never call the Transformer directly. They talk to a :class:`StepModel`, which
keeps whatever state it needs per row (a hypothesis of a sentence) and answers "given the last token of
each row, what are the log-probabilities of the next one?". :class:`TransformerStepModel` implements it
for the real model, with or without the incremental-decoding cache; tests implement it with hand-set
probability tables to check the search against answers computed by hand (an oracle, as in fairseq).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from transformer.baselines.rnn import RNNEncoderDecoder
from transformer.baselines.rnn_step_model import RNNStepModel
from transformer.decoding.cache_rows import reorder_decoder_cache
from transformer.kernels.native_step import NativeDecoderStep
from transformer.model.decoder import DecoderCache
from transformer.model.masks import build_padding_mask
from transformer.model.special_tokens import SpecialTokenIds
from transformer.model.transformer import Transformer

StateT = TypeVar("StateT")


class StepModel(Protocol[StateT]):
    """What a search needs from a model: start, score the next token, follow re-ranked rows.

    Notes
    -----
    A *row* is one hypothesis: ``batch`` rows after :meth:`start`, ``batch * beam_size`` once beam search
    has duplicated them with :meth:`reorder`, fewer once finished sentences are dropped. The state is
    opaque to the search and may be mutated in place. ``pad_id``, ``bos_id`` and ``eos_id`` are the
    special token ids: the first input token is ``bos_id``, ``eos_id`` ends a hypothesis and ``pad_id``
    marks source padding.
    """

    @property
    def pad_id(self) -> int:
        """Id of the padding token.

        Returns
        -------
        int
            The id that right-pads ``src_tokens`` and fills unused output positions.

        Notes
        -----
        The search counts a source's length as its non-``pad_id`` tokens (for the length limit) and never
        outputs it: :func:`~transformer.decoding.search.forbid_tokens` sets its log-probability to ``-inf``.
        """
        ...

    @property
    def bos_id(self) -> int:
        """Id of the token fed at the first step.

        Returns
        -------
        int
            The first decoder input of every row.

        Notes
        -----
        It is also forbidden as an output, unless it equals ``eos_id`` (HuggingFace Marian uses one id
        for both), in which case it may end a hypothesis.
        """
        ...

    @property
    def eos_id(self) -> int:
        """Id of the token that ends a hypothesis.

        Returns
        -------
        int
            The end-of-sentence id.

        Notes
        -----
        Choosing it finishes a row: its log-probability is counted in the hypothesis's ``log_prob`` and
        the step in its length, but it is stripped from the output tokens. Forbidden until ``min_length``
        tokens have been generated.
        """
        ...

    def start(self, src_tokens: Tensor) -> StateT:
        """Prepare the decoding state of a batch of source sentences.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, each row ending with EOS and right-padded with ``pad_id``.

        Returns
        -------
        StateT
            State with one row per sentence and nothing decoded yet.

        Notes
        -----
        Called once per search, before any :meth:`log_probs`, so expensive per-source work (encoding the
        source) belongs here rather than in every step.
        """
        ...

    def log_probs(self, state: StateT, last_tokens: Tensor) -> Tensor:
        """Feed one token per row and return the next-token log-probabilities.

        Parameters
        ----------
        state : StateT
            The rows' state; updated in place to include ``last_tokens``.
        last_tokens : torch.Tensor, shape (rows,), int64
            The newest token of every row (``bos_id`` at the first step).

        Returns
        -------
        torch.Tensor, shape (rows, vocab_size), float32
            Log-probabilities of the token that follows ``last_tokens`` in each row.

        Notes
        -----
        The search may add ``-inf`` to forbid tokens; it never renormalises.
        """
        ...

    def reorder(self, state: StateT, row_indices: Tensor) -> None:
        """Keep, duplicate or permute rows of the state, in place.

        Parameters
        ----------
        state : StateT
            The rows' state.
        row_indices : torch.Tensor, shape (new_rows,), int64
            For each new row, the old row it continues.

        Returns
        -------
        None

        Notes
        -----
        Beam search calls it after every step (surviving beams, dropped sentences); greedy search only when
        a sentence finishes.
        """
        ...


@dataclass
class TransformerSearchState:
    """Per-row decoding state of a :class:`TransformerStepModel`.

    Parameters
    ----------
    cache : DecoderCache or None
        Cached self-attention keys/values and projected encoder output (incremental decoding); None when
        every step recomputes the whole prefix.
    memory : torch.Tensor or None, shape (rows, src_len, d_model)
        Encoder output; kept only without a cache (the cache holds its projections instead).
    src_padding_mask : torch.Tensor or None, shape (rows, src_len), bool
        True on source padding; kept only without a cache.
    tgt_prefix : torch.Tensor, shape (rows, decoded_len), int64
        Decoder input fed so far (``bos_id`` first); grown only without a cache.

    Notes
    -----
    Exactly one of ``cache`` and ``memory`` is set.
    """

    cache: DecoderCache | None
    memory: Tensor | None
    src_padding_mask: Tensor | None
    tgt_prefix: Tensor


class TransformerStepModel(SpecialTokenIds):
    """Adapt a :class:`~transformer.model.transformer.Transformer` to the :class:`StepModel` protocol.

    Parameters
    ----------
    model : Transformer
        The model; the caller puts it in eval mode (see :func:`inference_context`).
    use_cache : bool
        Feed one token per step and reuse cached keys/values (``DecodeConfig.use_cache``); False re-runs
        the decoder over the whole prefix every step (same tokens, quadratic cost).
    native_step : NativeDecoderStep or None
        With the cache, run each step through this C++ step of the same model
        (:func:`transformer.kernels.native_step.native_decoder_step`) instead of the Python decoder.

    Notes
    -----
    The source is encoded once in :meth:`start`; with the cache, the encoder output is also projected to
    every layer's cross-attention keys/values once. Log-probabilities are a float32 ``log_softmax`` of the
    logits, whatever the model's dtype.
    """

    model: Transformer

    def __init__(
        self, model: Transformer, use_cache: bool = True, native_step: NativeDecoderStep | None = None
    ) -> None:
        self.model = model
        self.use_cache = use_cache
        self.native_step = native_step

    @property
    def max_output_length(self) -> int | None:
        """The most tokens a hypothesis may have: the learned position table's size, else no limit.

        Returns
        -------
        int or None
            ``model.config.max_positions`` with learned positions; None with sinusoidal ones or none.

        Notes
        -----
        Generating token k feeds the decoder k positions (the start token and k - 1 outputs), so a learned
        table of M rows allows M output tokens; the searches cap their length limits with it
        (:func:`~transformer.decoding.search.output_length_limits`) instead of failing mid-search.
        """
        config = self.model.config
        return config.max_positions if config.positional_encoding == "learned" else None

    def start(self, src_tokens: Tensor) -> TransformerSearchState:
        """Encode the source and prepare an empty decoder state.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, right-padded with ``pad_id``.

        Returns
        -------
        TransformerSearchState
            One row per sentence, nothing decoded yet.

        Notes
        -----
        With the cache, the encoder output itself is dropped after projecting it.
        """
        tgt_prefix = src_tokens.new_empty((src_tokens.size(0), 0))  # (batch, 0)
        if self.use_cache and self.native_step is not None:
            _, cache = self.native_step.encode(src_tokens)  # the same bits, one C++ call
            return TransformerSearchState(cache, None, None, tgt_prefix)
        memory = self.model.encode(src_tokens)  # (batch, src_len, d_model)
        src_padding_mask = build_padding_mask(src_tokens, self.pad_id)  # (batch, src_len)
        if self.use_cache:
            cache = self.model.init_decoder_cache(memory, src_padding_mask)
            return TransformerSearchState(cache, None, None, tgt_prefix)
        return TransformerSearchState(None, memory, src_padding_mask, tgt_prefix)

    def log_probs(self, state: TransformerSearchState, last_tokens: Tensor) -> Tensor:
        """Run the decoder for one step and normalise its logits.

        Parameters
        ----------
        state : TransformerSearchState
            The rows' state; its cache (or prefix) is extended by ``last_tokens``.
        last_tokens : torch.Tensor, shape (rows,), int64
            Newest token of every row.

        Returns
        -------
        torch.Tensor, shape (rows, tgt_vocab_size), float32
            Next-token log-probabilities.

        Notes
        -----
        Without a cache, the decoder sees the whole prefix and only the last position's logits are kept.
        """
        if state.cache is not None and self.native_step is not None:
            return self.native_step.log_probs(state.cache, last_tokens)
        if state.cache is not None:
            logits = self.model.decode(last_tokens[:, None], None, None, state.cache)  # (rows, 1, vocab)
        else:
            state.tgt_prefix = torch.cat([state.tgt_prefix, last_tokens[:, None]], dim=1)  # (rows, len)
            logits = self.model.decode(state.tgt_prefix, state.memory, state.src_padding_mask)
        return F.log_softmax(logits[:, -1], dim=-1, dtype=torch.float32)  # no separate upcast copy

    def reorder(self, state: TransformerSearchState, row_indices: Tensor) -> None:
        """Select rows of the cache, or of the encoder output and prefix.

        Parameters
        ----------
        state : TransformerSearchState
            The rows' state, changed in place.
        row_indices : torch.Tensor, shape (new_rows,), int64
            For each new row, the old row it continues.

        Returns
        -------
        None

        Notes
        -----
        With the cache, :func:`~transformer.decoding.cache_rows.reorder_decoder_cache` keeps the encoder
        keys/values once per sentence when the rows stay grouped by sentence, as beam search keeps them.
        Without it, the encoder output and mask are copied per row, which costs memory but no recomputation.
        """
        if state.cache is not None:
            reorder_decoder_cache(state.cache, row_indices)
        if state.memory is not None and state.src_padding_mask is not None:
            state.memory = state.memory.index_select(0, row_indices)
            state.src_padding_mask = state.src_padding_mask.index_select(0, row_indices)
        state.tgt_prefix = state.tgt_prefix.index_select(0, row_indices)


#: What every search entry point accepts: either architecture, or a step model (a test's oracle, an ensemble).
Decodable = Transformer | RNNEncoderDecoder | StepModel[Any]


def as_step_model(model_or_step_model: Decodable, use_cache: bool) -> StepModel[Any]:
    """Wrap a model in its step model; pass a step model through.

    Parameters
    ----------
    model_or_step_model : Transformer, RNNEncoderDecoder or StepModel
        What the search should decode with.
    use_cache : bool
        Whether a wrapped model decodes incrementally; ignored for a step model.

    Returns
    -------
    StepModel
        The step model to drive.

    Notes
    -----
    Lets every search entry point accept the model itself (a Transformer or the recurrent baseline, whose
    adapters this package builds) or any step model, such as a test's oracle or an ensemble.
    """
    if isinstance(model_or_step_model, Transformer):
        return TransformerStepModel(model_or_step_model, use_cache)
    if isinstance(model_or_step_model, RNNEncoderDecoder):
        return RNNStepModel(model_or_step_model, use_cache)
    return model_or_step_model


@contextmanager
def inference_context(step_model: StepModel[Any]) -> Iterator[None]:
    """Run a search in eval mode under ``torch.inference_mode``, then restore training flags.

    Parameters
    ----------
    step_model : StepModel
        The step model; when it wraps a model (its ``model`` attribute is a module), that model is switched
        to eval mode.

    Returns
    -------
    Iterator[None]
        A context manager.

    Notes
    -----
    Each submodule's own ``training`` flag is restored afterwards (not one flag for all), so a model that
    was partly in eval mode comes back exactly as it was. Eval mode turns dropout off, which makes the
    search deterministic. A model already in eval mode (a translator's) is left untouched: switching and
    restoring every module's flag cost about 2 ms a search, a sixth of a one-sentence translation.
    """
    wrapped = getattr(step_model, "model", None)
    model = wrapped if isinstance(wrapped, nn.Module) else None
    training_modules = [module for module in model.modules() if module.training] if model is not None else []
    if model is not None and training_modules:
        model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        for module in training_modules:
            module.training = True
