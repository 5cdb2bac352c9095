"""Batched beam search (paper section 6.1: beam size 4, length penalty alpha = 0.6).

Every sentence keeps ``beam_size`` live hypotheses; all sentences and beams are scored together as one
``(active * beam_size, vocab)`` batch per step. A step extends every live beam by every token, keeps the
``2 * beam_size`` best extensions by summed log-probability, moves those among the first ``beam_size`` that
end in EOS (or reach the length limit) to the sentence's finished list, and continues the ``beam_size`` best
that do not end in EOS. A sentence is done once it has ``beam_size`` finished hypotheses, reaches its length
limit, or has no live beam of non-zero probability left. Done sentences add no more hypotheses; they are
dropped from the batch at the next completion check (every step on the CPU, every few on a GPU: see
:func:`~transformer.decoding.search.completion_check_interval`), and the search stops when none is left.
Nothing else in the loop reads a tensor back to the host. With a vocabulary shortlist the steps score the
batch's union of candidate tokens alone (:func:`~transformer.decoding.greedy.scored_columns`), as greedy
search does.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from transformer.config.decode import DecodeConfig
from transformer.decoding.constraints import TargetPrefixes, constrain_step, search_length_limits
from transformer.decoding.greedy import greedy_search, scored_columns
from transformer.decoding.sampling import sample_search
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
from transformer.decoding.top_tokens import row_topk


@dataclass
class LiveBeams:
    """The hypotheses still being extended, for the sentences not yet done.

    Parameters
    ----------
    sentence_ids : torch.Tensor, shape (active,), int64
        Position of each active sentence in the input batch.
    tokens : torch.Tensor, shape (active, beam_size, step), int64
        Tokens generated so far by each beam.
    log_probs : torch.Tensor, shape (active, beam_size), float32
        Summed log-probabilities; ``-inf`` marks an empty beam (e.g. all but one before the first step).
    done : torch.Tensor, shape (active,), bool
        True for a sentence that is done but still in the batch until the next completion check; it adds
        no more finished hypotheses.

    Notes
    -----
    Row ``a * beam_size + b`` of the step model's state belongs to beam ``b`` of active sentence ``a``.
    """

    sentence_ids: Tensor
    tokens: Tensor
    log_probs: Tensor
    done: Tensor


@dataclass
class Candidates:
    """The best one-token extensions of the live beams, best first.

    Parameters
    ----------
    tokens : torch.Tensor, shape (active, num_candidates, step + 1), int64
        Each candidate's tokens, the new one last.
    origins : torch.Tensor, shape (active, num_candidates), int64
        The beam each candidate extends.
    log_probs : torch.Tensor, shape (active, num_candidates), float32
        Summed log-probabilities, in descending order along dim 1.

    Notes
    -----
    ``num_candidates = 2 * beam_size``: at most ``beam_size`` of them end in EOS (one per beam), so at
    least ``beam_size`` can continue.
    """

    tokens: Tensor
    origins: Tensor
    log_probs: Tensor


@dataclass
class FinishedHypotheses:
    """Up to ``beam_size`` finished hypotheses per input sentence.

    Parameters
    ----------
    tokens : torch.Tensor, shape (batch, beam_size, max_steps), int64
        Generated tokens (final EOS included), padded with the pad id.
    num_steps : torch.Tensor, shape (batch, beam_size), int64
        Length |Y| of each hypothesis, final EOS included.
    ends_with_eos : torch.Tensor, shape (batch, beam_size), bool
        False for a hypothesis stopped by the length limit.
    log_probs : torch.Tensor, shape (batch, beam_size), float32
        Summed log-probabilities; ``-inf`` in empty slots.
    counts : torch.Tensor, shape (batch,), int64
        Filled slots per sentence (filled in order).

    Notes
    -----
    Slots are filled in the order hypotheses finish and never replaced. Scores are computed once, when
    the search ends (:func:`_best_hypotheses`).
    """

    tokens: Tensor
    num_steps: Tensor
    ends_with_eos: Tensor
    log_probs: Tensor
    counts: Tensor


def beam_search(
    model_or_step_model: Decodable,
    src_tokens: Tensor,
    config: DecodeConfig | None = None,
    prefixes: Sequence[Sequence[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Translate a batch with beam search.

    Parameters
    ----------
    model_or_step_model : Transformer, RNNEncoderDecoder or StepModel
        The model (wrapped in its step model: ``TransformerStepModel`` or ``RNNStepModel``) or any step
        model, e.g. a test oracle.
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source token ids, each row ending with EOS and right-padded with the pad id.
    config : DecodeConfig, optional
        ``beam_size``, length penalty, length limits, ``no_repeat_ngram``, ``nbest`` and ``use_cache``;
        defaults to the paper's ``DecodeConfig()``.
    prefixes : sequence of sequence of int, optional
        A target prefix per sentence (token ids), forced on every beam before the search continues
        (:class:`~transformer.decoding.constraints.TargetPrefixes`).

    Returns
    -------
    list of list of Hypothesis
        Per input sentence, in input order, its ``nbest`` finished hypotheses sorted by score, best first
        (fewer only if fewer distinct hypotheses with non-zero probability exist).

    Raises
    ------
    NonFiniteScoresError
        If the model's log-probabilities were NaN at any step (damaged weights), rather than returning no
        hypotheses.

    Notes
    -----
    Stopping rule (fairseq's default, "stop when all beams are finished"): a sentence is done as soon as
    ``beam_size`` hypotheses have finished, even if a live beam might still overtake one of them after length
    normalisation. Only EOS extensions ranked among the best ``beam_size`` candidates finish, and a finished
    hypothesis is never replaced. This makes ``beam_size=1`` take exactly greedy search's tokens (tested), and
    with ``length_penalty=0`` the best hypothesis has the largest ``log_prob`` of those found. At the length
    limit the best ``beam_size`` candidates finish as they are, without EOS. EOS is forbidden before
    ``min_length`` tokens, padding and BOS always. Done sentences leave the batch at the next completion check
    (:func:`~transformer.decoding.search.completion_check_interval`). The model runs in eval mode under
    ``torch.inference_mode`` and gets its training flags back.
    """
    config = config if config is not None else DecodeConfig()
    check_src_tokens(src_tokens)
    if src_tokens.size(0) == 0:
        return []
    step_model = as_step_model(model_or_step_model, config.use_cache)
    packed = TargetPrefixes.from_lists(prefixes, src_tokens.device) if prefixes else None
    with inference_context(step_model):
        finished = _run_beam_search(step_model, src_tokens, config, packed)
    return _best_hypotheses(finished, config)


def search(
    model_or_step_model: Decodable,
    src_tokens: Tensor,
    config: DecodeConfig | None = None,
    prefixes: Sequence[Sequence[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Translate a batch with the search ``config`` asks for: sampling, greedy for beam size 1, else beam.

    Parameters
    ----------
    model_or_step_model : Transformer, RNNEncoderDecoder or StepModel
        The model (a Transformer or the recurrent baseline) or any step model.
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source token ids, right-padded with the pad id.
    config : DecodeConfig, optional
        Search settings; defaults to the paper's ``DecodeConfig()`` (beam 4, alpha 0.6, input length + 50).
    prefixes : sequence of sequence of int, optional
        A forced target prefix per sentence (token ids; empty for none).

    Returns
    -------
    list of list of Hypothesis
        Per input sentence, in input order, ``config.nbest`` hypotheses (or samples), best first.

    Raises
    ------
    ValueError
        For a config with ``mbr`` set.

    Notes
    -----
    Beam search of size 1 gives the same tokens as greedy search; greedy is simply cheaper.
    ``config.sampling`` draws ``nbest`` samples (:func:`~transformer.decoding.sampling.sample_search`).
    Minimum Bayes risk decoding compares detokenised text, so it is not a token search: a config with ``mbr``
    is refused here; use :func:`transformer.decoding.mbr.mbr_search` or the Translator.
    """
    config = config if config is not None else DecodeConfig()
    if config.mbr:
        raise ValueError("DecodeConfig.mbr needs detokenised text: use transformer.decoding.mbr.mbr_search")
    if config.sampling:
        return sample_search(model_or_step_model, src_tokens, config, prefixes)
    if config.beam_size == 1:
        return greedy_search(model_or_step_model, src_tokens, config, prefixes)
    return beam_search(model_or_step_model, src_tokens, config, prefixes)


def _run_beam_search(
    step_model: StepModel[Any], src_tokens: Tensor, config: DecodeConfig, prefixes: TargetPrefixes | None
) -> FinishedHypotheses:
    """Step all sentences' beams together until every sentence is done."""
    batch_size, beam_size, device = src_tokens.size(0), config.beam_size, src_tokens.device
    special_ids = torch.tensor([step_model.pad_id, step_model.bos_id, step_model.eos_id], device=device)
    max_lengths, max_steps = search_length_limits(step_model, src_tokens, config, prefixes)  # (batch,), int
    check_interval = completion_check_interval(device)
    finished = _empty_finished(batch_size, beam_size, max_steps, step_model.pad_id, device)
    live = _initial_beams(batch_size, beam_size, device)
    state = step_model.start(src_tokens)
    # A shortlist's union of columns, scored instead of the vocabulary where the search allows it.
    columns = scored_columns(step_model, state, special_ids, config, prefixes)
    column_tokens = None
    if columns is not None:
        column_tokens, special_ids = columns
    step_model.reorder(state, torch.arange(batch_size, device=device).repeat_interleave(beam_size))
    last_tokens = torch.full((batch_size * beam_size,), step_model.bos_id, dtype=torch.long, device=device)
    nan_seen = torch.zeros((), dtype=torch.bool, device=device)
    for step in range(max_steps):
        if column_tokens is None:
            model_log_probs = step_model.log_probs(state, last_tokens)  # (active * beam_size, vocab)
        else:  # (active * beam_size, columns)
            model_log_probs = step_model.column_log_probs(state, last_tokens)  # type: ignore[attr-defined]
        nan_seen = note_nan_scores(nan_seen, model_log_probs)
        history = live.tokens.flatten(0, 1)  # (active * beam_size, step)
        row_prefixes = None
        if prefixes is not None:
            row_prefixes = prefixes.select(live.sentence_ids.repeat_interleave(beam_size))
        step_log_probs = constrain_step(model_log_probs, step, config, special_ids, history, row_prefixes)
        candidates = _extend(
            live, step_log_probs.reshape(live.log_probs.size(0), beam_size, -1), column_tokens
        )
        at_length_limit = max_lengths[live.sentence_ids] == step + 1  # (active,)
        finishing = _finishing(candidates, at_length_limit, live.done, beam_size, step_model.eos_id)
        _add_finished(finished, live.sentence_ids, candidates, finishing, step_model.eos_id)
        live, origins = _continuing(live, candidates, beam_size, step_model.eos_id)
        live.done = live.done | (finished.counts[live.sentence_ids] >= beam_size) | at_length_limit
        live.done |= ~live.log_probs.isfinite().any(dim=1)  # No live beam left with non-zero probability.
        kept = torch.arange(live.done.size(0), device=device)  # (active,)
        if (step + 1) % check_interval == 0:
            kept = (~live.done).nonzero().squeeze(1)  # (still_active,): the loop's only read back to the host
            if kept.numel() == 0:
                break
            live, origins = _select_sentences(live, kept), origins[kept]
        # One reorder both follows the surviving beams and drops the done sentences.
        step_model.reorder(state, (kept[:, None] * beam_size + origins).reshape(-1))
        last_tokens = live.tokens[:, :, -1].reshape(-1)  # (still_active * beam_size,)
    check_no_nan_scores(nan_seen)
    return finished


def _initial_beams(batch_size: int, beam_size: int, device: torch.device) -> LiveBeams:
    """Start every sentence with one empty hypothesis; the other beams are empty (``-inf``)."""
    log_probs = torch.full((batch_size, beam_size), float("-inf"), device=device)
    log_probs[:, 0] = 0.0  # Identical beams would otherwise fill the beam with copies of one hypothesis.
    tokens = torch.empty((batch_size, beam_size, 0), dtype=torch.long, device=device)
    done = torch.zeros(batch_size, dtype=torch.bool, device=device)
    return LiveBeams(torch.arange(batch_size, device=device), tokens, log_probs, done)


def _select_sentences(live: LiveBeams, kept: Tensor) -> LiveBeams:
    """Keep the beams of the active sentences at positions ``kept``, shape (still_active,)."""
    return LiveBeams(live.sentence_ids[kept], live.tokens[kept], live.log_probs[kept], live.done[kept])


def _empty_finished(
    batch_size: int, beam_size: int, max_steps: int, pad_id: int, device: torch.device
) -> FinishedHypotheses:
    """Allocate an empty finished list for every sentence."""
    shape = (batch_size, beam_size)
    return FinishedHypotheses(
        tokens=torch.full((*shape, max_steps), pad_id, dtype=torch.long, device=device),
        num_steps=torch.zeros(shape, dtype=torch.long, device=device),
        ends_with_eos=torch.zeros(shape, dtype=torch.bool, device=device),
        log_probs=torch.full(shape, float("-inf"), device=device),
        counts=torch.zeros(batch_size, dtype=torch.long, device=device),
    )


def _extend(live: LiveBeams, step_log_probs: Tensor, column_tokens: Tensor | None = None) -> Candidates:
    """Keep the ``2 * beam_size`` best one-token extensions of each sentence's beams.

    ``step_log_probs`` has shape (active, beam_size, vocab_size), or (active, beam_size, columns) with
    ``column_tokens`` (shape (columns,), int64) naming each column's token.
    """
    active, beam_size, vocab_size = step_log_probs.shape
    num_candidates = min(2 * beam_size, beam_size * vocab_size)
    # The best candidates of a sentence are among the best of each of its beams: select per beam first
    # (a beam's running score shifts its whole row, so it does not change the row's order), then among
    # beam_size x per_beam survivors. Same result as one top-k over beam_size x vocab, far less work.
    per_beam = min(num_candidates, vocab_size)
    row_log_probs = step_log_probs.flatten(0, 1)  # (active * beam_size, vocab_size)
    beam_best, beam_tokens = row_topk(row_log_probs, per_beam)  # (active * beam_size, per_beam)
    beam_best = beam_best.view(active, beam_size, per_beam)
    beam_tokens = beam_tokens.view(active, beam_size, per_beam)
    totals = live.log_probs[:, :, None] + beam_best  # (active, beam_size, per_beam)
    log_probs, flat_indices = totals.view(active, -1).topk(num_candidates, dim=1)  # (active, num_candidates)
    origins = flat_indices // per_beam
    new_tokens = beam_tokens.view(active, -1).gather(1, flat_indices)  # (active, num_candidates)
    if column_tokens is not None:
        new_tokens = column_tokens[new_tokens]  # columns -> token ids
    # The tokens of the beam each candidate extends: (active, num_candidates, step).
    prefixes = live.tokens.gather(1, origins[:, :, None].expand(-1, -1, live.tokens.size(2)))
    return Candidates(torch.cat([prefixes, new_tokens[:, :, None]], dim=2), origins, log_probs)


def _finishing(
    candidates: Candidates, at_length_limit: Tensor, sentence_done: Tensor, beam_size: int, eos_id: int
) -> Tensor:
    """Mark candidates that finish now: among the best ``beam_size``, ending in EOS or at the limit.

    Returns a bool tensor of shape (active, num_candidates); impossible (``-inf``) candidates never finish,
    nor do those of sentences already done (``sentence_done``, shape (active,)).
    """
    ranks = torch.arange(candidates.log_probs.size(1), device=candidates.log_probs.device)
    ends = (candidates.tokens[:, :, -1] == eos_id) | at_length_limit[:, None]  # (active, num_candidates)
    return ends & (ranks < beam_size) & candidates.log_probs.isfinite() & ~sentence_done[:, None]


def _add_finished(
    finished: FinishedHypotheses,
    sentence_ids: Tensor,
    candidates: Candidates,
    finishing: Tensor,
    eos_id: int,
) -> None:
    """Append finishing candidates, best first, to their sentences' free slots; drop those that don't fit.

    Every slot of the active sentences is rewritten, unchanged where nothing lands, because selecting just
    the finishing candidates would need their number on the host (a GPU synchronisation every step).
    """
    _, num_candidates, num_steps = candidates.tokens.shape
    beam_size = finished.num_steps.size(1)
    ranks = torch.arange(num_candidates, device=finishing.device)
    # Candidate positions with the finishing ones first, best first: (active, num_candidates).
    finishing_first = torch.where(finishing, ranks, ranks + num_candidates).argsort(dim=1)
    counts = finished.counts[sentence_ids]  # (active,)
    # Slot s of a sentence takes its (s - counts)-th finishing candidate, if it has that many.
    new_ranks = torch.arange(beam_size, device=finishing.device) - counts[:, None]  # (active, beam_size)
    lands = (new_ranks >= 0) & (new_ranks < finishing.sum(dim=1, keepdim=True))  # (active, beam_size)
    sources = finishing_first.gather(1, new_ranks.clamp(min=0))  # (active, beam_size)
    new_tokens = candidates.tokens.gather(1, sources[:, :, None].expand(-1, -1, num_steps))
    old_tokens = finished.tokens[sentence_ids, :, :num_steps]  # (active, beam_size, num_steps)
    finished.tokens[sentence_ids, :, :num_steps] = torch.where(lands[:, :, None], new_tokens, old_tokens)
    finished.num_steps[sentence_ids] = torch.where(lands, num_steps, finished.num_steps[sentence_ids])
    ends_with_eos = new_tokens[:, :, -1] == eos_id
    finished.ends_with_eos[sentence_ids] = torch.where(
        lands, ends_with_eos, finished.ends_with_eos[sentence_ids]
    )
    log_probs = candidates.log_probs.gather(1, sources)
    finished.log_probs[sentence_ids] = torch.where(lands, log_probs, finished.log_probs[sentence_ids])
    finished.counts[sentence_ids] = counts + lands.sum(dim=1)


def _continuing(
    live: LiveBeams, candidates: Candidates, beam_size: int, eos_id: int
) -> tuple[LiveBeams, Tensor]:
    """Keep the ``beam_size`` best candidates that do not end in EOS as the next live beams.

    Returns the beams and, of shape (active, beam_size), the old beam each one extends.
    """
    num_candidates = candidates.log_probs.size(1)
    ranks = torch.arange(num_candidates, device=candidates.log_probs.device)
    ends_with_eos = candidates.tokens[:, :, -1] == eos_id  # (active, num_candidates)
    # Push EOS candidates behind all others while keeping the rank order within each group.
    order = torch.where(ends_with_eos, ranks + num_candidates, ranks).argsort(dim=1)[:, :beam_size]
    step = candidates.tokens.size(2)
    tokens = candidates.tokens.gather(1, order[:, :, None].expand(-1, -1, step))  # (active, beam, step)
    continuing = LiveBeams(live.sentence_ids, tokens, candidates.log_probs.gather(1, order), live.done)
    return continuing, candidates.origins.gather(1, order)


def _best_hypotheses(finished: FinishedHypotheses, config: DecodeConfig) -> list[list[Hypothesis]]:
    """Score each sentence's finished hypotheses and return the ``config.nbest`` best, best first."""
    batch_size, beam_size, max_steps = finished.tokens.shape
    filled = torch.arange(beam_size, device=finished.counts.device) < finished.counts[:, None]
    # Scored once, here: the same (batch, beam_size) layout whatever finished together, so a score does
    # not depend on the step it finished in (vectorised and scalar float32 pow may round differently).
    scores = normalise_scores(finished.log_probs, finished.num_steps, config)
    scores = torch.where(filled, scores, float("-inf"))  # (batch, beam_size)
    # Stable, so equal scores keep the order in which hypotheses finished.
    order = scores.argsort(dim=1, descending=True, stable=True)[:, : config.nbest]  # (batch, nbest)
    hypotheses = build_hypotheses(
        finished.tokens.gather(1, order[:, :, None].expand(-1, -1, max_steps)).view(-1, max_steps),
        finished.num_steps.gather(1, order).view(-1),
        finished.ends_with_eos.gather(1, order).view(-1),
        finished.log_probs.gather(1, order).view(-1),
        scores.gather(1, order).view(-1),
    )
    nbest = order.size(1)
    available = finished.counts.clamp(max=nbest).tolist()
    return [
        hypotheses[sentence * nbest : sentence * nbest + available[sentence]]
        for sentence in range(batch_size)
    ]
