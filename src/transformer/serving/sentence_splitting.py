"""Split a paragraph into sentences for separate batch rows, and put the translations back in its layout.

A model trained on sentence pairs (Multi30k, WMT) translates one sentence per row: a paragraph fed whole is
longer than anything it saw and is often cut short. The server therefore splits each text at its line
breaks, then each line into sentences with ``sentencex`` (Wikimedia's segmenter: rules for ~300 languages,
abbreviations included, no data downloaded at run time), and keeps the whitespace around every sentence so
the translations are joined back with the text's own spaces and line breaks.
"""

from dataclasses import dataclass

from sentencex import segment


@dataclass(frozen=True)
class TextPiece:
    """A sentence of a text with the whitespace around it, or whitespace alone.

    Parameters
    ----------
    before : str
        Whitespace (line breaks included) before the sentence.
    sentence : str
        The sentence, stripped; empty for a piece of whitespace only.
    after : str
        Whitespace after it.

    Notes
    -----
    ``before + sentence + after`` of every piece, in order, gives back the text exactly.
    """

    before: str
    sentence: str
    after: str


def split_into_sentences(text: str, language: str) -> list[TextPiece]:
    """Split a text into its lines and each line into sentences, keeping every whitespace character.

    Parameters
    ----------
    text : str
        Raw text: a sentence, a paragraph or several lines.
    language : str
        ISO 639 code of its language (the model's source language), e.g. "de"; unknown codes get
        ``sentencex``'s generic rules.

    Returns
    -------
    list of TextPiece
        In order; joining ``before + sentence + after`` of all gives ``text``.

    Notes
    -----
    Lines are split first, so a line break always ends a sentence even without a full stop (lists, titles,
    poetry). Should the segmenter ever return pieces that do not add up to the line, the line is kept as one
    sentence rather than losing or repeating text.
    """
    pieces: list[TextPiece] = []
    for line in text.splitlines(keepends=True):
        segments = [str(part) for part in segment(language, line)]
        if "".join(segments) != line:
            segments = [line]
        pieces.extend(_piece(part) for part in segments if part)
    return pieces


def keep_as_one_sentence(text: str) -> list[TextPiece]:
    """Treat a text as one sentence already split by the client, keeping its surrounding whitespace.

    Parameters
    ----------
    text : str
        One sentence (an item of a list sent to ``/v1/translate``).

    Returns
    -------
    list of TextPiece
        One piece, or none for an empty text.

    Notes
    -----
    The list form is for clients that split their text themselves (a corpus, one segment per line, as
    ``transformer translate`` reads a file): each item becomes exactly one batch row, never re-split.
    """
    return [_piece(text)] if text else []


def _piece(part: str) -> TextPiece:
    """Separate a segment into its leading whitespace, its sentence and its trailing whitespace."""
    sentence = part.strip()
    if not sentence:
        return TextPiece(part, "", "")
    start = part.index(sentence)
    return TextPiece(part[:start], sentence, part[start + len(sentence) :])


def join_translations(pieces: list[TextPiece], translations: list[str]) -> str:
    """Put translated sentences back into their text's whitespace.

    Parameters
    ----------
    pieces : list of TextPiece
        From :func:`split_into_sentences`.
    translations : list of str
        One translation per piece with a non-empty ``sentence``, in order.

    Returns
    -------
    str
        The text with each sentence replaced by its translation; line breaks and spaces where they were.

    Notes
    -----
    Raises ValueError when the number of translations does not match the number of sentences, which
    would otherwise pair sentences with the wrong translations.
    """
    sentences = [piece for piece in pieces if piece.sentence]
    if len(sentences) != len(translations):
        raise ValueError(f"{len(translations)} translations for {len(sentences)} sentences")
    remaining = iter(translations)
    return "".join(
        piece.before + (next(remaining) if piece.sentence else "") + piece.after for piece in pieces
    )
