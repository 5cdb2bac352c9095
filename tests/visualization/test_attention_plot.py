import os
from pathlib import Path

import pytest
import torch

from transformer.model.transformer import AttentionWeights
from transformer.visualization.attention_plot import (
    choose_grid,
    plot_attention_heads,
    plot_attention_maps,
    resolve_layer_index,
    select_attention_map,
)


def test_plot_attention_maps_writes_one_png_per_kind(tiny_attention, tmp_path: Path, png) -> None:
    attention, source_tokens, target_tokens = tiny_attention
    paths = plot_attention_maps(
        attention, source_tokens, target_tokens, layer=-1, output_dir=tmp_path / "plots"
    )
    assert paths == {
        "encoder_self": tmp_path / "plots" / "attention_encoder_self_layer1.png",
        "decoder_self": tmp_path / "plots" / "attention_decoder_self_layer1.png",
        "cross": tmp_path / "plots" / "attention_cross_layer1.png",
    }
    for path in paths.values():
        image = png.load(path)
        # The colour scale runs from 0 to the largest weight: both ends of viridis must appear.
        assert png.count_near(image, png.viridis(1.0)) > 100, f"no strong (yellow) cell in {path.name}"
        assert png.count_near(image, png.viridis(0.0), tolerance=0.1) > 100, f"no weak cell in {path.name}"
        # The causal mask's hidden cells are grey, in decoder self-attention only.
        masked_pixels = png.count_near(image, "#e4e7eb", tolerance=0.01)
        assert (masked_pixels > 1000) == (path is paths["decoder_self"]), (path.name, masked_pixels)
    assert sorted(os.listdir(tmp_path / "plots")) == sorted(path.name for path in paths.values())


def test_plot_attention_maps_uses_prefix_and_batch_index(tiny_attention, tmp_path: Path) -> None:
    attention, source_tokens, target_tokens = tiny_attention
    paths = plot_attention_maps(
        attention,
        source_tokens,
        target_tokens,
        layer=0,
        output_dir=tmp_path,
        prefix="sentence2",
        batch_index=1,
    )
    assert paths["cross"].name == "sentence2_cross_layer0.png"
    with pytest.raises(ValueError, match="batch index 2 is out of range for a batch of 2"):
        plot_attention_maps(
            attention, source_tokens, target_tokens, layer=0, output_dir=tmp_path, batch_index=2
        )


@pytest.mark.parametrize("layer", [2, -3, 10])
def test_layer_out_of_range_names_the_valid_range_and_writes_nothing(
    tiny_attention, tmp_path: Path, layer: int
) -> None:
    attention, source_tokens, target_tokens = tiny_attention
    with pytest.raises(ValueError, match=rf"layer {layer} is out of range: .* 2 layers, so use 0\.\.1"):
        plot_attention_maps(attention, source_tokens, target_tokens, layer=layer, output_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_wrong_token_counts_raise_before_any_file_is_written(tiny_attention, tmp_path: Path) -> None:
    attention, source_tokens, target_tokens = tiny_attention
    with pytest.raises(ValueError, match=r"Decoder self-attention \(layer 0\) have query_len=7 but 6 query"):
        plot_attention_maps(attention, source_tokens, target_tokens[:-1], layer=0, output_dir=tmp_path)
    with pytest.raises(ValueError, match=r"Encoder self-attention \(layer 0\) have query_len=7 but 8 query"):
        plot_attention_maps(attention, [*source_tokens, "extra"], target_tokens, layer=0, output_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_plot_attention_heads_rejects_bad_shapes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"shape \(num_heads, query_len, key_len\).*got \(3, 3\)"):
        plot_attention_heads(torch.rand(3, 3), ["a"] * 3, ["b"] * 3, "t", tmp_path / "x.png")
    with pytest.raises(ValueError, match="key_len=4 but 3 key tokens"):
        plot_attention_heads(torch.rand(2, 3, 4), ["a"] * 3, ["b"] * 3, "t", tmp_path / "x.png")


@pytest.mark.parametrize(
    ("num_heads", "grid"),
    [(1, (1, 1)), (2, (1, 2)), (3, (1, 3)), (4, (1, 4)), (5, (2, 3)), (6, (2, 3)), (8, (2, 4)), (9, (3, 3)),
     (12, (3, 4)), (16, (4, 4))],
)  # fmt: skip
def test_choose_grid(num_heads: int, grid: tuple[int, int]) -> None:
    assert choose_grid(num_heads) == grid


@pytest.mark.parametrize("num_heads", [1, 3, 16])
def test_plot_attention_heads_for_several_head_counts(tmp_path: Path, num_heads: int, png) -> None:
    weights = torch.softmax(torch.randn(num_heads, 5, 9) * 3, dim=-1)
    tokens = ["<s>", "$", "a$b$c", "", "&"]  # "$" would start mathtext if not escaped
    path = plot_attention_heads(
        weights, tokens, [f"k{index}" for index in range(9)], "title", tmp_path / "h.png"
    )
    image = png.load(path, min_bytes=5_000)
    assert png.count_near(image, png.viridis(1.0)) > 20


def test_long_sentences_keep_a_bounded_figure(tmp_path: Path, png) -> None:
    weights = torch.softmax(torch.randn(2, 40, 40), dim=-1)
    tokens = [f"tok{index}" for index in range(40)]
    image = png.load(plot_attention_heads(weights, tokens, tokens, "long", tmp_path / "long.png"))
    assert image.shape[1] < 4000 and image.shape[0] < 3000


def test_resolve_layer_index() -> None:
    assert [resolve_layer_index(layer, 3) for layer in (0, 2, -1, -3)] == [0, 2, 2, 0]
    with pytest.raises(ValueError, match="hold no layers"):
        resolve_layer_index(0, 0)


def test_select_rejects_unknown_kind(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown attention kind 'decoder'"):
        select_attention_map(AttentionWeights(), "decoder", 0)
