"""A self-contained HTML page of every layer and head of the three kinds of attention: its data, and its file.

:func:`build_attention_payload` gathers the tokens and the rounded weights of every kind, layer and head;
:func:`transformer.visualization.attention_page.render_attention_page` puts them into the page, and
:func:`write_attention_html` writes it.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from matplotlib import colormaps
from matplotlib.colors import to_hex

from transformer.atomic_files import write_text_atomically
from transformer.model.transformer import AttentionWeights
from transformer.visualization.attention_page import render_attention_page
from transformer.visualization.attention_plot import (
    ATTENTION_KINDS,
    COLORMAP,
    check_attention_shape,
    select_attention_map,
)

# Four decimals keep the page small (a base model on a 30-token sentence pair: about 0.9 MB) and still
# resolve weights far below one percent.
WEIGHT_DECIMALS = 4
COLORMAP_STEPS = 256


# Per kind: the tokens on the query and key axes, what to call them, and what to know when reading it.
KIND_AXES = {
    "encoder_self": ("source", "source", "Each row sums to 1 over the source."),
    "decoder_self": ("decoder input", "decoder input", "Causal: future positions (hatched) are masked."),
    "cross": ("decoder input", "source", "Each decoder position distributes 1 over the source."),
}


def round_weights(weights: torch.Tensor, decimals: int = WEIGHT_DECIMALS) -> list[list[list[float]]]:
    """Round per-head attention maps for embedding in the page.

    Parameters
    ----------
    weights : torch.Tensor, shape (num_heads, query_len, key_len)
        Attention probabilities.
    decimals : int
        Decimal places to keep.

    Returns
    -------
    list of list of list of float
        Nested lists indexed ``[head][query][key]``.

    Raises
    ------
    ValueError
        On NaN or infinite weights, which JSON cannot hold.

    Notes
    -----
    Rounding in float64 makes ``json.dumps`` write short numbers such as ``0.1234``.
    """
    if not bool(torch.isfinite(weights).all()):
        raise ValueError("attention weights contain NaN or infinite values")
    rounded: list[list[list[float]]] = torch.round(weights.double(), decimals=decimals).tolist()
    return rounded


def build_attention_payload(
    attention: AttentionWeights,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    title: str,
    batch_index: int = 0,
) -> dict[str, Any]:
    """Collect tokens and rounded weights of every kind, layer and head into JSON-ready data.

    Parameters
    ----------
    attention : AttentionWeights
        Output of ``Transformer.forward_with_attention``.
    source_tokens : sequence of str, length src_len
        Source pieces as fed to the encoder.
    target_tokens : sequence of str, length tgt_len
        Decoder input pieces: ``<s>`` followed by the target pieces.
    title : str
        Page title.
    batch_index : int
        Which sentence of the batch.

    Returns
    -------
    dict
        ``title``, ``source_tokens``, ``target_tokens``, ``colormap`` (hex colours, low to high) and
        ``kinds``: a list of ``{"name", "label", "query_axis", "key_axis", "note", "causal",
        "query_tokens", "key_tokens", "layers"}`` with ``layers[layer][head][query][key]``.

    Raises
    ------
    ValueError
        When a kind holds no layers, a shape disagrees with the token counts, or a weight is NaN or infinite
        (:func:`round_weights`).

    Notes
    -----
    Weights are rounded (:func:`round_weights`) so the page stays small; shapes are checked against the tokens
    first, so no label lands on the wrong row.
    """
    tokens = {"source": list(source_tokens), "decoder input": list(target_tokens)}
    kinds = []
    for name, (query_axis, key_axis, note) in KIND_AXES.items():
        num_layers = len(getattr(attention, name))
        if num_layers == 0:
            raise ValueError(f"attention.{name} holds no layers")
        layers = []
        for layer in range(num_layers):
            weights = select_attention_map(attention, name, layer, batch_index)
            description = f"{ATTENTION_KINDS[name]} (layer {layer})"
            check_attention_shape(weights, tokens[query_axis], tokens[key_axis], description)
            layers.append(round_weights(weights))
        kinds.append(
            {
                "name": name,
                "label": ATTENTION_KINDS[name],
                "query_axis": query_axis,
                "key_axis": key_axis,
                "note": note,
                "causal": name == "decoder_self",
                "query_tokens": tokens[query_axis],
                "key_tokens": tokens[key_axis],
                "layers": layers,
            }
        )
    colormap = colormaps[COLORMAP].resampled(COLORMAP_STEPS)
    return {
        "title": title,
        "source_tokens": tokens["source"],
        "target_tokens": tokens["decoder input"],
        "colormap": [to_hex(colormap(step)) for step in range(COLORMAP_STEPS)],
        "kinds": kinds,
    }


def write_attention_html(
    attention: AttentionWeights,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    path: Path,
    title: str = "Transformer attention",
    batch_index: int = 0,
) -> Path:
    """Write a self-contained HTML page to browse all layers and heads of the attention of one sentence.

    Parameters
    ----------
    attention : AttentionWeights
        Output of ``Transformer.forward_with_attention``; tensors shaped (batch, num_heads, query_len, key_len).
    source_tokens : sequence of str, length src_len
        Source pieces as fed to the encoder.
    target_tokens : sequence of str, length tgt_len
        Decoder input pieces: ``<s>`` followed by the target pieces (queries of both decoder attentions).
    path : pathlib.Path
        Output ``.html`` file; written atomically, parent directories created.
    title : str
        Page heading, e.g. the source sentence.
    batch_index : int
        Which sentence of the batch.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        When shapes disagree with the token counts.

    Notes
    -----
    The page offers the attention kind, the layer, one head, all heads as a grid or their average, a colour
    scale from 0 to the largest weight shown (or fixed 0 to 1), and each weight on hover. It loads nothing
    from the network.
    """
    page = render_attention_page(
        build_attention_payload(attention, source_tokens, target_tokens, title, batch_index)
    )
    write_text_atomically(Path(path), page)
    return Path(path)
