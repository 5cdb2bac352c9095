"""Matplotlib heatmaps of encoder self-, decoder self- and encoder-decoder attention, one panel per head.

Figures are built with :class:`matplotlib.figure.Figure` on an Agg canvas rather than through ``pyplot``, so
plotting neither changes the global backend nor keeps figures alive in pyplot's registry.
"""

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from torch import Tensor

from transformer.atomic_files import atomic_write
from transformer.model.transformer import AttentionWeights

# Perceptually uniform and readable in greyscale; its bright yellow maximum stands out from the page.
COLORMAP = "viridis"
# Display names of the three kinds of attention, keyed by the ``AttentionWeights`` field that holds them.
ATTENTION_KINDS = {
    "encoder_self": "Encoder self-attention",
    "decoder_self": "Decoder self-attention",
    "cross": "Encoder-decoder attention",
}
# Widest grid of head panels: 8 heads make 2 rows of 4, 16 heads 4 rows of 4.
MAX_GRID_COLUMNS = 4
# Largest cell and largest panel side, in inches: long sentences shrink the cells instead of the page growing.
MAX_CELL_INCHES = 0.3
MAX_PANEL_INCHES = 4.5


def save_figure_atomically(figure: Figure, path: Path) -> Path:
    """Save a matplotlib figure atomically, in the format named by the path's suffix.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        The figure to save.
    path : pathlib.Path
        Destination such as ``attention.png``; a path without a suffix is written as PNG.

    Returns
    -------
    pathlib.Path
        ``path``.

    Notes
    -----
    matplotlib writes the file in pieces, so an interrupted save would leave a truncated image under the
    final name; :func:`transformer.atomic_files.atomic_write` saves to a temporary file and renames it over
    ``path``. The format comes from the suffix (matplotlib cannot see a name through the open file), and the
    resolution is fixed at 150 dpi.
    """
    image_format = Path(path).suffix.lstrip(".").lower() or "png"
    with atomic_write(Path(path), "wb") as handle:
        figure.savefig(handle, format=image_format, dpi=150)
    return Path(path)


def resolve_layer_index(layer: int, num_layers: int) -> int:
    """Turn a possibly negative layer index into a non-negative one, checking its range.

    Parameters
    ----------
    layer : int
        Layer index counted from 0; negative values count from the end (-1 is the last layer).
    num_layers : int
        Number of layers in the stack.

    Returns
    -------
    int
        The index in ``[0, num_layers)``.

    Raises
    ------
    ValueError
        Naming the valid range when ``layer`` is outside ``[-num_layers, num_layers)``, or when there are no
        layers.

    Notes
    -----
    Negative indices count from the last layer, as in Python, so ``-1`` is the top of the stack.
    """
    if num_layers <= 0:
        raise ValueError("the attention weights hold no layers")
    if not -num_layers <= layer < num_layers:
        raise ValueError(
            f"layer {layer} is out of range: the model has {num_layers} layers, "
            f"so use 0..{num_layers - 1} (or -{num_layers}..-1 counting from the end)"
        )
    return layer % num_layers


def select_attention_map(attention: AttentionWeights, kind: str, layer: int, batch_index: int = 0) -> Tensor:
    """Pick the per-head attention maps of one kind, layer and sentence.

    Parameters
    ----------
    attention : AttentionWeights
        Output of ``Transformer.forward_with_attention``.
    kind : str
        ``"encoder_self"``, ``"decoder_self"`` or ``"cross"``.
    layer : int
        Layer index; negative counts from the end.
    batch_index : int
        Which sentence of the batch.

    Returns
    -------
    torch.Tensor, shape (num_heads, query_len, key_len), float32, on the CPU
        Attention probabilities; rows are queries.

    Raises
    ------
    ValueError
        For an unknown kind, a layer out of range, weights that are not 4-D or a batch index out of range.

    Notes
    -----
    Detached and copied to float32 on the CPU, so matplotlib can draw maps computed in half precision on a
    GPU.
    """
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"unknown attention kind {kind!r}; expected one of {sorted(ATTENTION_KINDS)}")
    layers: list[Tensor] = getattr(attention, kind)
    weights = layers[resolve_layer_index(layer, len(layers))]
    if weights.dim() != 4:
        raise ValueError(
            f"{kind} weights must have shape (batch, num_heads, query_len, key_len), got {tuple(weights.shape)}"
        )
    if not 0 <= batch_index < weights.size(0):
        raise ValueError(f"batch index {batch_index} is out of range for a batch of {weights.size(0)}")
    return weights[batch_index].detach().float().cpu()


def check_attention_shape(
    weights: Tensor,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    description: str = "attention weights",
) -> None:
    """Check that per-head attention maps match the tokens that label their axes.

    Parameters
    ----------
    weights : torch.Tensor, shape (num_heads, query_len, key_len)
        Attention probabilities.
    query_tokens : sequence of str, length query_len
        Labels of the rows.
    key_tokens : sequence of str, length key_len
        Labels of the columns.
    description : str
        What the weights are, to start the error message, e.g. ``"Encoder self-attention (layer 0)"``.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Saying which dimension disagrees.

    Notes
    -----
    Sentences with padding must be passed with one token per padded position (or trimmed of the padding
    first).
    """
    if weights.dim() != 3 or weights.size(0) == 0:
        raise ValueError(
            f"{description} must have shape (num_heads, query_len, key_len) with at least one head, "
            f"got {tuple(weights.shape)}"
        )
    _, query_len, key_len = weights.shape
    if query_len != len(query_tokens):
        raise ValueError(
            f"{description} have query_len={query_len} but {len(query_tokens)} query tokens were given"
        )
    if key_len != len(key_tokens):
        raise ValueError(f"{description} have key_len={key_len} but {len(key_tokens)} key tokens were given")


def choose_grid(num_heads: int) -> tuple[int, int]:
    """Choose rows and columns for a grid of head panels.

    Parameters
    ----------
    num_heads : int
        Number of panels, at least one.

    Returns
    -------
    rows, columns : int
        Grid size; ``rows * columns >= num_heads`` with at most one partly empty row.

    Notes
    -----
    At most four columns, filled evenly: 4 heads -> 1x4, 6 -> 2x3, 8 -> 2x4, 9 -> 3x3, 12 -> 3x4, 16 -> 4x4.
    """
    rows = math.ceil(num_heads / MAX_GRID_COLUMNS)
    return rows, math.ceil(num_heads / rows)


def format_tick_label(token: str) -> str:
    """Make a token safe to use as a matplotlib label, shown literally.

    Parameters
    ----------
    token : str
        A token piece such as ``"▁Haus"`` or ``"</s>"``.

    Returns
    -------
    str
        The token with ``$`` escaped (it would otherwise start mathtext) and line breaks made visible.

    Notes
    -----
    An empty token is shown as ``''`` so that its row still has a visible label.
    """
    if not token:
        return "''"
    return token.replace("$", r"\$").replace("\n", "\\n").replace("\r", "\\r")


def _layout_sizes(
    query_labels: list[str], key_labels: list[str], rows: int, columns: int
) -> tuple[float, tuple[float, float]]:
    """Tick font size (points) and figure size (inches) for a grid of heatmaps."""
    query_len, key_len = len(query_labels), len(key_labels)
    cell_inches = min(MAX_CELL_INCHES, MAX_PANEL_INCHES / max(query_len, key_len))
    font_size = float(np.clip(cell_inches * 72 * 0.8, 4.0, 9.0))
    # Room for the longest label: about 0.6 em per character, 72 points per inch.
    label_inches = max(len(label) for label in [*query_labels, *key_labels, "x"]) * font_size * 0.6 / 72
    figure_size = (
        columns * (key_len * cell_inches + 0.15) + label_inches + 1.3,
        rows * (query_len * cell_inches + 0.3) + label_inches + 0.9,
    )
    return font_size, figure_size


def _draw_head(
    axes: Axes,
    head_weights: np.ndarray,
    query_labels: list[str],
    key_labels: list[str],
    font_size: float,
    show_query_labels: bool,
    show_key_labels: bool,
    color_max: float,
) -> AxesImage:
    colormap = colormaps[COLORMAP].with_extremes(bad="#e4e7eb")
    image = axes.imshow(
        head_weights, cmap=colormap, vmin=0.0, vmax=color_max, interpolation="nearest", aspect="equal"
    )
    # Ticks only where labelled: matplotlib's per-tick cost dominates the time for long sentences.
    axes.set_xticks(range(len(key_labels)) if show_key_labels else [])
    axes.set_yticks(range(len(query_labels)) if show_query_labels else [])
    if show_key_labels:
        axes.set_xticklabels(key_labels, rotation=90, fontsize=font_size)
    if show_query_labels:
        axes.set_yticklabels(query_labels, fontsize=font_size)
    axes.tick_params(length=0, pad=2)
    for spine in axes.spines.values():
        spine.set_visible(False)
    return image


def plot_attention_heads(
    weights: Tensor,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    title: str,
    path: Path,
    *,
    query_axis_label: str = "query",
    key_axis_label: str = "key",
    causal: bool = False,
) -> Path:
    """Draw one heatmap per head in a grid, with the tokens on the axes, and save it.

    Parameters
    ----------
    weights : torch.Tensor, shape (num_heads, query_len, key_len)
        Attention probabilities of one layer and one sentence; rows are queries.
    query_tokens : sequence of str, length query_len
        Row labels.
    key_tokens : sequence of str, length key_len
        Column labels (rotated).
    title : str
        Figure title.
    path : pathlib.Path
        Output image; PNG unless the suffix names another matplotlib format. Written atomically.
    query_axis_label, key_axis_label : str
        Captions of the row and column axes, e.g. ``"decoder input (query)"``.
    causal : bool
        Grey out the cells above the diagonal (key after query), which a causal mask hides; for
        decoder self-attention.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        When the shape disagrees with the token counts.

    Notes
    -----
    All heads share one colour scale from 0 to the largest weight in the figure, shown by one colorbar, so
    that heads can be compared; heads are numbered from 0. Token labels are drawn on the outer panels only.
    """
    check_attention_shape(weights, query_tokens, key_tokens)
    values = weights.detach().float().cpu().numpy()
    if causal:
        # Masked, not merely small: drawn in the colormap's "bad" colour instead of as zero.
        future = np.triu(np.ones(values.shape[1:], dtype=bool), k=1)
        values = np.ma.masked_array(values, np.broadcast_to(future, values.shape))
    num_heads = values.shape[0]
    rows, columns = choose_grid(num_heads)
    query_labels = [format_tick_label(token) for token in query_tokens]
    key_labels = [format_tick_label(token) for token in key_tokens]
    font_size, figure_size = _layout_sizes(query_labels, key_labels, rows, columns)
    figure = Figure(figsize=figure_size, layout="constrained")
    FigureCanvasAgg(figure)
    color_max = max(float(values.max()), 1e-6)
    all_axes = []
    for head in range(num_heads):
        axes = figure.add_subplot(rows, columns, head + 1)
        image = _draw_head(
            axes,
            values[head],
            query_labels,
            key_labels,
            font_size,
            show_query_labels=head % columns == 0,
            show_key_labels=head + columns >= num_heads,
            color_max=color_max,
        )
        axes.set_title(f"head {head}", fontsize=9)
        all_axes.append(axes)
    figure.colorbar(image, ax=all_axes, shrink=0.8, label="attention weight")
    figure.suptitle(title)
    figure.supxlabel(key_axis_label, fontsize=9)
    figure.supylabel(query_axis_label, fontsize=9)
    return save_figure_atomically(figure, path)


def plot_attention_maps(
    attention: AttentionWeights,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    layer: int,
    output_dir: Path,
    prefix: str = "attention",
    batch_index: int = 0,
) -> dict[str, Path]:
    """Plot the encoder self-, decoder self- and encoder-decoder attention of one layer, all heads.

    Parameters
    ----------
    attention : AttentionWeights
        Output of ``Transformer.forward_with_attention``; tensors shaped (batch, num_heads, query_len, key_len).
    source_tokens : sequence of str, length src_len
        Source pieces, as fed to the encoder (including ``</s>`` if it was fed).
    target_tokens : sequence of str, length tgt_len
        Decoder input pieces: ``<s>`` followed by the target pieces, one per decoder position.
    layer : int
        Layer index from 0; negative counts from the end (-1 is the last layer).
    output_dir : pathlib.Path
        Directory for the images; created if missing.
    prefix : str
        File-name prefix.
    batch_index : int
        Which sentence of the batch to plot.

    Returns
    -------
    dict of str to pathlib.Path
        Keys ``"encoder_self"``, ``"decoder_self"``, ``"cross"``; values
        ``{prefix}_{kind}_layer{L}.png`` with ``L`` the non-negative layer index.

    Raises
    ------
    ValueError
        For a layer out of range or tokens that disagree with the weights' shapes, before writing any file.

    Notes
    -----
    Decoder self-attention has the decoder input on both axes; its upper triangle, hidden by the causal mask,
    is drawn grey. Encoder-decoder attention has the decoder input as queries and the source as keys. A
    negative ``layer`` is resolved separately for the encoder and decoder stacks.
    """
    axis_labels = {
        "encoder_self": ("source (query)", "source (key)", source_tokens, source_tokens),
        "decoder_self": ("decoder input (query)", "decoder input (key)", target_tokens, target_tokens),
        "cross": ("decoder input (query)", "source (key)", target_tokens, source_tokens),
    }
    # Check every kind before drawing any, so that a bad layer or token list leaves no partial output.
    selected = {}
    for kind, (_, _, query_tokens, key_tokens) in axis_labels.items():
        num_layers = len(getattr(attention, kind))
        layer_index = resolve_layer_index(layer, num_layers)
        weights = select_attention_map(attention, kind, layer_index, batch_index)
        check_attention_shape(
            weights, query_tokens, key_tokens, f"{ATTENTION_KINDS[kind]} (layer {layer_index})"
        )
        selected[kind] = (layer_index, num_layers, weights)
    paths = {}
    for kind, (query_axis_label, key_axis_label, query_tokens, key_tokens) in axis_labels.items():
        layer_index, num_layers, weights = selected[kind]
        paths[kind] = plot_attention_heads(
            weights,
            query_tokens,
            key_tokens,
            title=f"{ATTENTION_KINDS[kind]}, layer {layer_index} (of 0–{num_layers - 1})",
            path=Path(output_dir) / f"{prefix}_{kind}_layer{layer_index}.png",
            query_axis_label=query_axis_label,
            key_axis_label=key_axis_label,
            causal=kind == "decoder_self",
        )
    return paths
