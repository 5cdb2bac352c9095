"""Split an HTML fragment into markup and text nodes, so the text is translated and the markup kept as it was.

LibreTranslate's ``format: html`` asks for the markup to survive translation. The models here are trained on
plain sentences, so each text node (the text between two tags) is translated on its own and put back
between the same tags, escaped again; tags, attributes, comments and the contents of ``<script>`` and
``<style>`` are copied unchanged. The price: a sentence cut by inline markup ("The <b>dog</b> runs.") is
translated in pieces.
"""

import html
from dataclasses import dataclass
from html.parser import HTMLParser

#: Elements whose content is code, not text to translate.
RAW_TEXT_ELEMENTS = frozenset({"script", "style"})


@dataclass(frozen=True)
class HtmlPiece:
    """A run of markup, or a text node.

    Parameters
    ----------
    markup : str
        Markup copied as it was (empty for a text node).
    text : str
        A text node's text, unescaped (empty for markup).

    Notes
    -----
    A text node holding only whitespace is kept as markup: nothing to translate.
    """

    markup: str
    text: str


class _Splitter(HTMLParser):
    """Collect markup and text nodes in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[HtmlPiece] = []
        self.raw_depth = 0

    def _markup(self, markup: str) -> None:
        self.pieces.append(HtmlPiece(markup, ""))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._markup(self.get_starttag_text() or "")
        self.raw_depth += tag in RAW_TEXT_ELEMENTS

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._markup(self.get_starttag_text() or "")

    def handle_endtag(self, tag: str) -> None:
        self._markup(f"</{tag}>")
        self.raw_depth = max(0, self.raw_depth - (tag in RAW_TEXT_ELEMENTS))

    def handle_data(self, data: str) -> None:
        if self.raw_depth or not data.strip():
            self._markup(data if self.raw_depth else html.escape(data, quote=False))
        else:
            self.pieces.append(HtmlPiece("", data))

    def handle_comment(self, data: str) -> None:
        self._markup(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self._markup(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self._markup(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:
        self._markup(f"<![{data}]>")


def split_html(fragment: str) -> list[HtmlPiece]:
    """Split an HTML fragment into markup and text nodes.

    Parameters
    ----------
    fragment : str
        HTML, e.g. ``"<p>Hello <b>world</b>.</p>"``.

    Returns
    -------
    list of HtmlPiece
        In document order; :func:`join_html` with each text kept gives the fragment back (up to how
        character references are written: ``&#39;`` comes back as ``'``, ``&lt;`` stays ``&lt;``).

    Notes
    -----
    Python's :class:`html.parser.HTMLParser` is lenient: unclosed tags and stray ``<`` are passed through,
    never refused.
    """
    splitter = _Splitter()
    splitter.feed(fragment)
    splitter.close()
    return splitter.pieces


def join_html(pieces: list[HtmlPiece], translations: list[str]) -> str:
    """Rebuild the fragment with each text node replaced by its translation.

    Parameters
    ----------
    pieces : list of HtmlPiece
        From :func:`split_html`.
    translations : list of str
        One per text node, in order, as plain text (escaped here).

    Returns
    -------
    str
        The translated fragment, markup unchanged.

    Notes
    -----
    Raises ValueError when the number of translations is not the number of text nodes.
    """
    texts = [piece for piece in pieces if not piece.markup]
    if len(texts) != len(translations):
        raise ValueError(f"{len(translations)} translations for {len(texts)} text nodes")
    remaining = iter(translations)
    return "".join(piece.markup or html.escape(next(remaining), quote=False) for piece in pieces)
