"""Retrying a sentence whose translation lost words: split it where the omission starts, translate the pieces.

A model that drops the end of a long sentence (the commonest omission) usually translates that end well on
its own. ``transformer serve --retry-omissions`` therefore, for each sentence whose best translation carries
an ``omission`` flag (:mod:`transformer.decoding.quality_flags`), translates the words before the unread span
and the words from it onwards as two sentences, joins the two translations, flags the joined output against
the whole source, and keeps it only when its omission is gone or shorter. Off by default: it costs a second
search for every flagged sentence and one more forced pass; ``/metrics`` counts the retries by outcome.
"""

import math
from collections.abc import Awaitable, Callable, Sequence

from transformer.decoding.candidate import Candidate, QualityFlag
from transformer.serving.worker_errors import QueueFullError, WorkerStoppedError


def omission_pieces(source: str, span: tuple[int, int]) -> list[str] | None:
    """Split a sentence's words where its omitted span starts (or ends, when it starts the sentence).

    Parameters
    ----------
    source : str
        The sentence as the model translated it.
    span : tuple of (int, int)
        The omission's half-open span of source words.

    Returns
    -------
    list of str or None
        Two pieces, each of at least one word; None when the span covers the whole sentence (nothing to split).

    Notes
    -----
    Words are whitespace words, as the flag counts them; the pieces are rejoined with single spaces.
    """
    words = source.split()
    start, end = span
    cut = start if start > 0 else end
    if not 0 < cut < len(words):
        return None
    return [" ".join(words[:cut]), " ".join(words[cut:])]


def joined_candidate(pieces: Sequence[Candidate], tokens: list[int], text: str) -> Candidate:
    """Join the best translations of a sentence's pieces into one candidate.

    Parameters
    ----------
    pieces : sequence of Candidate
        The best candidate of each piece, in order.
    tokens : list of int
        The joined output's token ids (the pieces' tokens in order).
    text : str
        The joined text.

    Returns
    -------
    Candidate
        Score and log-probability summed over the pieces; the confidence their tokens' geometric mean.

    Notes
    -----
    Each piece's confidence is weighed by its steps (its tokens and its EOS), so the joined confidence is the
    geometric mean over all the steps, as a single search's is. No alignment or flags: the caller adds flags.
    """
    steps = [len(piece.tokens) + 1 for piece in pieces]
    known = [piece.confidence for piece in pieces if piece.confidence is not None]
    confidence = None
    if len(known) == len(pieces):
        if min(known) <= 0.0:
            confidence = 0.0
        else:
            weighted = sum(math.log(value) * count for value, count in zip(known, steps, strict=True))
            confidence = math.exp(weighted / sum(steps))
    return Candidate(
        text,
        sum(piece.score for piece in pieces),
        sum(piece.log_prob for piece in pieces),
        tokens,
        confidence=confidence,
    )


def omitted_words(flags: Sequence[QualityFlag] | None) -> int:
    """Count the source content words an output's omission flag leaves unread.

    Parameters
    ----------
    flags : sequence of QualityFlag or None
        An output's flags.

    Returns
    -------
    int
        The omission's score (its uncovered content words); 0 without one.

    Notes
    -----
    What decides whether a retry is kept: fewer unread words than the first translation left.
    """
    for flag in flags or ():
        if flag.kind == "omission":
            return int(flag.score)
    return 0


async def retry_omissions(
    sentences: Sequence[str],
    candidates: list[list[Candidate]],
    sources: list[list[int]],
    translate: Callable[[list[str]], Awaitable[list[list[Candidate]]]],
    add_flags: Callable[[list[list[Candidate]], list[list[int]]], Awaitable[list[list[Candidate]]]],
) -> tuple[list[list[Candidate]], dict[str, int]]:
    """Retry every sentence whose best candidate is flagged as an omission; keep what leaves fewer words unread.

    Parameters
    ----------
    sentences : sequence of str
        The source sentences.
    candidates : list of list of Candidate
        Per sentence, its flagged candidates, best first.
    sources : list of list of int
        Per sentence, its source token ids (what the joined retry is flagged against).
    translate : callable
        Translates a list of texts as sentences of their own: per text, its candidates (best first).
    add_flags : callable
        Flags candidates against their sources, as the first translations were flagged.

    Returns
    -------
    tuple of (list of list of Candidate, dict of str to int)
        The candidates, the retried best replaced where the retry won (the others keep their places), and the
        count of flagged sentences by outcome: ``replaced`` or ``kept`` (retried), ``unsplit`` (the omission
        covers the whole sentence: nothing to split), ``skipped`` (the queue had no room for the pieces).

    Notes
    -----
    All flagged sentences' pieces are translated in one call and their joins flagged in one pass. A retry whose
    piece found no translation is counted as kept. A full queue never fails the request: the first
    translations are answered.
    """
    retried, unsplittable = [], 0
    for index, (sentence, found) in enumerate(zip(sentences, candidates, strict=True)):
        flags = found[0].flags or () if found else ()
        span = next((flag.source_span for flag in flags if flag.kind == "omission"), None)
        pieces = omission_pieces(sentence, span) if span is not None else None
        if pieces is not None:
            retried.append((index, pieces))
        elif span is not None:
            unsplittable += 1
    outcomes = {"replaced": 0, "kept": len(retried), "unsplit": unsplittable}
    if not retried:
        return candidates, outcomes
    try:
        translated = iter(await translate([piece for _, pieces in retried for piece in pieces]))
    except (QueueFullError, WorkerStoppedError):  # no room for the pieces now: the first translations stand
        return candidates, {"replaced": 0, "kept": 0, "unsplit": unsplittable, "skipped": len(retried)}
    joined = []
    for index, pieces in retried:
        firsts = [found[0] for found in (next(translated) for _ in pieces) if found]
        if len(firsts) == len(pieces):
            tokens = [token for first in firsts for token in first.tokens]
            joined.append((index, joined_candidate(firsts, tokens, " ".join(first.text for first in firsts))))
    flagged = await add_flags(
        [[candidate] for _, candidate in joined], [sources[index] for index, _ in joined]
    )
    result = list(candidates)
    for (index, _), [retry] in zip(joined, flagged, strict=True):
        if omitted_words(retry.flags) < omitted_words(candidates[index][0].flags):
            result[index] = [retry, *candidates[index][1:]]
            outcomes["replaced"] += 1
            outcomes["kept"] -= 1
    return result, outcomes
