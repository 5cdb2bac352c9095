"""Splitting texts into sentences and joining translations back in the text's layout."""

import pytest

from transformer.serving.sentence_splitting import (
    TextPiece,
    join_translations,
    keep_as_one_sentence,
    split_into_sentences,
)


@pytest.mark.parametrize(
    "text",
    [
        "One. Two!  Three?",
        "  Leading and trailing spaces.  ",
        "Line one\nLine two without a stop\r\n\r\nAfter a blank line.\n",
        "Dr. Müller kommt um 9 Uhr. Er bringt z. B. Kuchen mit.",
        "",
        "\n\n",
    ],
)
def test_pieces_give_back_the_text_exactly(text: str) -> None:
    pieces = split_into_sentences(text, "de")
    assert "".join(piece.before + piece.sentence + piece.after for piece in pieces) == text
    assert all(piece.sentence == piece.sentence.strip() for piece in pieces)


def test_sentences_lines_and_abbreviations() -> None:
    text = "Dr. Smith went home. He slept.\nA title\n\nThe end."
    sentences = [piece.sentence for piece in split_into_sentences(text, "en") if piece.sentence]
    assert sentences == ["Dr. Smith went home.", "He slept.", "A title", "The end."]


def test_join_puts_translations_in_the_whitespace() -> None:
    text = "The cat sat.  The dog ran!\n\n Then\n"
    pieces = split_into_sentences(text, "en")
    assert join_translations(pieces, ["1", "2", "3"]) == "1  2\n\n 3\n"
    with pytest.raises(ValueError, match="2 translations for 3 sentences"):
        join_translations(pieces, ["1", "2"])
    assert join_translations([TextPiece(" ", "", "")], []) == " "


def test_an_already_split_item_is_one_sentence_with_its_whitespace() -> None:
    assert keep_as_one_sentence(" One. Two. ") == [TextPiece(" ", "One. Two.", " ")]
    assert keep_as_one_sentence("") == []
