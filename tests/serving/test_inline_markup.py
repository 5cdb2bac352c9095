"""Inline markup across a sentence: runs and their tags, tags put back through an alignment, and a table of
HTML (nested, attributes, void elements, entities, comments, broken) that never loses text and always balances."""

import html
import random
import re
from html.parser import HTMLParser

import pytest

from transformer.serving.inline_markup import (
    INLINE_ELEMENTS,
    MarkupRun,
    parse_runs,
    project_tags,
    rebuild_fragment,
    render,
    translate_run_markup,
)


def identity(runs: list[MarkupRun], upper: bool = True) -> str:
    """Translate every run to itself (upper-cased), word i to word i."""
    return rebuild_fragment(
        runs,
        [
            translate_run_markup(run, run.text.upper() if upper else run.text, [(i, i) for i in range(99)])
            for run in runs
            if not run.markup
        ],
    )


class _Balance(HTMLParser):
    """Check that every inline element opened is closed, in order (block-level tags are the source's, copied as
    they were: an unclosed <p> stays unclosed); collect the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []
        self.balanced = True

    def handle_starttag(self, tag, attrs) -> None:
        if tag in INLINE_ELEMENTS:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs) -> None:
        pass  # <br/>, <img/>: no content, nothing to close

    def handle_endtag(self, tag) -> None:
        if tag in INLINE_ELEMENTS and (not self.stack or self.stack.pop() != tag):
            self.balanced = False

    def handle_data(self, data) -> None:
        self.text.append(data)


def balance(fragment: str) -> tuple[bool, str]:
    checker = _Balance()
    checker.feed(fragment)
    checker.close()
    return checker.balanced and not checker.stack, "".join(checker.text)


def test_the_example_of_the_issue() -> None:
    runs = parse_runs("The <b>dog</b> sleeps.")
    [run] = runs
    assert run.text == "The dog sleeps." and [(t.open, t.start, t.end) for t in run.tags] == [("<b>", 4, 7)]
    assert (
        translate_run_markup(run, "Der Hund schläft.", [(0, 0), (1, 1), (2, 2)]) == "Der <b>Hund</b> schläft."
    )
    # Reordered: the tag follows its word.
    assert (
        translate_run_markup(run, "Schläft der Hund?", [(0, 1), (1, 2), (2, 0)]) == "Schläft der <b>Hund?</b>"
    )


def test_nested_tags_follow_their_words_and_stay_nested() -> None:
    [run] = parse_runs('A <a href="/x?a=1&amp;b=2">big <i>red</i> dog</a> runs.')
    placed = project_tags(run, "Ein Hund rot groß rennt.", [(0, 0), (1, 3), (2, 2), (3, 1), (4, 4)])
    assert [(tag.open, start, end) for tag, start, end in placed] == [
        ('<a href="/x?a=1&amp;b=2">', 1, 4),
        ("<i>", 2, 3),
    ]
    assert render("Ein Hund rot groß rennt.", placed) == (
        'Ein <a href="/x?a=1&amp;b=2">Hund <i>rot</i> groß</a> rennt.'
    )
    # A child whose words fall outside its parent's is clipped into it; crossing siblings do not overlap.
    [run] = parse_runs("<b>one two</b> <i>three</i> four")
    placed = project_tags(run, "w0 w1 w2 w3", [(0, 2), (1, 3), (2, 1), (3, 0)])
    spans = [(tag.open, start, end) for tag, start, end in placed]
    assert spans == [("<b>", 2, 4), ("<i>", 4, 4)]
    assert render("w0 w1 w2 w3", placed) == "w0 w1 <b>w2 w3</b><i></i>"


def test_an_unaligned_tag_keeps_its_place_as_an_empty_element_and_a_void_one_follows_its_word() -> None:
    [run] = parse_runs("one <b>two</b> three")
    assert translate_run_markup(run, "eins zwei drei", [(0, 0), (2, 2)]) == "eins <b></b>zwei drei"
    [run] = parse_runs('a cat<img src="c.png"> runs')
    assert translate_run_markup(run, "eine Katze rennt", [(0, 0), (1, 1), (2, 2)]) == (
        'eine Katze <img src="c.png">rennt'
    )


CASES = [
    ("plain", "The dog sleeps."),
    ("nested", "<p>A <b>big <i>red</i> dog</b> sleeps.</p>"),
    (
        "attributes",
        '<p class="c" data-x=\'1\'>A <a href="https://e.x/?q=1&amp;r=2" title="t">link</a> here.</p>',
    ),
    ("void", '<p>An image <img src="a.png" alt="a"> and a<wbr>break, then<br>a line<br/>end.</p>'),
    ("entities", "<p>Tom &amp; Jerry &lt;3 &#169; &eacute;t&eacute; &nbsp;x</p>"),
    ("comments", "<p>One <!-- a <b>comment</b> --> two.</p><!-- end -->"),
    ("script and style", "<p>Hi.</p><script>if (a < b && c) { x = '<b>'; }</script><style>b{}</style>"),
    ("unclosed inline", "<p>Hello <b>world, <i>how are</p><p>you</p>"),
    ("stray end tags", "</b>Hello</i> world</b>."),
    ("crossing", "<b>one <i>two</b> three</i> four"),
    ("block inside inline", "<b>one<div>two</div>three</b>"),
    ("whitespace and lists", "<ul>\n  <li>One</li>\n  <li> <b> </b> </li>\n</ul>"),
    ("unclosed element", "<p>Text <span class='x'>tail"),
    ("a stray less-than", "<p>1 < 2 and 3 > 2</p>"),
]


@pytest.mark.parametrize(("name", "fragment"), CASES, ids=[name for name, _ in CASES])
def test_no_text_is_lost_and_the_tags_balance(name: str, fragment: str) -> None:
    runs = parse_runs(fragment)
    translated = identity(runs)
    ok, _ = balance(translated)
    assert ok, translated
    _, text = balance(re.sub(r"<script.*?</script>|<style.*?</style>", "", translated, flags=re.S))
    # Every word of the source's text comes back (upper-cased), in order, outside script and style.
    visible = re.sub(r"<script.*?</script>|<style.*?</style>", "", fragment, flags=re.S)
    _, visible_text = balance(visible)
    assert re.findall(r"\S+", text.upper()) == re.findall(r"\S+", visible_text.upper())
    if name == "script and style":
        assert "<script>if (a < b && c) { x = '<b>'; }</script><style>b{}</style>" in translated
    if name == "comments":
        assert "<!-- a <b>comment</b> -->" in translated and translated.endswith("<!-- end -->")
    # Translating each run to itself, unchanged, gives the fragment back up to how references are written.
    if name in ("plain", "nested", "attributes", "comments", "entities"):
        assert html.unescape(identity(runs, upper=False)) == html.unescape(fragment)


@pytest.mark.parametrize("seed", range(40))
def test_any_alignment_keeps_every_word_and_balances(seed: int) -> None:
    """Random reorderings and random (even crossing, partial) alignments: the text is the translation's, whole,
    and every inline element opened is closed, nested."""
    generator = random.Random(seed)
    _, fragment = CASES[generator.randrange(len(CASES))]
    fragment = f"<p>{generator.choice(['', 'x '])}<b>one <i>two <a href='#'>three</a></i> four</b> five</p>{fragment}"
    runs = parse_runs(fragment)
    translated = []
    for run in (run for run in runs if not run.markup):
        words = run.text.split()
        target = [f"t{k}" for k in range(max(1, len(words) + generator.randint(-2, 2)))]
        pairs = [
            (generator.randrange(len(words)), generator.randrange(len(target))) for _ in range(len(words))
        ]
        html_run = translate_run_markup(run, " ".join(target), pairs[: generator.randint(0, len(pairs))])
        ok, text = balance(html_run)
        assert ok, (fragment, html_run)
        assert text.split() == target
        translated.append(html_run)
    assert balance(rebuild_fragment(runs, translated))[0]


def test_self_closed_and_void_end_tags_do_not_cut_a_sentence() -> None:
    [run] = parse_runs('a <img src="x"></img> b <b/> c <span class="s"/>d')
    assert run.text.split() == ["a", "b", "c", "d"]
    rebuilt = translate_run_markup(run, "A B C D", [(i, i) for i in range(4)])
    assert rebuilt == 'A <img src="x">B <b></b>C <span class="s"></span>D' and balance(rebuilt)[0]


def test_runs_split_at_block_boundaries_and_counts_are_checked() -> None:
    runs = parse_runs("<ul>\n  <li>One <b>two</b></li><li>Three</li>\n</ul>")
    assert [run.text for run in runs if not run.markup] == ["One two", "Three"]
    with pytest.raises(ValueError, match="1 translations for 2 runs of text"):
        rebuild_fragment(runs, ["x"])


def test_v1_translate_keeps_inline_tags_across_a_sentence(make_client, served_run) -> None:
    from transformer.decoding.translator import Translator

    client = make_client()
    first, second = "The cooks do not love the cow.", "A man sleeps."
    fragment = f'<p title="x">{first} <b>{second}</b></p>'
    reply = client.post("/v1/translate", json={"text": fragment, "format": "html"})
    assert reply.status_code == 200, reply.text
    expected = [
        html.escape(text, quote=False)
        for text in Translator.from_checkpoint(served_run).translate([first, second])
    ]
    data = reply.json()
    # The second sentence's words all align inside its own source words, all of them in <b>.
    assert data["translation"] == f'<p title="x">{expected[0]} <b>{expected[1]}</b></p>'
    assert [item["source"] for item in data["sentences"][0]] == [first, second]
    assert "alignment" not in data["sentences"][0][0]  # used for the tags, not asked for
    aligned = client.post(
        "/v1/translate", json={"text": [fragment], "format": "html", "alignments": True}
    ).json()
    assert aligned["translation"] == [data["translation"]] and "alignment" in aligned["sentences"][0][0]
    refused = client.post("/v1/translate", json={"text": fragment, "format": "html", "prefix": "Die"})
    assert refused.status_code == 422 and "prefix: not with format html" in refused.json()["detail"]
    assert client.post("/v1/translate", json={"text": "a", "format": "pdf"}).status_code == 422


def test_translate_format_html_translates_each_run_once(trained_run, tmp_path, capsys) -> None:
    from transformer.cli import main
    from transformer.decoding.translator import Translator

    source = tmp_path / "page.html"
    source.write_text(
        "<p>The <b>cooks</b> do not love the cow.</p>\n<li>A man sleeps.</li><!-- c -->\n"
        "<p>Press <button>OK</button> now</p>\n",
        encoding="utf-8",
    )
    assert (
        main(["translate", "--checkpoint", str(trained_run), "--input", str(source), "--format", "html"]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    translator = Translator.from_checkpoint(trained_run)
    expected = translator.translate(["The cooks do not love the cow.", "A man sleeps."])
    assert len(lines) == 3 and lines[1] == f"<li>{html.escape(expected[1], quote=False)}</li><!-- c -->"
    # A block-level tag inside a line keeps the spaces beside it, which the search strips from its output.
    assert " <button>" in lines[2] and "</button> " in lines[2]
    ok, text = balance(lines[0])
    assert ok and lines[0].startswith("<p>") and lines[0].endswith("</p>") and lines[0].count("<b>") == 1
    assert text.split() == expected[0].split()
    assert main(["translate", "--checkpoint", str(trained_run), "--input", str(source), "--format", "html",
                 "--scores", "--nbest", "2"]) == 2  # fmt: skip
    assert "--format html writes HTML alone: it does not take --scores, --nbest" in capsys.readouterr().err
