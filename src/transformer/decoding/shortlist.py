"""Decode with a vocabulary shortlist: the output projection and softmax over a batch's candidate tokens only.

The pre-softmax projection (``d_model x vocab``) and the softmax over the whole vocabulary are the largest
single cost of a greedy step. With a :class:`~transformer.data.shortlist.Shortlist`, each sentence may only
output its own shortlist (its source pieces' candidates, the frequent pieces and the special tokens); a batch
gathers the rows of the output matrix for the union of its sentences' shortlists once, multiplies by those
alone at every step, and normalises each row over its own sentence's shortlist (a log-softmax over the
shortlist only, as Marian and CTranslate2 do). The searches see full-vocabulary log-probabilities, ``-inf``
outside the shortlist, so greedy, beam, sampling and the server's batch all get it through the one step-model
interface (:class:`ShortlistStepModel`). Greedy and beam search also take the union's columns alone
(:meth:`ShortlistStepModel.column_log_probs`): its per-step passes over the scores (the NaN check, the
constraints, the running sums, the row maximum) then cover the union instead of the vocabulary, with the same
tokens and scores, since every column outside the union is ``-inf``.

Normalising per sentence rather than over the batch's union makes a translation independent of the sentences
batched with it: offline at any batch size and in the server's continuous batch, a sentence is scored over
the same tokens.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from transformer.architectures import SequenceModel, architecture_of
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.data.shortlist import Shortlist, vocabulary_fingerprint
from transformer.decoding.step_model import TransformerSearchState, TransformerStepModel
from transformer.kernels.native_step import NativeDecoderStep
from transformer.model.quantization import Int8Linear
from transformer.model.transformer import Transformer


class RestrictedProjection:
    """A model's output projection restricted to the union of some sentences' shortlists.

    Parameters
    ----------
    model : Transformer
        The model (float32, bfloat16, or int8 from :func:`~transformer.model.quantization.quantize_for_inference`).
    sentence_tokens : list of torch.Tensor, each shape (num_tokens,), int64
        Each sentence's allowed target ids (:meth:`Shortlist.sentence_tokens`), sorted and distinct.

    Notes
    -----
    Built once per batch (offline) or whenever the server's batch changes sentences. Float weights are
    gathered with ``index_select``; an int8 projection is unpacked, its rows (int8 values, per-row scales)
    selected and packed again for the same kernel, so the restricted product is the int8 product of those
    rows. A oneDNN fp32 projection (:mod:`transformer.model.fp32_kernels`) keeps its dense weight, whose
    rows are multiplied with ``F.linear``. When the union is the whole vocabulary the model's own projection
    runs, so every logit and translation is the full vocabulary's exactly (tested), whatever the kernel.
    """

    def __init__(self, model: Transformer, sentence_tokens: list[Tensor]) -> None:
        device = model.tgt_embedding.weight.device
        union = torch.unique(torch.cat(sentence_tokens))  # (shortlist,), sorted
        self.vocab_size = model.config.tgt_vocab_size
        self.token_ids = union.to(device)
        members = torch.zeros((len(sentence_tokens), union.numel()), dtype=torch.bool)
        for sentence, tokens in enumerate(sentence_tokens):
            members[sentence, torch.searchsorted(union, tokens)] = True
        #: (sentences, shortlist) bool: True where the token is in that sentence's own shortlist.
        self.sentence_members = members.to(device)
        self._sentence_outside = ~self.sentence_members  # what each step masks, negated once per batch
        self.needs_mask = not bool(members.all())
        # The whole vocabulary: the model's own projection (its kernel, its int8 or oneDNN packing) is exact.
        self.model = model if union.numel() == self.vocab_size else None
        self.bias: Tensor | None = None
        self.int8_weight: tuple[Any, bool] | None = None  # (packed rows, reduce_range)
        self.weight: Tensor | None = None
        if self.model is not None:
            return
        bias = model.output_bias
        self.bias = None if bias is None else bias.index_select(0, self.token_ids)
        projection = model.output_projection
        if isinstance(projection, Int8Linear):
            self.int8_weight = (projection.pack_rows(union), projection.reduce_range)
        else:
            weight = projection.weight if projection is not None else model.tgt_embedding.weight
            self.weight = weight.index_select(0, self.token_ids)  # (shortlist, d_model)

    @property
    def size(self) -> int:
        """Tokens the restricted projection scores.

        Returns
        -------
        int
            The union's size: the width of every step's product.

        Notes
        -----
        What the shortlist saves is ``1 - size / vocab_size`` of the projection's work.
        """
        return int(self.token_ids.numel())

    def log_probs(self, hidden: Tensor, row_sentences: Tensor) -> Tensor:
        """Project decoder states onto the shortlist and normalise each row over its sentence's tokens.

        Parameters
        ----------
        hidden : torch.Tensor, shape (rows, d_model)
            Final decoder states of one step.
        row_sentences : torch.Tensor, shape (rows,), int64
            For each row, its sentence (a row of ``sentence_members``).

        Returns
        -------
        torch.Tensor, shape (rows, vocab_size), float32
            Log-probabilities, ``-inf`` outside each row's sentence shortlist.

        Notes
        -----
        The product and the log-softmax run over the union only (:meth:`column_log_probs`); the full-width
        result is one fill and one column copy, so the searches need no change.
        """
        restricted = self.column_log_probs(hidden, row_sentences)  # (rows, shortlist)
        if self.model is not None:
            return restricted
        full = restricted.new_full((restricted.size(0), self.vocab_size), float("-inf"))  # (rows, vocab)
        return full.index_copy_(1, self.token_ids, restricted)

    def column_log_probs(self, hidden: Tensor, row_sentences: Tensor) -> Tensor:
        """Log-probabilities over the union's columns only: column ``j`` is token ``token_ids[j]``.

        Parameters
        ----------
        hidden, row_sentences : torch.Tensor, shapes (rows, d_model) and (rows,) int64
            As for :meth:`log_probs`: one step's final decoder states, and each row's sentence.

        Returns
        -------
        torch.Tensor, shape (rows, shortlist), float32
            Each row normalised over its own sentence's tokens, ``-inf`` at the union's other columns.

        Notes
        -----
        The values :meth:`log_probs` spreads over the vocabulary, bit for bit; when the union is the whole
        vocabulary the columns are the vocabulary itself (``token_ids`` is ``arange(vocab_size)``).
        """
        if self.model is not None:
            logits = self.model.project_output(hidden[:, None])[:, 0]  # (rows, vocab), bias included
        elif self.int8_weight is not None:
            packed, reduce_range = self.int8_weight
            logits = torch.ops.quantized.linear_dynamic(hidden, packed, reduce_range)  # (rows, shortlist)
        else:
            assert self.weight is not None  # one of the two is set
            logits = F.linear(hidden, self.weight.to(hidden.dtype))  # (rows, shortlist)
        if self.bias is not None:
            logits = logits + self.bias.to(logits.dtype)
        if self.needs_mask:
            logits = logits.masked_fill(self._sentence_outside[row_sentences], float("-inf"))
        return F.log_softmax(logits, dim=-1, dtype=torch.float32)  # (rows, shortlist)


@dataclass
class ShortlistSearchState(TransformerSearchState):
    """A :class:`TransformerSearchState` with its batch's restricted projection.

    Parameters
    ----------
    cache : DecoderCache or None
        As in :class:`~transformer.decoding.step_model.TransformerSearchState`.
    memory : torch.Tensor or None, shape (rows, src_len, d_model)
        As there.
    src_padding_mask : torch.Tensor or None, shape (rows, src_len), bool
        As there.
    tgt_prefix : torch.Tensor, shape (rows, decoded_len), int64
        As there.
    projection : RestrictedProjection
        The batch's output projection.
    row_sentences : torch.Tensor, shape (rows,), int64
        For each row, its sentence in the batch the search started with.

    Notes
    -----
    Reordered with the rows, so beams, samples and dropped sentences keep their own sentence's shortlist.
    """

    projection: RestrictedProjection | None = None
    row_sentences: Tensor | None = None


class ShortlistStepModel(TransformerStepModel):
    """A :class:`TransformerStepModel` whose output projection and softmax cover the shortlist only.

    Parameters
    ----------
    model : Transformer
        The model, in any of its precisions.
    shortlist : Shortlist
        The table; built for the model's vocabulary (the caller checks the fingerprint).
    use_cache : bool
        Incremental decoding, as for :class:`TransformerStepModel`.
    native_step : NativeDecoderStep or None
        The model's C++ step, as for :class:`TransformerStepModel`; it returns the decoder states, which this
        projects.
    extra_tokens : sequence of sequence of int or None
        Per sentence of the next :meth:`start`, target ids added to its shortlist: a glossary's terms, which
        the constrained search must be able to output. None adds nothing.

    Notes
    -----
    :meth:`start` builds one :class:`RestrictedProjection` per search from the source sentences; every step
    then costs ``size / vocab_size`` of the full projection.
    """

    def __init__(
        self,
        model: Transformer,
        shortlist: Shortlist,
        use_cache: bool = True,
        native_step: NativeDecoderStep | None = None,
        extra_tokens: Sequence[Sequence[int]] | None = None,
    ) -> None:
        super().__init__(model, use_cache, native_step)
        self.shortlist = shortlist
        self.extra_tokens = extra_tokens

    def start(self, src_tokens: Tensor) -> ShortlistSearchState:
        """Encode the source and restrict the projection to its sentences' shortlists.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, right-padded with ``pad_id``.

        Returns
        -------
        ShortlistSearchState
            One row per sentence, nothing decoded yet.

        Notes
        -----
        Padding is dropped before the lookup, so a sentence's shortlist is that of its own tokens (and its
        ``extra_tokens``).
        """
        base = super().start(src_tokens)
        sentences = [row[row != self.pad_id] for row in src_tokens.cpu()]
        sentence_tokens = [self.shortlist.sentence_tokens(row) for row in sentences]
        if self.extra_tokens is not None:
            if len(self.extra_tokens) != len(sentences):
                raise ValueError(f"{len(self.extra_tokens)} extra token lists for {len(sentences)} sentences")
            sentence_tokens = [
                torch.unique(torch.cat([tokens, torch.tensor(list(extra), dtype=torch.long)]))
                for tokens, extra in zip(sentence_tokens, self.extra_tokens, strict=True)
            ]
        projection = RestrictedProjection(self.model, sentence_tokens)
        row_sentences = torch.arange(src_tokens.size(0), device=src_tokens.device)
        return ShortlistSearchState(
            base.cache, base.memory, base.src_padding_mask, base.tgt_prefix, projection, row_sentences
        )

    def log_probs(self, state: TransformerSearchState, last_tokens: Tensor) -> Tensor:
        """Run the decoder for one step and normalise over each row's shortlist.

        Parameters
        ----------
        state : ShortlistSearchState
            The rows' state, extended by ``last_tokens``.
        last_tokens : torch.Tensor, shape (rows,), int64
            Newest token of every row.

        Returns
        -------
        torch.Tensor, shape (rows, tgt_vocab_size), float32
            Log-probabilities, ``-inf`` outside the row's sentence shortlist.

        Notes
        -----
        The decoder runs as without a shortlist; only the projection differs.
        """
        assert isinstance(state, ShortlistSearchState) and state.projection is not None
        assert state.row_sentences is not None
        return state.projection.log_probs(self._last_hidden(state, last_tokens), state.row_sentences)

    def column_token_ids(self, state: TransformerSearchState) -> Tensor:
        """Name the token of each column :meth:`column_log_probs` scores: the union of the batch's shortlists.

        Parameters
        ----------
        state : ShortlistSearchState
            A state from :meth:`start`.

        Returns
        -------
        torch.Tensor, shape (shortlist,), int64
            Sorted, distinct token ids, on the search's device.

        Notes
        -----
        Fixed for the whole search: dropping finished sentences keeps their tokens' columns.
        """
        assert isinstance(state, ShortlistSearchState) and state.projection is not None
        return state.projection.token_ids

    def column_log_probs(self, state: TransformerSearchState, last_tokens: Tensor) -> Tensor:
        """Run the decoder for one step and score the union's columns only (:meth:`column_token_ids`).

        Parameters
        ----------
        state, last_tokens : ShortlistSearchState and torch.Tensor of shape (rows,), int64
            As for :meth:`log_probs`: the rows' state (extended in place) and each row's newest token.

        Returns
        -------
        torch.Tensor, shape (rows, shortlist), float32
            What :meth:`log_probs` gives at the union's tokens; the rest of its row is ``-inf``.

        Notes
        -----
        Greedy and beam search decode through this (:func:`~transformer.decoding.greedy.scored_columns`),
        so their passes over a step's scores cover the union alone.
        """
        assert isinstance(state, ShortlistSearchState) and state.projection is not None
        assert state.row_sentences is not None
        return state.projection.column_log_probs(self._last_hidden(state, last_tokens), state.row_sentences)

    def _last_hidden(self, state: TransformerSearchState, last_tokens: Tensor) -> Tensor:
        """Run the decoder for ``last_tokens`` and return its final states: shape (rows, d_model)."""
        if state.cache is not None and self.native_step is not None:
            hidden = self.native_step.hidden(state.cache, last_tokens)  # (rows, 1, d)
        elif state.cache is not None:
            hidden = self.model.decode_hidden(last_tokens[:, None], None, None, state.cache)  # (rows, 1, d)
        else:
            state.tgt_prefix = torch.cat([state.tgt_prefix, last_tokens[:, None]], dim=1)  # (rows, len)
            hidden = self.model.decode_hidden(state.tgt_prefix, state.memory, state.src_padding_mask)
        return hidden[:, -1]

    def reorder(self, state: TransformerSearchState, row_indices: Tensor) -> None:
        """Select rows, their sentence index included.

        Parameters
        ----------
        state : ShortlistSearchState
            The rows' state, changed in place.
        row_indices : torch.Tensor, shape (new_rows,), int64
            For each new row, the old row it continues.

        Returns
        -------
        None

        Notes
        -----
        The restricted projection itself stays: a dropped sentence's tokens stay in the union, which only
        costs their columns until the search ends.
        """
        super().reorder(state, row_indices)
        if isinstance(state, ShortlistSearchState) and state.row_sentences is not None:
            state.row_sentences = state.row_sentences.index_select(0, row_indices)


def check_shortlist(shortlist: Shortlist, models: Sequence[SequenceModel], tokenizer: TextTokenizer) -> None:
    """Refuse a shortlist for models it cannot restrict or a vocabulary it was not built for.

    Parameters
    ----------
    shortlist : Shortlist
        The table.
    models : sequence of Transformer or RNNEncoderDecoder
        Every model that will decode with it (one, or an ensemble's members).
    tokenizer : TextTokenizer
        The models' tokenizer, whose pieces the shortlist's ids must name.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For a recurrent model, or ``the shortlist was built for vocabulary X, the model's is Y``.

    Notes
    -----
    The fingerprint covers the pieces, not only the sizes: a shortlist of another vocabulary of the same size
    would quietly restrict every sentence to the wrong tokens.
    """
    for model in models:
        if not isinstance(model, Transformer):
            raise ValueError(
                f"a vocabulary shortlist restricts a Transformer's output projection; this model's "
                f"architecture is {architecture_of(model.config)!r}"
            )
    expected = vocabulary_fingerprint(tokenizer, models[0].config.src_vocab_size)
    if shortlist.vocabulary != expected:
        raise ValueError(
            f"the shortlist was built for vocabulary {shortlist.vocabulary}, the model's is {expected}; "
            f"rebuild it with `transformer shortlist`"
        )
