"""The page at ``/`` in headless Chromium: the translation appears, the attention heatmap renders, words stream.

The tests under a virtual time budget clear the Stream box (the budget runs out while a stream still arrives);
the streamed page is tested in real time (:func:`tests.chromium.evaluate_when`).
"""

import html
import re
from functools import partial
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
from matplotlib import colormaps
from matplotlib.image import imread

from tests.chromium import evaluate_when, run_chromium
from tests.serving.conftest import free_port, running_server
from transformer.decoding.candidate import Candidate
from transformer.decoding.quality_flags import FlagThresholds
from transformer.decoding.translator import Translator
from transformer.serving.config import ServeConfig

#: Chromium for the served page: a tall window, for the page and its attention frame below it.
open_page = partial(run_chromium, window_size=(1200, 1600), virtual_time_budget_ms=8000, timeout_s=90)


def heatmap_pixels(path: Path) -> int:
    """Pixels of a screenshot close to a colour of the viewer's viridis scale (none on the plain page)."""
    image = imread(path)[..., :3]
    samples = np.array([colormaps["viridis"](fraction)[:3] for fraction in np.linspace(0.0, 1.0, 21)])
    distance = np.abs(image[:, :, None, :] - samples[None, None, :, :]).max(axis=-1)  # (h, w, samples)
    return int((distance < 0.04).any(axis=-1).sum())


def flag_text(source: str, candidate: Candidate) -> str:
    """What the page's Flags cell should say: each flag and the words of its evidence."""
    items = []
    for flag in candidate.flags or ():
        words = (source if flag.source_span is not None else candidate.text).split()
        span = flag.source_span or flag.target_span
        assert span is not None
        items.append(f"{flag.kind}: {' '.join(words[span[0] : span[1]])}")
    return "; ".join(items)


def test_the_page_translates_and_shows_a_sentences_attention(
    served_run: Path, valid_sentences, tmp_path
) -> None:
    first, second = valid_sentences[:2]
    offline = Translator.from_checkpoint(served_run, device="cpu").translate_nbest(
        [first, second], flags=FlagThresholds()
    )
    expected = [found[0].text for found in offline]
    config = ServeConfig(checkpoints={"default": served_run}, port=free_port())
    with running_server(config) as base_url:
        query = urlencode({"text": f"{first} {second}", "attention": "1", "stream": "0"})
        dom = open_page(tmp_path, f"{base_url}/?{query}", "--dump-dom").stdout
        with_attention = tmp_path / "with-attention.png"
        open_page(tmp_path, f"{base_url}/?{query}", f"--screenshot={with_attention}")
        without_attention = tmp_path / "without-attention.png"
        plain_query = urlencode({"text": f"{first} {second}", "stream": "0"})
        open_page(tmp_path, f"{base_url}/?{plain_query}", f"--screenshot={without_attention}")
    translation = re.search(r'<div id="translation"[^>]*>(.*?)</div>', dom, re.S)
    assert translation is not None, dom[-3000:]
    assert translation.group(1) == f"{expected[0]} {expected[1]}".replace("&", "&amp;")
    assert len(re.findall(r'<tr data-index="\d"', dom)) == 2
    # Each row: index, source, translation, score, confidence (two decimals), flags, the attention button.
    rows = re.findall(r'<tr data-index="\d"[^>]*>(.*?)</tr>', dom, re.S)
    cells = [re.findall(r"<td>(.*?)</td>", row, re.S) for row in rows]
    assert [row[4] for row in cells] == [f"{found[0].confidence:.2f}" for found in offline]
    assert [row[5] for row in cells] == [html.escape(flag_text(source, found[0]), quote=False)
                                         for source, found in zip((first, second), offline, strict=True)]  # fmt: skip
    assert re.search(r'<tr data-index="1" class="chosen">', dom)
    frame = re.search(r'<iframe id="attention"[^>]*src="(/v1/attention\?[^"]*)"', dom)
    assert frame is not None and "hidden" not in frame.group(0)
    # The viewer in the frame drew its heatmaps; the same page without a chosen sentence has none.
    assert heatmap_pixels(with_attention) > 20_000
    assert heatmap_pixels(without_attention) < 500


def test_the_page_detects_the_language_and_keeps_html_tags(
    served_run: Path, valid_sentences, tmp_path
) -> None:
    config = ServeConfig(checkpoints={"default": served_run}, port=free_port())
    sentence = valid_sentences[0]
    offline = Translator.from_checkpoint(served_run, device="cpu").translate([sentence])[0]
    with running_server(config) as base_url:
        detected = urlencode({"text": sentence, "detect": "1", "flags": "0", "stream": "0"})
        dom = open_page(tmp_path, f"{base_url}/?{detected}", "--dump-dom").stdout
        marked = urlencode({"text": f"<p>{sentence}</p>", "html": "1", "flags": "0"})
        html_dom = open_page(tmp_path, f"{base_url}/?{marked}", "--dump-dom").stdout
    status = re.search(r'<p id="status"[^>]*>(.*?)</p>', dom, re.S)
    assert status is not None and "Detected language: en (" in status.group(1), dom[-2000:]
    translation = re.search(r'<div id="translation"[^>]*>(.*?)</div>', html_dom, re.S)
    assert translation is not None, html_dom[-2000:]
    # The translation is shown as text: the markup, escaped in the page, around the model's own translation.
    assert translation.group(1) == html.escape(f"<p>{html.escape(offline, quote=False)}</p>", quote=False)


def test_the_page_sends_its_glossary_and_refuses_a_line_it_cannot_read(
    served_run: Path, valid_sentences, tmp_path
) -> None:
    from transformer.decoding.glossary import Glossary

    config = ServeConfig(checkpoints={"default": served_run}, port=free_port())
    sentence = "the dog sees a small house."
    pairs = [("dog", "Hund"), ("small house", "Häuschen")]
    offline = Translator.from_checkpoint(served_run, device="cpu").translate(
        [sentence], glossary=Glossary.from_pairs(pairs)
    )[0]
    assert "Hund" in offline and "Häuschen" in offline
    with running_server(config) as base_url:
        glossary = "dog = Hund\n\nsmall house = Häuschen"
        query = urlencode({"text": sentence, "glossary": glossary, "flags": "0", "stream": "0"})
        dom = open_page(tmp_path, f"{base_url}/?{query}", "--dump-dom").stdout
        bad = urlencode({"text": sentence, "glossary": "dog = Hund\ncat", "flags": "0", "stream": "0"})
        bad_dom = open_page(tmp_path, f"{base_url}/?{bad}", "--dump-dom").stdout
    translation = re.search(r'<div id="translation"[^>]*>(.*?)</div>', dom, re.S)
    assert translation is not None, dom[-2000:]
    assert translation.group(1) == html.escape(offline, quote=False)
    status = re.search(r'<p id="status"[^>]*>(.*?)</p>', bad_dom, re.S)
    assert status is not None and "glossary line 2: expected 'source term = target term'" in status.group(1)


def test_the_page_streams_the_words_as_they_come(served_run: Path, valid_sentences, tmp_path) -> None:
    first, second = valid_sentences[:2]
    expected = " ".join(Translator.from_checkpoint(served_run, device="cpu").translate([first, second]))
    config = ServeConfig(checkpoints={"default": served_run}, port=free_port())
    with running_server(config) as base_url:
        url = f"{base_url}/?{urlencode({'text': f'{first} {second}', 'flags': '0'})}"  # the Stream box: on
        shown, pieces = evaluate_when(
            tmp_path,
            url,
            'document.getElementById("status").textContent.startsWith("Translated") && '
            '[document.getElementById("translation").textContent, document.getElementById("translation").dataset.pieces]',
        )  # real time: a virtual time budget runs out while a stream's chunks still arrive
    assert shown == expected
    assert int(pieces) > 2  # words came before each sentence ended
