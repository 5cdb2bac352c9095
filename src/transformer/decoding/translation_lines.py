"""The lines ``transformer translate`` writes: translations, with n-best indices, scores, confidences, alignments.

Columns are tab-separated, in this order, each only when asked for::

    [sentence index <TAB> rank score <TAB>]   with --nbest N > 1 (one line per candidate)
    [log-probability <TAB>]                   with --scores
    [confidence <TAB>]                        with --confidence (0-1: the tokens' geometric mean probability)
    translation
    [<TAB> alignment]                         with --alignments (Pharaoh "i-j", source word i, target word j)

The rank score is what orders the candidates: the length-normalised score, or the expected utility under
MBR decoding. The translation is the only column that may hold spaces, so the columns split on tabs.
"""

from collections.abc import Sequence

from transformer.decoding.alignment import format_pharaoh
from transformer.decoding.candidate import Candidate


def format_candidate(
    candidate: Candidate | None, scores: bool, alignments: bool, confidence: bool = False
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
    return "\t".join(columns)


def format_translations(
    results: Sequence[Sequence[Candidate]],
    nbest: bool,
    scores: bool,
    alignments: bool,
    confidence: bool = False,
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
            format_candidate(found[0] if found else None, scores, alignments, confidence) for found in results
        ]
    lines = []
    for index, found in enumerate(results):
        for candidate in found:
            rank = candidate.expected_utility if candidate.expected_utility is not None else candidate.score
            columns = format_candidate(candidate, scores, alignments, confidence)
            lines.append(f"{index}\t{rank:.4f}\t{columns}")
    return lines
