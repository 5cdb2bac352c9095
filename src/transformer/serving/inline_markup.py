"""HTML whose inline tags survive translation: each sentence translated once, its tags put back by alignment.

"The <b>dog</b> sleeps." is one text to translate, "The dog sleeps.", with a ``<b>`` around its word 1. After
translation ("Der Hund schläft."), the word alignment (source word 1 to target word 1) carries the tag over:
"Der <b>Hund</b> schläft.". The fragment is cut into *runs*: the text between two block-level boundaries
(``<p>``, ``<div>``, ``<li>``, ``<td>``, headings, comments, ``<script>``/``<style>``, and the like), with the
inline elements inside it (``<b>``, ``<a href=...>``, ``<span>``, ...) recorded as character spans of the
run's plain text, and void ones (``<br>``, ``<img>``) as points. Markup between runs is copied unchanged.

Putting a tag back (:func:`project_tags`): the source words it covers, their aligned target words, and the
smallest span holding them. Spans are then made to nest as the source's did: a child is clipped to its parent's
span, a sibling starts no earlier than the one before it ends; a tag with no aligned word (and a void one)
goes after the translation of the source word before it, or, with nothing aligned there either, where its
source position falls proportionally, as an empty element. The text is the translation's, escaped,
whatever the tags do, so no text is lost; every tag opened is closed in the same run, so the output is
balanced even where the input was not (an unclosed inline tag is closed at the end of its run and opened
again in the next; a stray end tag is dropped).
"""

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser

#: Elements that sit inside a sentence: kept around the words they cover.
INLINE_ELEMENTS = frozenset(
    [
        "a",
        "abbr",
        "b",
        "bdi",
        "bdo",
        "cite",
        "code",
        "data",
        "del",
        "dfn",
        "em",
        "font",
        "i",
        "ins",
        "kbd",
        "mark",
        "q",
        "s",
        "samp",
        "small",
        "span",
        "strike",
        "strong",
        "sub",
        "sup",
        "time",
        "tt",
        "u",
        "var",
    ]
)
#: Inline elements without content: kept at a point between words. (``<br>`` is a boundary between runs: it
#: ends a line, so the text on each side is translated on its own.)
INLINE_VOID_ELEMENTS = frozenset({"img", "wbr"})
#: Elements whose content is code, not text to translate.
RAW_TEXT_ELEMENTS = frozenset({"script", "style"})


@dataclass(frozen=True)
class InlineTag:
    """An inline element of a run, as a span of the run's plain text.

    Parameters
    ----------
    start, end : int
        Character offsets of its content in the run's text (equal for a void element).
    open, close : str
        Its start tag as written and its end tag (``""`` for a void element).
    depth : int
        Inline elements around it (0: none).
    parent : int or None
        The index (in the run's ``tags``) of the inline element holding it, or None.

    Notes
    -----
    Tags are listed in document order (a parent before its children).
    """

    start: int
    end: int
    open: str
    close: str
    depth: int
    parent: int | None


@dataclass(frozen=True)
class MarkupRun:
    """A piece of the fragment: markup copied as it is, or a run of text with its inline tags.

    Parameters
    ----------
    markup : str
        Markup (escaped as written); empty for a run of text.
    text : str
        The run's plain text, unescaped; empty for markup.
    tags : tuple of InlineTag
        The inline elements inside the text.

    Notes
    -----
    A run of whitespace alone is markup: nothing to translate.
    """

    markup: str
    text: str = ""
    tags: tuple[InlineTag, ...] = ()


class _RunParser(HTMLParser):
    """Cut a fragment into markup and runs of text with inline tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[MarkupRun] = []
        self.text: list[str] = []
        self.tags: list[InlineTag] = []
        self.open_tags: list[tuple[int, str, str]] = []  # (index in tags, tag name, start tag) still open
        self.reopened: set[int] = set()  # tags opened again after a boundary (dropped if they get no text)
        self.raw_depth = 0

    def _length(self) -> int:
        return sum(map(len, self.text))

    def flush(self, final: bool = False) -> None:
        """End the run: close what is open at its end, to be opened again in the next run unless ``final``."""
        reopen = [] if final else [(name, start_tag) for _, name, start_tag in self.open_tags]
        for index, _, _ in self.open_tags:
            self.tags[index] = _with_end(self.tags[index], self._length())
        text = "".join(self.text)
        if text.strip():
            self.pieces.append(MarkupRun("", text, tuple(self.tags)))
        else:
            kept = [tag for index, tag in enumerate(self.tags) if index not in self.reopened]
            if text or kept:
                self.pieces.append(MarkupRun(_plain_markup(text, kept)))
        self.text, self.tags, self.open_tags, self.reopened = [], [], [], set()
        for name, start_tag in reopen:
            self._open(name, start_tag)
            self.reopened.add(len(self.tags) - 1)

    def _open(self, name: str, start_tag: str) -> None:
        parent = self.open_tags[-1][0] if self.open_tags else None
        self.tags.append(InlineTag(self._length(), -1, start_tag, f"</{name}>", len(self.open_tags), parent))
        self.open_tags.append((len(self.tags) - 1, name, start_tag))

    def _markup(self, markup: str) -> None:
        self.flush()
        self.pieces.append(MarkupRun(markup))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        start_tag = self.get_starttag_text() or f"<{tag}>"
        if self.raw_depth:
            self.pieces.append(MarkupRun(start_tag))
        elif tag in INLINE_VOID_ELEMENTS:
            self.handle_startendtag(tag, attrs)
        elif tag in INLINE_ELEMENTS:
            self._open(tag, start_tag)
        else:
            self._markup(start_tag)
            self.raw_depth += tag in RAW_TEXT_ELEMENTS

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        start_tag = self.get_starttag_text() or f"<{tag}/>"
        if self.raw_depth or not (tag in INLINE_VOID_ELEMENTS or tag in INLINE_ELEMENTS):
            self._markup(start_tag)
            return
        parent = self.open_tags[-1][0] if self.open_tags else None
        here = self._length()
        if tag in INLINE_VOID_ELEMENTS:
            self.tags.append(InlineTag(here, here, start_tag, "", len(self.open_tags), parent))
        else:  # "<b/>": an empty element at this point, written as browsers read it
            opening = re.sub(r"\s*/>$", ">", start_tag)
            self.tags.append(InlineTag(here, here, opening, f"</{tag}>", len(self.open_tags), parent))

    def handle_endtag(self, tag: str) -> None:
        if tag in INLINE_VOID_ELEMENTS and not self.raw_depth:
            return  # "<img ...></img>": the element ended at its start tag
        if tag in INLINE_ELEMENTS and not self.raw_depth:
            names = [name for _, name, _ in self.open_tags]
            if tag not in names:
                return  # a stray end tag: dropped, so the output stays balanced
            while self.open_tags:  # close up to it (tags left open inside it end here too)
                index, name, _ = self.open_tags.pop()
                self.tags[index] = _with_end(self.tags[index], self._length())
                if name == tag:
                    break
            return
        if self.raw_depth and tag in RAW_TEXT_ELEMENTS:
            self.raw_depth -= 1
            self.pieces.append(MarkupRun(f"</{tag}>"))
        elif self.raw_depth:
            self.pieces.append(MarkupRun(f"</{tag}>"))
        else:
            self._markup(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if self.raw_depth:
            self.pieces.append(MarkupRun(data))
        else:
            self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self._markup(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self._markup(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self._markup(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:
        self._markup(f"<![{data}]>")


def _with_end(tag: InlineTag, end: int) -> InlineTag:
    return InlineTag(tag.start, end, tag.open, tag.close, tag.depth, tag.parent)


def _plain_markup(text: str, tags: Sequence[InlineTag]) -> str:
    """Write a run with no words back as it was: its whitespace and its tags in place."""
    return render(text, [(tag, tag.start, tag.end) for tag in tags], escape_words=True, by_characters=True)


def parse_runs(fragment: str) -> list[MarkupRun]:
    """Cut an HTML fragment into markup and runs of text with their inline tags.

    Parameters
    ----------
    fragment : str
        HTML, e.g. ``"<p>The <b>dog</b> sleeps.</p>"``.

    Returns
    -------
    list of MarkupRun
        In document order: ``[<p>, run "The dog sleeps." with <b> at 4-7, </p>]``.

    Notes
    -----
    Python's lenient :class:`html.parser.HTMLParser` reads it: broken HTML is never refused. Character
    references are decoded in the text (and escaped again on output).
    """
    parser = _RunParser()
    parser.feed(fragment)
    parser.close()
    parser.flush(final=True)
    return parser.pieces


def _words(text: str) -> list[tuple[int, int]]:
    return [(match.start(), match.end()) for match in re.finditer(r"\S+", text)]


def project_tags(
    run: MarkupRun, target_text: str, alignment: Sequence[tuple[int, int]]
) -> list[tuple[InlineTag, int, int]]:
    """Place a run's inline tags on its translation's words.

    Parameters
    ----------
    run : MarkupRun
        The source run.
    target_text : str
        Its translation (plain text).
    alignment : sequence of (int, int)
        (source word, target word) pairs over the run's and the translation's whitespace words.

    Returns
    -------
    list of (InlineTag, int, int)
        Each tag with its half-open span of target words (equal ends: an empty element, or a void one, at
        that word position), nested as the source's tags are.

    Notes
    -----
    Tags are placed in document order, so a parent's span is known before its children are clipped into it.
    A void element goes after the last target word aligned to the source word before it.
    """
    source_words, target_count = _words(run.text), len(_words(target_text))
    aligned: dict[int, list[int]] = {}
    for source, target in alignment:
        if 0 <= target < target_count:
            aligned.setdefault(source, []).append(target)
    placed: list[tuple[InlineTag, int, int]] = []
    sibling_end: dict[int | None, int] = {}
    for tag in run.tags:
        low, high = (0, target_count) if tag.parent is None else placed[tag.parent][1:]
        covered = [i for i, (start, end) in enumerate(source_words) if start < tag.end and end > tag.start]
        targets = [j for i in covered for j in aligned.get(i, [])]
        before = sum(1 for _, end in source_words if end <= tag.start)  # source words before the tag
        if tag.close and tag.end > tag.start and targets:
            start, end = min(targets), max(targets) + 1
        elif before and aligned.get(before - 1):  # a point: after the translation of the word before it
            start = end = max(aligned[before - 1]) + 1
        else:  # nothing to go by: where its source position falls, proportionally
            start = end = round(before * target_count / max(1, len(source_words)))
        start = max(start, low, sibling_end.get(tag.parent, low))
        end = min(max(end, start), high)
        start = min(start, end)
        sibling_end[tag.parent] = end
        placed.append((tag, start, end))
    return placed


def render(
    text: str,
    placed: Sequence[tuple[InlineTag, int, int]],
    escape_words: bool = True,
    by_characters: bool = False,
) -> str:
    """Write text with tags around its words (or characters), escaped.

    Parameters
    ----------
    text : str
        Plain text.
    placed : sequence of (InlineTag, int, int)
        Tags with their half-open spans, of words (or of character offsets with ``by_characters``).
    escape_words : bool
        Escape the text (always, for HTML output).
    by_characters : bool
        Spans count characters rather than words.

    Returns
    -------
    str
        The HTML: at each position, the closing tags of spans ending there (innermost first), then empty
        and void elements, then the opening tags of spans starting there (outermost first).

    Notes
    -----
    Balanced whenever the spans nest, which :func:`project_tags` ensures.
    """
    units = [(i, i + 1) for i in range(len(text))] if by_characters else _words(text)
    positions = [start for start, _ in units] + [len(text)]
    pieces, cursor = [], 0
    for position in range(len(units) + 1):
        where = positions[position]
        if position > 0:
            pieces.append(_escape(text[cursor : units[position - 1][1]], escape_words))
            cursor = units[position - 1][1]
            closing = [(tag, start, end) for tag, start, end in placed if end == position and start < end]
            pieces += [tag.close for tag, _, _ in sorted(closing, key=lambda item: -item[0].depth)]
        pieces.append(_escape(text[cursor:where], escape_words))
        cursor = where
        points = [tag for tag, start, end in placed if start == end == position]
        pieces += [tag.open + tag.close for tag in points]
        opening = [(tag, start, end) for tag, start, end in placed if start == position and start < end]
        pieces += [tag.open for tag, _, _ in sorted(opening, key=lambda item: item[0].depth)]
    pieces.append(_escape(text[cursor:], escape_words))
    return "".join(pieces)


def _escape(text: str, escape: bool) -> str:
    return html.escape(text, quote=False) if escape else text


def translate_run_markup(run: MarkupRun, target_text: str, alignment: Sequence[tuple[int, int]]) -> str:
    """Write a run's translation as HTML with the run's inline tags put back.

    Parameters
    ----------
    run : MarkupRun
        The source run.
    target_text : str
        Its translation.
    alignment : sequence of (int, int)
        Word alignment between the run and the translation.

    Returns
    -------
    str
        The translated HTML of the run.

    Notes
    -----
    The text written is ``target_text`` whole, escaped; only the tags' places depend on the alignment.
    """
    return render(target_text, project_tags(run, target_text, alignment))


def rebuild_fragment(runs: Sequence[MarkupRun], translated: Sequence[str]) -> str:
    """Join a fragment's markup and its runs' translated HTML in order.

    Parameters
    ----------
    runs : sequence of MarkupRun
        From :func:`parse_runs`.
    translated : sequence of str
        One per run of text, in order (from :func:`translate_run_markup`).

    Returns
    -------
    str
        The translated fragment.

    Notes
    -----
    Raises ValueError when the count of translations is not the count of runs of text.
    """
    texts = [run for run in runs if not run.markup]
    if len(texts) != len(translated):
        raise ValueError(f"{len(translated)} translations for {len(texts)} runs of text")
    remaining = iter(translated)
    return "".join(run.markup or next(remaining) for run in runs)


def run_texts(runs_per_text: Sequence[Sequence[MarkupRun]]) -> list[str]:
    """List the runs of text of several HTML texts, in order: what is translated.

    Parameters
    ----------
    runs_per_text : sequence of sequence of MarkupRun
        Each text's runs (:func:`parse_runs`).

    Returns
    -------
    list of str
        The plain text of every run of text.

    Notes
    -----
    :func:`html_results` takes their translations back in this order.
    """
    return [run.text for runs in runs_per_text for run in runs if not run.markup]
