"""The lines ``transformer translate`` writes: translations, with n-best indices, scores, confidences, alignments, flags.

Columns are tab-separated, in this order, each only when asked for::

    [sentence index <TAB> rank score <TAB>]   with --nbest N > 1 (one line per candidate)
    [log-probability <TAB>]                   with --scores
    [confidence <TAB>]                        with --confidence (0-1: the tokens' geometric mean probability)
    translation
    [<TAB> alignment]                         with --alignments (Pharaoh "i-j", source word i, target word j)
    [<TAB> flags]                             with --flags ("omission:src[3:6];repetition:tgt[6:12]", or empty)

The rank score is what orders the candidates: the length-normalised score, or the expected utility under
MBR decoding. The translation is the only column that may hold spaces, so the columns split on tabs.
"""

from collections.abc import Sequence

from transformer.decoding.alignment import format_pharaoh
from transformer.decoding.candidate import Candidate, QualityFlag


def format_flags(flags: Sequence[QualityFlag]) -> str:
    """Write a candidate's quality flags as one column without spaces.

    Parameters
    ----------
    flags : sequence of QualityFlag
        The flags that fired (:mod:`~transformer.decoding.quality_flags`).

    Returns
    -------
    str
        ``kind:side[start:end]`` per flag joined by ``;`` (``omission:src[3:6];repetition:tgt[6:12]``); empty
        when none fired.

    Notes
    -----
    Spans are half-open word indices from 0, as Python slices the sentence's ``split()``: ``src[3:6]`` is source
    words 3, 4 and 5. The scores stay in the Python API and the server's JSON; a column keeps what a user acts on.
    """
    items = []
    for flag in flags:
        side, span = ("src", flag.source_span) if flag.source_span is not None else ("tgt", flag.target_span)
        items.append(f"{flag.kind}:{side}[{span[0]}:{span[1]}]" if span is not None else flag.kind)
    return ";".join(items)


def format_candidate(
    candidate: Candidate | None, scores: bool, alignments: bool, confidence: bool = False, flags: bool = False
) -> str:
    """Write one candidate's log-probability, confidence, text and alignment columns.

    Parameters
    ----------
    candidate : Candidate or None
        The candidate; None for a sentence with none (an empty input), whose columns are left empty.
    scores : bool
        Start with the log-probability (4 decimals).
    alignments : bool
        End with the Pharaoh alignment.
    confidence : bool
        Write the confidence (4 decimals) before the text.
    flags : bool
        End with the quality flags (:func:`format_flags`).

    Returns
    -------
    str
        The columns joined by tabs.

    Notes
    -----
    Empty columns keep a line's column count the same for every sentence, so ``cut -f`` works.
    """
    columns = []
    if scores:
        columns.append(f"{candidate.log_prob:.4f}" if candidate is not None else "")
    if confidence:
        known = candidate is not None and candidate.confidence is not None
        columns.append(f"{candidate.confidence:.4f}" if known else "")  # type: ignore[union-attr]
    columns.append(candidate.text if candidate is not None else "")
    if alignments:
        columns.append(format_pharaoh(candidate.alignment or []) if candidate is not None else "")
    if flags:
        columns.append(format_flags(candidate.flags or ()) if candidate is not None else "")
    return "\t".join(columns)


def format_translations(
    results: Sequence[Sequence[Candidate]],
    nbest: bool,
    scores: bool,
    alignments: bool,
    confidence: bool = False,
    flags: bool = False,
) -> list[str]:
    """Write translations as output lines (see the module docstring for the columns).

    Parameters
    ----------
    results : sequence of sequence of Candidate
        Per input sentence, its candidates, best first (:meth:`Translator.translate_nbest`).
    nbest : bool
        One line per candidate, led by the sentence index (from 0) and its rank score; else one line per
        sentence with its best candidate.
    scores : bool
        Add the log-probability column.
    alignments : bool
        Add the alignment column.
    confidence : bool
        Add the confidence column.
    flags : bool
        Add the flags column.

    Returns
    -------
    list of str
        The lines, without line ends.

    Notes
    -----
    In n-best mode a sentence with no candidate writes no line (its index is simply missing), as before;
    otherwise it writes an empty translation so line i stays sentence i.
    """
    if not nbest:
        return [
            format_candidate(found[0] if found else None, scores, alignments, confidence, flags)
            for found in results
        ]
    lines = []
    for index, found in enumerate(results):
        for candidate in found:
            rank = candidate.expected_utility if candidate.expected_utility is not None else candidate.score
            columns = format_candidate(candidate, scores, alignments, confidence, flags)
            lines.append(f"{index}\t{rank:.4f}\t{columns}")
    return lines
