"""The JSON of ``POST /v1/translate``'s answer: sentences, n-best candidates, flags and timing."""

from typing import Any

from transformer.decoding.alignment import format_pharaoh
from transformer.decoding.candidate import Candidate, QualityFlag
from transformer.serving.translation_service import TextTranslation, elapsed_ms


def sentences_json(result: TextTranslation) -> list[dict[str, Any]]:
    """Describe a text's sentences as ``/v1/translate`` answers them.

    Parameters
    ----------
    result : TextTranslation
        One text's translation.

    Returns
    -------
    list of dict
        Per sentence: ``source``, ``translation``, ``score``, ``log_prob``, ``confidence``, ``nbest``, and
        ``alignment`` and ``flags`` when computed.

    Notes
    -----
    A sentence with no candidate has an empty translation and null scores.
    """
    return [
        {
            "source": sentence.source,
            "translation": sentence.candidates[0].text if sentence.candidates else "",
            "score": sentence.candidates[0].score if sentence.candidates else None,
            "log_prob": sentence.candidates[0].log_prob if sentence.candidates else None,
            "confidence": sentence.candidates[0].confidence if sentence.candidates else None,
            "nbest": [candidate_json(item) for item in sentence.candidates],
            **(
                {"alignment": format_pharaoh(sentence.candidates[0].alignment or [])}
                if sentence.candidates and sentence.candidates[0].alignment is not None
                else {}
            ),
            **(
                {"flags": flags_json(sentence.candidates[0].flags)}
                if sentence.candidates and sentence.candidates[0].flags is not None
                else {}
            ),
        }
        for sentence in result.sentences
    ]


def flags_json(flags: tuple[QualityFlag, ...]) -> list[dict[str, Any]]:
    """Describe quality flags as JSON.

    Parameters
    ----------
    flags : tuple of QualityFlag
        A candidate's flags.

    Returns
    -------
    list of dict
        ``kind``, ``score``, ``source_span`` and ``target_span`` (half-open ``[start, end]`` word spans or null).

    Notes
    -----
    An empty list: checked, nothing fired (a missing ``flags`` field: not asked for).
    """
    return [
        {
            "kind": flag.kind,
            "score": flag.score,
            "source_span": list(flag.source_span) if flag.source_span is not None else None,
            "target_span": list(flag.target_span) if flag.target_span is not None else None,
        }
        for flag in flags
    ]


def candidate_json(candidate: Candidate) -> dict[str, Any]:
    """Describe one n-best candidate as JSON.

    Parameters
    ----------
    candidate : Candidate
        The candidate.

    Returns
    -------
    dict
        ``translation``, ``score``, ``log_prob``, ``confidence``; ``expected_utility``, ``alignment`` and
        ``flags`` when set.

    Notes
    -----
    Alignments are written in Pharaoh's ``i-j`` form, as ``translate --alignments`` prints them.
    """
    fields: dict[str, Any] = {
        "translation": candidate.text,
        "score": candidate.score,
        "log_prob": candidate.log_prob,
        "confidence": candidate.confidence,
    }
    if candidate.expected_utility is not None:
        fields["expected_utility"] = candidate.expected_utility
    if candidate.alignment is not None:
        fields["alignment"] = format_pharaoh(candidate.alignment)
    if candidate.flags is not None:
        fields["flags"] = flags_json(candidate.flags)
    return fields


def timing_json(results: list[TextTranslation], start: float) -> dict[str, float]:
    """Describe a request's timing as JSON.

    Parameters
    ----------
    results : list of TextTranslation
        The request's translations.
    start : float
        ``time.perf_counter()`` when the request arrived.

    Returns
    -------
    dict of str to float
        ``total_ms``, and the slowest sentence's ``queue_ms`` and ``decode_ms``.

    Notes
    -----
    The slowest sentence is what the client waited for.
    """
    timings = [sentence.timing for result in results for sentence in result.sentences]
    return {
        "total_ms": elapsed_ms(start),
        "queue_ms": round(max((item.queued for item in timings), default=0.0) * 1000.0, 2),
        "decode_ms": round(max((item.decoding for item in timings), default=0.0) * 1000.0, 2),
    }
