"""HTML fragments: text nodes out, translations back in, markup unchanged."""

import pytest

from transformer.serving.html_text import HtmlPiece, join_html, split_html


def test_markup_is_kept_and_text_nodes_replaced() -> None:
    fragment = (
        '<!DOCTYPE html><p class="x">Hello <b>dear</b> world.</p><!-- note -->'
        "<script>if (a < b) {}</script><br/>Tom &amp; Jerry \n<style>p{}</style>"
    )
    pieces = split_html(fragment)
    assert [piece.text for piece in pieces if not piece.markup] == [
        "Hello ",
        "dear",
        " world.",
        "Tom & Jerry \n",
    ]
    assert join_html(pieces, [piece.text for piece in pieces if not piece.markup]) == fragment
    translated = join_html(pieces, ["Hallo ", "liebe", " Welt.", "Tom <&> Jerry"])
    assert translated == (
        '<!DOCTYPE html><p class="x">Hallo <b>liebe</b> Welt.</p><!-- note -->'
        "<script>if (a < b) {}</script><br/>Tom &lt;&amp;&gt; Jerry<style>p{}</style>"
    )


def test_whitespace_only_text_is_markup_and_counts_are_checked() -> None:
    pieces = split_html("<ul>\n  <li>One</li>\n</ul>")
    assert [piece for piece in pieces if not piece.markup] == [HtmlPiece("", "One")]
    with pytest.raises(ValueError, match="2 translations for 1 text nodes"):
        join_html(pieces, ["a", "b"])
