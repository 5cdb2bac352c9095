"""Greedy decoding: take the most probable next token at every step, for a whole batch at once.

The step loop here (:func:`run_token_loop`) also drives sampling (:mod:`transformer.decoding.sampling`): one
token per row and step, chosen by the argmax or by a draw.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from transformer.config.decode import DecodeConfig
from transformer.decoding.constraints import TargetPrefixes, constrain_step, search_length_limits
from transformer.decoding.search import (
    Hypothesis,
    build_hypotheses,
    check_no_nan_scores,
    check_src_tokens,
    completion_check_interval,
    normalise_scores,
    note_nan_scores,
)
from transformer.decoding.step_model import Decodable, StepModel, as_step_model, inference_context
from transformer.decoding.top_tokens import row_max

#: Chooses each active row's next token: ``(step_log_probs, totals, active_ids, step) -> tokens``, with
#: step_log_probs and totals (running sum plus step) of shape (active, vocab), active_ids (active,) the rows'
#: positions in the batch, tokens (active,) int64. None in :func:`run_token_loop` means the argmax of totals.
TokenChooser = Callable[[Tensor, Tensor, Tensor, int], Tensor]


@dataclass
class RowOutputs:
    """What the token loop has produced for each row of the batch.

    Parameters
    ----------
    tokens : torch.Tensor, shape (rows, max_steps), int64
        The chosen tokens, final EOS included, filled with the pad id beyond.
    log_probs : torch.Tensor, shape (rows,), float32
        Running sums of the chosen tokens' log-probabilities.
    num_steps : torch.Tensor, shape (rows,), int64
        Tokens generated, final EOS included.
    ends_with_eos : torch.Tensor, shape (rows,), bool
        Whether the row ended with EOS (False while it runs, and when its length limit stopped it).

    Notes
    -----
    Indexed by each row's position in the batch (the loop's ``active_ids``), not by its place in the step
    model's batch, which shrinks as rows finish.
    """

    tokens: Tensor
    log_probs: Tensor
    num_steps: Tensor
    ends_with_eos: Tensor

    @classmethod
    def empty(cls, rows: int, max_steps: int, pad_id: int, device: torch.device) -> "RowOutputs":
        """Allocate the outputs of rows that have generated nothing yet.

        Parameters
        ----------
        rows : int
            Rows of the batch.
        max_steps : int
            The longest any row may run (sizes ``tokens``).
        pad_id : int
            Fills ``tokens``.
        device : torch.device
            Where the search runs.

        Returns
        -------
        RowOutputs
            Pad tokens, zero sums and lengths, no EOS.

        Notes
        -----
        Allocated once, before the first step: the loop writes in place and never reads the size back.
        """
        return cls(
            tokens=torch.full((rows, max_steps), pad_id, dtype=torch.long, device=device),
            log_probs=torch.zeros(rows, device=device),
            num_steps=torch.zeros(rows, dtype=torch.long, device=device),
            ends_with_eos=torch.zeros(rows, dtype=torch.bool, device=device),
        )

    def record(
        self,
        step: int,
        active_ids: Tensor,
        next_tokens: Tensor,
        best_totals: Tensor,
        done: Tensor,
        eos_id: int,
    ) -> None:
        """Store one step's choices for the rows still in the step model's batch.

        Parameters
        ----------
        step : int
            The step, from 0.
        active_ids : torch.Tensor, shape (active,), int64
            The rows' positions in the batch.
        next_tokens : torch.Tensor, shape (active,), int64
            The tokens chosen at this step.
        best_totals : torch.Tensor, shape (active,), float32
            The running sums including them.
        done : torch.Tensor, shape (active,), bool
            Rows that finished at an earlier step but have not been dropped yet.
        eos_id : int
            The end-of-sentence id.

        Returns
        -------
        None

        Notes
        -----
        Finished rows stay in the batch until the next completion check and keep computing; their sums,
        lengths and EOS flags are left as they were. Their tokens past ``num_steps`` are written but never
        read.
        """
        self.tokens[active_ids, step] = next_tokens
        self.log_probs[active_ids] = torch.where(done, self.log_probs[active_ids], best_totals)
        self.num_steps[active_ids] = torch.where(done, self.num_steps[active_ids], step + 1)
        self.ends_with_eos[active_ids] = torch.where(
            done, self.ends_with_eos[active_ids], next_tokens == eos_id
        )

    def hypotheses(self, config: DecodeConfig) -> list[Hypothesis]:
        """Turn the rows into hypotheses, scored with the length penalty.

        Parameters
        ----------
        config : DecodeConfig
            The length penalty (``length_penalty``, ``length_penalty_form``).

        Returns
        -------
        list of Hypothesis
            One per row, in row order, the final EOS removed.

        Notes
        -----
        Scored here, once, with the same function beam search uses
        (:func:`~transformer.decoding.search.normalise_scores`), so greedy search and beam size 1 agree.
        """
        scores = normalise_scores(self.log_probs, self.num_steps, config)
        return build_hypotheses(self.tokens, self.num_steps, self.ends_with_eos, self.log_probs, scores)


def greedy_search(
    model_or_step_model: Decodable,
    src_tokens: Tensor,
    config: DecodeConfig | None = None,
    prefixes: Sequence[Sequence[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Translate a batch by always choosing the most probable next token.

    Parameters
    ----------
    model_or_step_model : Transformer, RNNEncoderDecoder or StepModel
        The model (wrapped in its step model: ``TransformerStepModel`` or ``RNNStepModel``) or any step
        model, e.g. a test oracle.
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source token ids, each row ending with EOS and right-padded with the pad id.
    config : DecodeConfig, optional
        Length limits (``max_length_offset``, ``max_length``, ``min_length``), ``no_repeat_ngram``, the
        length penalty used for ``Hypothesis.score``, and ``use_cache``; ``beam_size`` is ignored. Defaults
        to ``DecodeConfig()``.
    prefixes : sequence of sequence of int, optional
        A target prefix per sentence (token ids), forced before the search continues
        (:class:`~transformer.decoding.constraints.TargetPrefixes`).

    Returns
    -------
    list of list of Hypothesis
        Per input sentence, in input order, a list holding its one hypothesis (empty only if the step model
        gives every allowed continuation probability zero, which a softmax never does).

    Raises
    ------
    ValueError
        If ``config.nbest`` is not 1.
    NonFiniteScoresError
        If the model's log-probabilities were NaN at any step (damaged weights).

    Notes
    -----
    A sentence finishes when it produces EOS or reaches its length limit (then it is kept as it is, without
    EOS). Finished sentences keep their result and are dropped from the batch (``StepModel.reorder``) at the
    next completion check, and the loop ends when none is left: checks come every step on the CPU, every few
    steps on a GPU, where they are the loop's only host synchronisation
    (:func:`~transformer.decoding.search.completion_check_interval`). EOS is forbidden before ``min_length``
    tokens, padding and BOS always. The model runs in eval mode under ``torch.inference_mode`` and gets its
    training flags back. Ties go to the lowest token id.
    """
    config = config if config is not None else DecodeConfig()
    if config.nbest != 1:
        raise ValueError(f"greedy search finds one hypothesis per sentence, got nbest={config.nbest}")
    check_src_tokens(src_tokens)
    if src_tokens.size(0) == 0:
        return []
    step_model = as_step_model(model_or_step_model, config.use_cache)
    packed = TargetPrefixes.from_lists(prefixes, src_tokens.device) if prefixes else None
    with inference_context(step_model):
        state = step_model.start(src_tokens)
        hypotheses = run_token_loop(step_model, state, src_tokens, config, packed)
    return [[hypothesis] if math.isfinite(hypothesis.log_prob) else [] for hypothesis in hypotheses]


def run_token_loop(
    step_model: StepModel[Any],
    state: Any,
    src_tokens: Tensor,
    config: DecodeConfig,
    prefixes: TargetPrefixes | None = None,
    choose: TokenChooser | None = None,
) -> list[Hypothesis]:
    """Extend every row by one chosen token per step until EOS or its length limit.

    Parameters
    ----------
    step_model : StepModel
        The step model, already in eval and inference mode.
    state : StateT
        Its state, started and with one row per row of ``src_tokens``.
    src_tokens : torch.Tensor, shape (rows, src_len), int64
        The source of each row (for the length limits).
    config : DecodeConfig
        Length limits, constraints and the length penalty of ``Hypothesis.score``.
    prefixes : TargetPrefixes or None
        One forced target prefix per row.
    choose : TokenChooser or None
        How a row's next token is chosen; None takes the most probable (greedy search).

    Returns
    -------
    list of Hypothesis
        One per row, in row order; ``log_prob`` is ``-inf`` for a row that had no allowed token.

    Raises
    ------
    NonFiniteScoresError
        If a step saw NaN scores, once the loop has ended.

    Notes
    -----
    The loop of :func:`greedy_search` (see its Notes for finishing and dropping rows); a sampled row differs
    only in ``choose``.
    """
    batch_size, device = src_tokens.size(0), src_tokens.device
    special_ids = torch.tensor([step_model.pad_id, step_model.bos_id, step_model.eos_id], device=device)
    # A shortlist's union of columns, when the loop may score it alone: (token_ids, special_ids as columns).
    columns = None if choose is not None else scored_columns(step_model, state, special_ids, config, prefixes)
    if columns is not None:
        token_ids, special_ids = columns
    max_lengths, max_steps = search_length_limits(step_model, src_tokens, config, prefixes)  # (batch,), int
    check_interval = completion_check_interval(device)
    rows = RowOutputs.empty(batch_size, max_steps, step_model.pad_id, device)
    active_ids = torch.arange(batch_size, device=device)  # (active,) sentences in the step model's batch
    done = torch.zeros(batch_size, dtype=torch.bool, device=device)  # (active,) finished, not yet dropped
    last_tokens = torch.full((batch_size,), step_model.bos_id, dtype=torch.long, device=device)
    nan_seen = torch.zeros((), dtype=torch.bool, device=device)
    for step in range(max_steps):
        if columns is None:
            model_log_probs = step_model.log_probs(state, last_tokens)  # (active, vocab)
        else:
            model_log_probs = step_model.column_log_probs(state, last_tokens)  # type: ignore[attr-defined]
        nan_seen = note_nan_scores(nan_seen, model_log_probs)
        row_prefixes = prefixes.select(active_ids) if prefixes is not None else None
        history = rows.tokens[active_ids, :step] if config.no_repeat_ngram else None  # (active, step)
        step_log_probs = constrain_step(model_log_probs, step, config, special_ids, history, row_prefixes)
        # Rank running sums, not step log-probs, so beam search of size 1 does the same arithmetic.
        if choose is None:
            # step_log_probs is constrain_step's own copy, so greedy adds into it: one pass, no allocation.
            totals = step_log_probs.add_(rows.log_probs[active_ids, None])  # (active, vocab)
            best_totals, next_tokens = row_max(totals)  # (active,), as totals.max(dim=1)
            if columns is not None:
                next_tokens = token_ids[next_tokens]  # columns -> token ids
        else:
            totals = rows.log_probs[active_ids, None] + step_log_probs  # (active, vocab)
            next_tokens = choose(step_log_probs, totals, active_ids, step)  # (active,)
            best_totals = totals.gather(1, next_tokens[:, None]).squeeze(1)
        # A sentence done at an earlier step stays in the batch until the next check: keep its results.
        rows.record(step, active_ids, next_tokens, best_totals, done, step_model.eos_id)
        done = done | rows.ends_with_eos[active_ids] | (max_lengths[active_ids] == step + 1)
        done |= best_totals.isinf()  # Every allowed next token has probability zero.
        if (step + 1) % check_interval == 0:
            keep = (~done).nonzero().squeeze(1)  # (still_active,): the loop's only read back to the host
            if keep.numel() == 0:
                break
            if keep.numel() < done.numel():
                step_model.reorder(state, keep)
                active_ids, next_tokens, done = active_ids[keep], next_tokens[keep], done[keep]
        last_tokens = next_tokens
    check_no_nan_scores(nan_seen)
    return rows.hypotheses(config)


def scored_columns(
    step_model: StepModel[Any],
    state: Any,
    special_ids: Tensor,
    config: DecodeConfig,
    prefixes: TargetPrefixes | None,
) -> tuple[Tensor, Tensor] | None:
    """Find the columns a greedy or beam search may score instead of the vocabulary: a shortlist's union.

    Parameters
    ----------
    step_model : StepModel
        The step model; one with ``column_token_ids`` and ``column_log_probs``
        (:class:`~transformer.decoding.shortlist.ShortlistStepModel`) scores a subset of the vocabulary.
    state : StateT
        Its started state.
    special_ids : torch.Tensor, shape (3,), int64
        ``pad_id``, ``bos_id`` and ``eos_id``.
    config : DecodeConfig
        The search; n-gram blocking reads token ids, so it keeps the whole vocabulary.
    prefixes : TargetPrefixes or None
        Forced prefixes, which name token ids: with them the whole vocabulary is kept too.

    Returns
    -------
    tuple of (torch.Tensor, torch.Tensor) or None
        The column's token ids ``(columns,)`` and the special tokens' columns ``(3,)``; None to score the
        whole vocabulary.

    Notes
    -----
    Every token outside the union scores ``-inf``, so the union's columns give the same row maxima and,
    since they are sorted, the same lowest index among ties: the same tokens and sums as the whole width
    (tested). Beam search keeps the same finite candidates (its top-k only ever differs among equal scores;
    candidates at ``-inf`` never finish). The special tokens must be columns for the constraints to apply; a hand-made shortlist
    without them keeps the whole vocabulary. One read back to the host per search.
    """
    if config.no_repeat_ngram or prefixes is not None or not hasattr(step_model, "column_log_probs"):
        return None
    token_ids = step_model.column_token_ids(state)  # type: ignore[attr-defined]
    if token_ids.numel() == 0:  # a hand-made shortlist that allows nothing: no column to map the specials to
        return None
    special_columns = torch.searchsorted(token_ids, special_ids).clamp_(max=token_ids.numel() - 1)
    if not bool((token_ids[special_columns] == special_ids).all()):
        return None
    return token_ids, special_columns
