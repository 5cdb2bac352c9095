import json
import re
from functools import partial
from pathlib import Path

import pytest
import torch
from matplotlib.image import imread

from tests.chromium import run_chromium
from transformer.model.transformer import AttentionWeights
from transformer.visualization.attention_html import write_attention_html

HOSTILE_TOKENS = ["</script><script>window.injected = 1</script>", "&amp;", "<b>bold</b>", "a\u2028b"]


def embedded_data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>', page, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_page_embeds_every_layer_and_head_with_the_right_shapes(tiny_attention, tmp_path: Path) -> None:
    attention, source_tokens, target_tokens = tiny_attention
    path = write_attention_html(attention, source_tokens, target_tokens, tmp_path / "out" / "attention.html")
    data = embedded_data(path.read_text(encoding="utf-8"))
    assert data["source_tokens"] == source_tokens and data["target_tokens"] == target_tokens
    expected_axes = {
        "encoder_self": (source_tokens, source_tokens),
        "decoder_self": (target_tokens, target_tokens),
        "cross": (target_tokens, source_tokens),
    }
    assert [kind["name"] for kind in data["kinds"]] == list(expected_axes)
    for kind in data["kinds"]:
        query_tokens, key_tokens = expected_axes[kind["name"]]
        assert (kind["query_tokens"], kind["key_tokens"]) == (query_tokens, key_tokens)
        weights = torch.tensor(kind["layers"], dtype=torch.float64)
        assert weights.shape == (2, 4, len(query_tokens), len(key_tokens))  # (layer, head, query, key)
        reference = torch.stack([layer[0] for layer in getattr(attention, kind["name"])])
        torch.testing.assert_close(weights, reference.double(), atol=5e-5, rtol=0)
        torch.testing.assert_close(
            weights.sum(-1), torch.ones(weights.shape[:-1], dtype=torch.float64), atol=1e-3, rtol=0
        )
    assert len(data["colormap"]) == 256 and data["colormap"][-1] == "#fde725"


def test_page_is_self_contained(tiny_attention, tmp_path: Path) -> None:
    attention, source_tokens, target_tokens = tiny_attention
    page = write_attention_html(attention, source_tokens, target_tokens, tmp_path / "a.html").read_text(
        encoding="utf-8"
    )
    assert "http://" not in page and "https://" not in page and " src=" not in page
    assert page.count("<script") == 2 and "<style>" in page


def test_hostile_tokens_and_title_are_escaped(tiny_attention, tmp_path: Path) -> None:
    attention, source_tokens, target_tokens = tiny_attention
    source_tokens[:4] = HOSTILE_TOKENS
    path = write_attention_html(
        attention,
        source_tokens,
        target_tokens,
        tmp_path / "a.html",
        title="<img src=x onerror=alert(1)> & co",
    )
    page = path.read_text(encoding="utf-8")
    assert "<script>window.injected" not in page and "<b>bold" not in page and "<img" not in page
    assert "<h1>&lt;img src=x onerror=alert(1)&gt; &amp; co</h1>" in page
    assert embedded_data(page)["source_tokens"][:4] == HOSTILE_TOKENS  # escaped, yet exact after parsing


def test_wrong_tokens_and_bad_weights_raise(tiny_attention, tmp_path: Path) -> None:
    attention, source_tokens, target_tokens = tiny_attention
    with pytest.raises(
        ValueError, match=r"Encoder self-attention \(layer 0\) have query_len=7 but 6 query tokens"
    ):
        write_attention_html(attention, source_tokens[:-1], target_tokens, tmp_path / "a.html")
    attention.cross[1][0, 2, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        write_attention_html(attention, source_tokens, target_tokens, tmp_path / "a.html")
    with pytest.raises(ValueError, match=r"attention\.encoder_self holds no layers"):
        write_attention_html(AttentionWeights(), source_tokens, target_tokens, tmp_path / "a.html")
    assert list(tmp_path.iterdir()) == []


# ---- Rendering in headless Chromium ---------------------------------------------------------------------


#: Chromium for the standalone viewer: its screenshots are checked at 1200 x 900 pixels (heatmap_pixels).
open_viewer = partial(run_chromium, window_size=(1200, 900), virtual_time_budget_ms=2000, timeout_s=60)


def one_strong_cell_attention(strong: tuple[str, int, int, int, int]) -> AttentionWeights:
    """Uniform attention over the allowed keys except one cell (kind, layer, head, query, key) at 0.9."""
    source_len, target_len, num_heads, num_layers = 6, 5, 4, 2
    causal = torch.ones(target_len, target_len).tril()
    shapes = {
        "encoder_self": torch.ones(source_len, source_len),
        "decoder_self": causal,
        "cross": torch.ones(target_len, source_len),
    }
    layers = {
        kind: [
            (allowed / allowed.sum(-1, keepdim=True)).expand(1, num_heads, *allowed.shape).clone()
            for _ in range(num_layers)
        ]
        for kind, allowed in shapes.items()
    }
    kind, layer, head, query, key = strong
    row = layers[kind][layer][0, head, query]
    row.fill_(0.1 / (row.numel() - 1))
    row[key] = 0.9
    return AttentionWeights(layers["encoder_self"], layers["decoder_self"], layers["cross"])


def heatmap_pixels(png, tmp_path: Path, page: Path, fragment: str) -> dict[str, int]:
    """Screenshot the page and count pixels of the strong cell, the uniform cells and the strong row's rest."""
    shot = tmp_path / f"{page.stem}.png"
    open_viewer(tmp_path, page.as_uri() + fragment, f"--screenshot={shot}")
    image = imread(shot)
    assert image.shape[:2] == (900, 1200)
    # The colour scale runs from 0 to the largest weight shown, 0.9.
    colours = {"strong": 1.0, "uniform": (1 / 6) / 0.9, "weak": (0.1 / 5) / 0.9}
    return {name: png.count_near(image, png.viridis(fraction), 0.05) for name, fraction in colours.items()}


def test_chromium_renders_the_heatmap(tmp_path: Path, png) -> None:
    attention = one_strong_cell_attention(("cross", 1, 2, 3, 4))
    source_tokens = ["▁Ein", "▁Mann", "▁mit", "▁Hut", ".", "</s>"]
    target_tokens = ["<s>", "▁A", "▁man", "▁with", "▁hat"]
    page = write_attention_html(attention, source_tokens, target_tokens, tmp_path / "attention.html")
    # The fragment opens the view holding the strong cell: encoder-decoder attention, layer 1, head 2.
    pixels = heatmap_pixels(png, tmp_path, page, "#kind=cross&layer=1&head=2")
    # Cells are about 46x46 pixels: one strong (viridis yellow), 5 weak ones beside it, 24 uniform rows' cells.
    assert pixels["strong"] > 1500, pixels
    assert pixels["weak"] > 5 * 1500, pixels
    assert pixels["uniform"] > 24 * 1500, pixels

    # The same page with its script broken draws no heatmap, and the check above notices.
    broken = tmp_path / "broken.html"
    broken.write_text(
        page.read_text(encoding="utf-8").replace(
            '"use strict";', '"use strict";\nthrow new Error("broken");', 1
        ),
        encoding="utf-8",
    )
    blank = {"strong": 0, "uniform": 0, "weak": 0}
    assert heatmap_pixels(png, tmp_path, broken, "#kind=cross&layer=1&head=2") == blank


def test_chromium_shows_hostile_tokens_literally_and_answers_hover_and_clicks(
    tiny_attention, tmp_path: Path
) -> None:
    attention, source_tokens, target_tokens = tiny_attention
    source_tokens[:4] = HOSTILE_TOKENS
    page = write_attention_html(attention, source_tokens, target_tokens, tmp_path / "attention.html")
    # Drive the page as a user would, then write what it shows into the DOM for --dump-dom to return.
    probe = """<script>
    const result = {injected: window.injected === 1, panelsAtStart: document.querySelectorAll(".panel").length};
    const buttons = (id) => [...document.querySelectorAll("#" + id + " button")];
    document.querySelectorAll(".panel")[2].click();
    result.afterPanelClick = [document.querySelectorAll(".panel").length, window.location.hash];
    buttons("kind-buttons")[2].click();
    buttons("head-buttons").find((b) => b.textContent === "average").click();
    result.panelsAfterClicks = document.querySelectorAll(".panel").length;
    result.description = document.getElementById("description").textContent;
    result.hash = window.location.hash;
    const cell = document.querySelector("td[data-query='1'][data-key='2']");
    cell.dispatchEvent(new MouseEvent("mouseover", {bubbles: true, clientX: 50, clientY: 50}));
    result.tooltip = document.getElementById("tooltip").hidden ? null : document.getElementById("tooltip").textContent;
    result.highlighted = [...document.querySelectorAll("th.highlight")].map((th) => th.textContent);
    buttons("kind-buttons")[1].click();
    result.maskedCells = document.querySelectorAll("td.masked").length;
    buttons("kind-buttons")[0].click();
    result.keyHeaders = [...document.querySelectorAll(".panel th.key")].slice(0, 4).map((th) => th.textContent);
    const output = document.createElement("pre");
    output.id = "probe-result";
    output.textContent = JSON.stringify(result);
    document.body.appendChild(output);
    </script></body>"""
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", probe), encoding="utf-8")
    dom = open_viewer(tmp_path, probed.as_uri(), "--dump-dom").stdout
    match = re.search(r'<pre id="probe-result">(.*?)</pre>', dom, re.S)
    assert match is not None, dom[-2000:]
    result = json.loads(match.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    assert result["injected"] is False
    assert result["panelsAtStart"] == 4  # all heads of encoder self-attention, layer 0
    assert result["afterPanelClick"] == [1, "#kind=encoder_self&layer=0&head=2"]
    assert result["panelsAfterClicks"] == 1  # the average of encoder-decoder attention
    assert result["description"].startswith("Encoder-decoder attention, layer 0")
    assert result["hash"] == "#kind=cross&layer=0&head=mean"
    mean_weight = attention.cross[0][0, :, 1, 2].mean().item()
    assert result["tooltip"].startswith(f"{mean_weight:.4f}")
    assert "query 1 (decoder input): ▁A" in result["tooltip"]
    assert f"key 2 (source): {HOSTILE_TOKENS[2]}" in result["tooltip"]
    assert result["highlighted"] == [HOSTILE_TOKENS[2], "▁A"]  # column header, then row header
    assert result["maskedCells"] == 7 * 6 // 2  # decoder self-attention: the future of 7 positions, hatched
    assert result["keyHeaders"] == HOSTILE_TOKENS  # shown literally as text, not parsed as markup
