"""Translations of HTML texts from the server's translations of their runs: tags put back, ranks kept.

The server's side of :mod:`transformer.serving.inline_markup`: a run of text is translated like any text (split
into sentences, each aligned), so its word alignment is its sentences' alignments laid end to end.
"""

import dataclasses
from collections.abc import Sequence

from transformer.serving.inline_markup import MarkupRun, rebuild_fragment, translate_run_markup
from transformer.serving.translation_service import TextTranslation


def text_alignment(result: TextTranslation, rank: int = 0) -> tuple[str, list[tuple[int, int]]]:
    """Give the translation of one run of text (at an n-best rank) and its word alignment to the run.

    Parameters
    ----------
    result : TextTranslation
        The run's translation, made with alignments (``alignment_layer``).
    rank : int
        0 for the best translation, r for the r-th alternative (a sentence with fewer candidates gives its best).

    Returns
    -------
    tuple of (str, list of (int, int))
        The text and its (run word, target word) pairs: each sentence's pairs shifted by the words before it.

    Notes
    -----
    Sentences split the run at whitespace, so the run's words are its sentences' words in order, and the
    joined translation's words its sentences' translations'. Where that does not hold (a count differs), the
    pairs are a monotone proportional alignment instead, so the tags land near their place and no text is lost.
    """
    text = result.text if rank == 0 else result.alternatives[rank - 1]
    pairs: list[tuple[int, int]] = []
    source_offset = target_offset = 0
    for sentence in result.sentences:
        candidate = (
            sentence.candidates[min(rank, len(sentence.candidates) - 1)] if sentence.candidates else None
        )
        if candidate is not None:
            shift = [(source_offset + i, target_offset + j) for i, j in candidate.alignment or []]
            pairs += shift
            target_offset += len(candidate.text.split())
        source_offset += len(sentence.source.split())
    if target_offset != len(text.split()):
        source_count, target_count = source_offset, len(text.split())
        pairs = [
            (i, min(target_count - 1, i * target_count // max(1, source_count))) for i in range(source_count)
        ]
    return text, pairs


def rebuild_text_markup(
    runs: Sequence[MarkupRun], translated: Sequence[tuple[MarkupRun, TextTranslation]], rank: int = 0
) -> str:
    """Rebuild one HTML text from its runs and their translations, tags put back.

    Parameters
    ----------
    runs : sequence of MarkupRun
        The text's runs (:func:`parse_runs`).
    translated : sequence of (MarkupRun, TextTranslation)
        Each run of text with its translation (made with alignments).
    rank : int
        Which n-best rank to write (0: the best).

    Returns
    -------
    str
        The translated HTML.

    Notes
    -----
    What LibreTranslate's ``format: html``, ``/v1/translate``'s ``format: "html"`` and ``translate --format
    html`` answer.
    """
    pieces = []
    for run, result in translated:
        target_text, alignment = text_alignment(result, rank)
        pieces.append(translate_run_markup(run, target_text, alignment))
    return rebuild_fragment(runs, pieces)


def html_results(
    runs_per_text: Sequence[Sequence[MarkupRun]], results: Sequence[TextTranslation], keep_alignments: bool
) -> list[TextTranslation]:
    """Regroup the translations of runs into one translation per HTML text, its tags put back.

    Parameters
    ----------
    runs_per_text : sequence of sequence of MarkupRun
        Each text's runs.
    results : sequence of TextTranslation
        One per run of text, in :func:`run_texts`' order, made with alignments.
    keep_alignments : bool
        Keep the sentences' alignments (the client asked for them), else drop them.

    Returns
    -------
    list of TextTranslation
        Per text: its HTML, its runs' sentences in order, and its alternatives rebuilt as HTML too.

    Notes
    -----
    The alternatives are the n-best ranks of every run, each rebuilt through its own alignment.
    """
    remaining = iter(results)
    regrouped = []
    for runs in runs_per_text:
        translated = [(run, next(remaining)) for run in runs if not run.markup]
        ranks = max((len(result.alternatives) for _, result in translated), default=0)
        sentences = [sentence for _, result in translated for sentence in result.sentences]
        if not keep_alignments:
            sentences = [
                dataclasses.replace(
                    s, candidates=[dataclasses.replace(c, alignment=None) for c in s.candidates]
                )
                for s in sentences
            ]
        regrouped.append(
            TextTranslation(
                rebuild_text_markup(runs, translated),
                sentences,
                [rebuild_text_markup(runs, translated, rank) for rank in range(1, ranks + 1)],
            )
        )
    return regrouped
