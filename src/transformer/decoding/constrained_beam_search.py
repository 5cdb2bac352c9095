"""Beam search whose outputs contain given target terms: dynamic beam allocation (Post and Vilar, 2018).

Each step scores every live beam's extensions as :mod:`~transformer.decoding.beam_search` does, then widens
the candidates: besides the ``2 * beam_size`` best extensions of the sentence, every beam's single best
token and every token that would bring a beam closer to its terms (:meth:`TermProgress.next_tokens`). The
next beams are chosen across banks of candidates grouped by the constraint tokens they have met
(:func:`~transformer.decoding.term_constraints.allocate_banks`), so the beam stays ``beam_size`` wide
whatever the number of terms: grid beam search (Hokamp and Liu, 2017) keeps a beam per count of met tokens
instead, ``C + 1`` times the work for ``C`` constraint tokens. EOS is forbidden until every term is met; the
length limit ends a hypothesis that has not met them all, so a term the model cannot produce within the limit
is missing rather than the search failing.

The candidates' bookkeeping runs on the host (a few hundred small operations per step), so this search is
slower than the plain one; the translator sends it only the sentences that have terms.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.decoding.constraints import TargetPrefixes, constrain_step, search_length_limits
from transformer.decoding.search import (
    Hypothesis,
    check_no_nan_scores,
    check_src_tokens,
    normalise_scores,
    note_nan_scores,
)
from transformer.decoding.step_model import Decodable, StepModel, as_step_model, inference_context
from transformer.decoding.term_constraints import TermProgress, allocate_banks


@dataclass(frozen=True)
class _Beam:
    """One live hypothesis: its tokens, summed log-probability and progress through the terms."""

    tokens: tuple[int, ...]
    log_prob: float
    progress: TermProgress


@dataclass
class _Sentence:
    """One sentence's live beams (one per row of its block) and finished hypotheses."""

    index: int
    beams: list[_Beam | None]
    finished: list["_Finished"] = field(default_factory=list)


@dataclass(frozen=True)
class _Finished:
    """One ended hypothesis: its tokens (EOS included when it ended so), sum, and whether it met its terms."""

    tokens: tuple[int, ...]
    log_prob: float
    ends_with_eos: bool
    complete: bool


def constrained_beam_search(
    model_or_step_model: Decodable,
    src_tokens: Tensor,
    terms: Sequence[Sequence[Sequence[int]]],
    config: DecodeConfig | None = None,
    prefixes: Sequence[Sequence[int]] | None = None,
    word_continuations: Sequence[int] = (),
) -> list[list[Hypothesis]]:
    """Translate a batch with beam search, making each output contain its sentence's target terms.

    Parameters
    ----------
    model_or_step_model : Transformer, RNNEncoderDecoder or StepModel
        The model or its step model (a shortlist's must include the terms' tokens).
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source token ids, each row ending with EOS and right-padded with the pad id.
    terms : sequence of sequence of sequence of int
        Per sentence, its target phrases as token ids (an empty list for none); a phrase listed twice must
        appear twice.
    config : DecodeConfig, optional
        ``beam_size`` (at least 1), length penalty and limits, ``no_repeat_ngram``, ``nbest``, ``use_cache``.
    prefixes : sequence of sequence of int, optional
        A forced target prefix per sentence; its tokens count towards the terms.
    word_continuations : sequence of int
        Target ids that continue the word before them (:func:`~transformer.decoding.glossary.word_continuation_ids`:
        pieces without the word-start mark that begin with a letter or digit), forbidden right after a term, so
        the term is not glued into a longer word; empty forbids nothing.

    Returns
    -------
    list of list of Hypothesis
        Per sentence, its ``nbest`` finished hypotheses, best score first.

    Raises
    ------
    ValueError
        When ``terms`` is not one list per sentence, or holds an empty phrase.
    NonFiniteScoresError
        If the model's log-probabilities were NaN at any step.

    Notes
    -----
    The stopping rule is the plain search's: a sentence is done once ``beam_size`` hypotheses have ended, and
    an EOS candidate ends only when it ranks among the best ``beam_size`` by summed log-probability of the
    candidates that have met every term (the plain rule, read within the top bank: ranked against all
    candidates, a completed term's EOS would rarely beat the unconstrained extensions, and every sentence
    would run to its length limit). At the length limit the banks choose which candidates end, so those
    with the most terms are kept, and the results list the hypotheses that met every term first. With no
    terms this is the plain beam search (same hypotheses, tested). Terms are matched as token sequences, so
    a term must be encoded as the output would spell it (``Hund`` mid-sentence is ``▁Hund``).
    """
    config = config if config is not None else DecodeConfig()
    check_src_tokens(src_tokens)
    if len(terms) != src_tokens.size(0):
        raise ValueError(f"{len(terms)} term lists for {src_tokens.size(0)} sentences")
    progress = [TermProgress.start(sentence_terms) for sentence_terms in terms]
    if src_tokens.size(0) == 0:
        return []
    step_model = as_step_model(model_or_step_model, config.use_cache)
    packed = TargetPrefixes.from_lists(prefixes, src_tokens.device) if prefixes else None
    continuations = torch.tensor(list(word_continuations), dtype=torch.long, device=src_tokens.device)
    with inference_context(step_model):
        sentences = _run(step_model, src_tokens, config, packed, progress, continuations)
    return [_best(sentence, config) for sentence in sentences]


def _run(
    step_model: StepModel[Any],
    src_tokens: Tensor,
    config: DecodeConfig,
    prefixes: TargetPrefixes | None,
    progress: list[TermProgress],
    continuations: Tensor,
) -> list[_Sentence]:
    """Step every sentence's beams until each is done; return them in input order."""
    batch_size, beam_size, device = src_tokens.size(0), config.beam_size, src_tokens.device
    special_ids = torch.tensor([step_model.pad_id, step_model.bos_id, step_model.eos_id], device=device)
    max_lengths, max_steps = search_length_limits(step_model, src_tokens, config, prefixes)
    limits = max_lengths.tolist()
    sentences = [
        _Sentence(index, [_Beam((), 0.0, progress[index]), *([None] * (beam_size - 1))])
        for index in range(batch_size)
    ]
    active = list(sentences)
    state = step_model.start(src_tokens)
    step_model.reorder(state, torch.arange(batch_size, device=device).repeat_interleave(beam_size))
    last_tokens = torch.full((batch_size * beam_size,), step_model.bos_id, dtype=torch.long, device=device)
    nan_seen = torch.zeros((), dtype=torch.bool, device=device)
    for step in range(max_steps):
        model_log_probs = step_model.log_probs(state, last_tokens)  # (active * beam_size, vocab)
        nan_seen = note_nan_scores(nan_seen, model_log_probs)
        beams = [beam for sentence in active for beam in sentence.beams]
        history = None
        if config.no_repeat_ngram:
            rows = [list(beam.tokens) if beam else [0] * step for beam in beams]
            history = torch.tensor(rows, dtype=torch.long, device=device).view(len(beams), step)
        row_prefixes = None
        if prefixes is not None:
            row_prefixes = prefixes.select(
                torch.tensor([sentence.index for sentence in active], device=device).repeat_interleave(
                    beam_size
                )
            )
        step_log_probs = constrain_step(model_log_probs, step, config, special_ids, history, row_prefixes)
        totals = _totals(beams, step_log_probs, step_model.eos_id, continuations)  # (rows, vocab)
        extensions = _candidate_extensions(beams, totals, beam_size)
        origins: list[int] = []
        still_active = []
        for block, sentence in enumerate(active):
            at_limit = step + 1 >= limits[sentence.index]
            chosen = _step_sentence(sentence, extensions[block], at_limit, config, step_model.eos_id)
            if chosen is not None:
                still_active.append(sentence)
                origins.extend(block * beam_size + origin for origin in chosen)
        if not still_active:
            break
        step_model.reorder(state, torch.tensor(origins, device=device))
        active = still_active
        last_tokens = torch.tensor(
            [
                beam.tokens[-1] if beam else step_model.eos_id
                for sentence in active
                for beam in sentence.beams
            ],
            device=device,
        )
    check_no_nan_scores(nan_seen)
    return sentences


def _totals(beams: list[_Beam | None], step_log_probs: Tensor, eos_id: int, continuations: Tensor) -> Tensor:
    """Each row's running sum plus its next-token log-probabilities; EOS ``-inf`` until its terms are met.

    A row whose last token completed a term may not continue that word (``continuations``, shape (ids,)).
    """
    running = torch.tensor(
        [beam.log_prob if beam else float("-inf") for beam in beams], device=step_log_probs.device
    )
    totals = step_log_probs + running[:, None]
    after_term = [row for row, beam in enumerate(beams) if beam is not None and beam.progress.just_met]
    if after_term and continuations.numel():
        rows = torch.tensor(after_term, device=totals.device)
        totals[rows[:, None], continuations[None, :]] = float("-inf")
    incomplete = torch.tensor([beam is not None and not beam.progress.complete for beam in beams])
    if bool(incomplete.any()):
        eos_column = totals[:, eos_id]
        totals[:, eos_id] = torch.where(incomplete.to(totals.device), float("-inf"), eos_column)
    return totals


def _candidate_extensions(
    beams: list[_Beam | None], totals: Tensor, beam_size: int
) -> list[dict[tuple[int, int], float]]:
    """Per sentence block, its candidate (beam, token) extensions and their summed log-probabilities.

    ``totals`` has shape (active * beam_size, vocab). The candidates are the block's ``2 * beam_size`` best,
    each beam's best token and each beam's :meth:`TermProgress.next_tokens`; impossible ones are left out.
    """
    rows, vocab_size = totals.shape
    blocks = rows // beam_size
    num_best = min(2 * beam_size, beam_size * vocab_size)
    top_values, top_indices = totals.view(blocks, -1).topk(num_best, dim=1)  # (blocks, num_best)
    best_values, best_tokens = totals.max(dim=1)  # (rows,)
    term_rows = [
        row for row, beam in enumerate(beams) if beam is not None for _ in beam.progress.next_tokens()
    ]
    term_tokens = [token for beam in beams if beam is not None for token in beam.progress.next_tokens()]
    term_values = totals[term_rows, term_tokens].tolist() if term_rows else []
    extensions: list[dict[tuple[int, int], float]] = [{} for _ in range(blocks)]
    for block, (values, indices) in enumerate(zip(top_values.tolist(), top_indices.tolist(), strict=True)):
        for value, index in zip(values, indices, strict=True):
            extensions[block][(index // vocab_size, index % vocab_size)] = value
    for row, (value, token) in enumerate(zip(best_values.tolist(), best_tokens.tolist(), strict=True)):
        extensions[row // beam_size][(row % beam_size, token)] = value
    for row, token, value in zip(term_rows, term_tokens, term_values, strict=True):
        extensions[row // beam_size][(row % beam_size, token)] = value
    return [{key: value for key, value in block.items() if value != float("-inf")} for block in extensions]


def _step_sentence(
    sentence: _Sentence,
    extensions: dict[tuple[int, int], float],
    at_limit: bool,
    config: DecodeConfig,
    eos_id: int,
) -> list[int] | None:
    """Finish and continue one sentence's candidates; return the beam each new beam extends, or None if done.

    Candidates are ranked by summed log-probability (ties by beam, then token). Those among the best
    ``beam_size`` that end in EOS (or, at the length limit, the ``beam_size`` the banks choose) finish; the
    banks choose the continuing ones from the rest.
    """
    beam_size = config.beam_size
    keys = sorted(extensions, key=lambda key: (-extensions[key], key))
    progress = [_live(sentence, origin).progress.advance(token) for origin, token in keys]
    scores = [extensions[key] for key in keys]
    banks = [item.tokens_met for item in progress]
    if at_limit:
        for index in allocate_banks(banks, scores, beam_size):
            _finish(sentence, keys[index], scores[index], eos_id, beam_size)
        return None
    complete = [index for index, item in enumerate(progress) if item.complete][:beam_size]
    for index in complete:  # ranked among the complete candidates (all of them when there are no terms)
        if keys[index][1] == eos_id:
            _finish(sentence, keys[index], scores[index], eos_id, beam_size)
    continuing = [index for index, (_, token) in enumerate(keys) if token != eos_id]
    chosen = allocate_banks(
        [banks[index] for index in continuing], [scores[index] for index in continuing], beam_size
    )
    if len(sentence.finished) >= beam_size or not chosen:
        return None
    new_beams: list[_Beam | None] = []
    origins = []
    for position in chosen:
        index = continuing[position]
        origin, token = keys[index]
        new_beams.append(_Beam((*_live(sentence, origin).tokens, token), scores[index], progress[index]))
        origins.append(origin)
    padding = beam_size - len(new_beams)
    sentence.beams = new_beams + [None] * padding
    return origins + [origins[0]] * padding


def _live(sentence: _Sentence, origin: int) -> _Beam:
    """Return the live beam ``origin`` of a sentence (candidates extend live beams only)."""
    beam = sentence.beams[origin]
    if beam is None:
        raise AssertionError(f"a candidate extends the empty beam {origin}")
    return beam


def _finish(sentence: _Sentence, key: tuple[int, int], log_prob: float, eos_id: int, beam_size: int) -> None:
    """Add a finished hypothesis (its tokens, the new one included) if the sentence has a free slot."""
    if len(sentence.finished) >= beam_size:
        return
    origin, token = key
    tokens = (*_live(sentence, origin).tokens, token)
    complete = _live(sentence, origin).progress.advance(token).complete
    sentence.finished.append(_Finished(tokens, log_prob, token == eos_id, complete))


def _best(sentence: _Sentence, config: DecodeConfig) -> list[Hypothesis]:
    """Score a sentence's ended hypotheses; return the ``nbest`` best, those that met every term first."""
    if not sentence.finished:
        return []
    num_steps = torch.tensor([len(item.tokens) for item in sentence.finished])
    log_probs = torch.tensor([item.log_prob for item in sentence.finished], dtype=torch.float32)
    scores = normalise_scores(log_probs, num_steps, config)
    by_score = scores.argsort(descending=True, stable=True).tolist()
    order = sorted(by_score, key=lambda index: not sentence.finished[index].complete)[: config.nbest]
    hypotheses = []
    for index in order:
        item = sentence.finished[index]
        output = list(item.tokens[:-1]) if item.ends_with_eos else list(item.tokens)
        hypotheses.append(
            Hypothesis(
                tokens=output,
                score=float(scores[index]),
                log_prob=float(log_probs[index]),
                num_steps=len(item.tokens),
            )
        )
    return hypotheses


def check_term_search(config: DecodeConfig) -> None:
    """Refuse a search that cannot take target terms: greedy search, sampling and MBR.

    Parameters
    ----------
    config : DecodeConfig
        The search a glossary would be used with.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For ``beam_size`` 1, ``sampling`` or ``mbr``.

    Notes
    -----
    Dynamic beam allocation with one beam gives its one slot to the hypothesis that has met the most terms,
    so it would put every term first, whatever the sentence; a beam of 2 or more keeps a free slot.
    """
    if config.sampling or config.mbr or config.beam_size < 2:
        search = "sampling" if config.sampling else "MBR" if config.mbr else "greedy search (beam size 1)"
        raise ValueError(f"a glossary needs beam search with a beam size of 2 or more, not {search}")


def search_with_terms(
    make_step_model: Callable[[Sequence[Sequence[int]] | None], StepModel[Any]],
    src_tokens: Tensor,
    terms: Sequence[Sequence[Sequence[int]]],
    config: DecodeConfig,
    prefixes: Sequence[Sequence[int]] | None = None,
    word_continuations: Sequence[int] = (),
) -> list[list[Hypothesis]]:
    """Search a batch whose sentences may have target terms: the constrained search for those that have.

    Parameters
    ----------
    make_step_model : callable
        Builds the step model for a sub-batch, given per sentence the target ids its shortlist must hold
        (the terms' tokens), or None for the sentences without terms.
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source token ids, right-padded.
    terms : sequence of sequence of sequence of int
        Per sentence, its target phrases (empty for none).
    config : DecodeConfig
        A beam search (:func:`check_term_search`).
    prefixes : sequence of sequence of int, optional
        A forced target prefix per sentence.
    word_continuations : sequence of int
        Target ids forbidden right after a term (see :func:`constrained_beam_search`).

    Returns
    -------
    list of list of Hypothesis
        Per sentence in input order, its ``nbest`` hypotheses.

    Raises
    ------
    ValueError
        From :func:`check_term_search`, or when ``terms`` is not one list per sentence.

    Notes
    -----
    The sentences without terms take the plain batched search (:func:`~transformer.decoding.beam_search.search`),
    so a glossary costs nothing where it matches nothing, and those translations are the ones given without
    a glossary.
    """
    check_term_search(config)
    if len(terms) != src_tokens.size(0):
        raise ValueError(f"{len(terms)} term lists for {src_tokens.size(0)} sentences")
    with_terms = [row for row, phrases in enumerate(terms) if phrases]
    without = [row for row, phrases in enumerate(terms) if not phrases]
    results: list[list[Hypothesis]] = [[] for _ in terms]
    for rows, constrained in ((without, False), (with_terms, True)):
        if not rows:
            continue
        sub_tokens = src_tokens[torch.tensor(rows, device=src_tokens.device)]
        sub_prefixes = [prefixes[row] for row in rows] if prefixes else None
        if constrained:
            sub_terms = [terms[row] for row in rows]
            extra = [[token for phrase in phrases for token in phrase] for phrases in sub_terms]
            found = constrained_beam_search(
                make_step_model(extra), sub_tokens, sub_terms, config, sub_prefixes, word_continuations
            )
        else:
            found = search(make_step_model(None), sub_tokens, config, sub_prefixes)
        for row, hypotheses in zip(rows, found, strict=True):
            results[row] = hypotheses
    return results
