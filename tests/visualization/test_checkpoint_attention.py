"""The checks ``transformer attention`` makes before it loads a model."""

from pathlib import Path

import pytest

from transformer.visualization.checkpoint_attention import (
    MAX_ATTENTION_CHARS,
    MAX_ATTENTION_WORDS,
    check_attention_text,
    draw_checkpoint_attention,
)


def test_a_sentence_of_the_limit_passes_and_one_word_more_is_named() -> None:
    check_attention_text(" ".join(["word"] * MAX_ATTENTION_WORDS), "--text")
    with pytest.raises(ValueError) as refused:
        check_attention_text(" ".join(["word"] * (MAX_ATTENTION_WORDS + 1)), "--target")
    assert str(refused.value) == (
        f"--target: {MAX_ATTENTION_WORDS + 1} words; attention maps are drawn for at most {MAX_ATTENTION_WORDS} "
        "words (the page grows with the square of the length)"
    )


def test_a_long_text_is_refused_before_the_checkpoint_is_read(tmp_path: Path) -> None:
    """2,100 words wrote a 362 MB page; the refusal comes first, so even a missing checkpoint is not reached."""
    with pytest.raises(ValueError) as refused:
        draw_checkpoint_attention(tmp_path / "missing", "word " * 2100, None, None, -1, tmp_path / "out")
    assert str(refused.value).startswith(
        "--text: 2,100 words; attention maps are drawn for at most 100 words"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_text_without_spaces_is_bounded_by_characters() -> None:
    # One "word" of 5,000 characters is thousands of pieces: the word limit alone let it through.
    check_attention_text("a" * MAX_ATTENTION_CHARS, "--text")
    with pytest.raises(
        ValueError, match=r"^--text: 5,000 characters; attention maps are drawn for at most 800 "
    ):
        check_attention_text("a" * 5000, "--text")
