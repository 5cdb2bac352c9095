"""Maximum path length and sequential operations, measured through gradients and the autograd graph."""

from typing import Any

import torch
from torch import Tensor, nn

from transformer.experiments.table1.layers import RecurrentLayer, build_layer, stack_layer
from transformer.experiments.table1.settings import LAYER_KINDS, Table1Settings


def reaches_first_position(output: Tensor, hidden: Tensor) -> bool:
    """Tell whether output position n - 1 depends on input position 0.

    Parameters
    ----------
    output : torch.Tensor, shape (batch, n, d)
        A function of ``hidden``.
    hidden : torch.Tensor, shape (batch, n, d)
        The input, requiring grad.

    Returns
    -------
    bool
        True when the gradient of the last output position's sum with respect to the first input position
        has a non-zero entry.

    Notes
    -----
    Masked attention weights are exactly zero (exp(-inf)) and convolution taps outside the receptive field
    are never multiplied, so "no path" is an exact zero, not a small number.
    """
    (gradient,) = torch.autograd.grad(output[:, -1].sum(), hidden, retain_graph=True)
    return bool(gradient[:, 0].ne(0).any())


def layers_until_connected(
    name: str, length: int, d_model: int, settings: Table1Settings, max_layers: int
) -> int | None:
    """Stack layers of one kind until output position n - 1 gets a gradient from input position 0.

    Parameters
    ----------
    name : str
        A :data:`LAYER_KINDS` name other than ``recurrent``.
    length : int
        n.
    d_model : int
        d (small: only the dependence matters).
    settings : Table1Settings
        Heads, r and k.
    max_layers : int
        Give up after this many.

    Returns
    -------
    int or None
        The number of stacked layers, None if ``max_layers`` did not connect them.

    Notes
    -----
    The measured maximum path length of Table 1: self-attention connects every pair in one layer, restricted
    self-attention in ceil((n - 1) / r), contiguous convolutions in ceil((n - 1) / (k - 1)), dilated ones in
    ceil(log_k(n)). Runs in float64 with random weights; each layer is applied once to the previous output.
    """
    torch.manual_seed(0)
    hidden = torch.randn(1, length, d_model, dtype=torch.float64, requires_grad=True)
    output = hidden
    for index in range(max_layers):
        output = stack_layer(name, d_model, settings, index).double()(output)
        if reaches_first_position(output, hidden):
            return index + 1
    return None


def recurrent_steps_until_connected(length: int, d_model: int) -> int | None:
    """Find the fewest recurrent steps an LSTM needs before output n - 1 depends on input 0.

    Parameters
    ----------
    length : int
        n.
    d_model : int
        d.

    Returns
    -------
    int or None
        The smallest window m such that running the LSTM in windows of m steps, its state detached between
        windows, leaves output n - 1 depending on input 0; None if no window up to n does.

    Notes
    -----
    A detached state cuts the path through time, so this counts how many steps the path from position 0 to
    position n - 1 takes through one layer: n (all of them), the paper's O(n).
    """
    torch.manual_seed(0)
    lstm = nn.LSTM(d_model, d_model, batch_first=True).double()
    hidden = torch.randn(1, length, d_model, dtype=torch.float64, requires_grad=True)
    for window in range(1, length + 1):
        state: tuple[Tensor, Tensor] | None = None
        outputs = []
        for start in range(0, length, window):
            output, (h, c) = lstm(hidden[:, start : start + window], state)
            state = (h.detach(), c.detach())
            outputs.append(output)
        if reaches_first_position(torch.cat(outputs, dim=1), hidden):
            return window
    return None


def autograd_depth(output: Tensor) -> int:
    """Length of the longest chain of autograd nodes behind a tensor.

    Parameters
    ----------
    output : torch.Tensor, any shape
        A tensor with a ``grad_fn``.

    Returns
    -------
    int
        Nodes on the longest path from ``output.grad_fn`` to a leaf, both ends included.

    Notes
    -----
    Every node must wait for the nodes it consumes, so this is the number of operations that must run one
    after another: the sequential operations of Table 1, counted in autograd nodes. Iterative, so a graph
    thousands of nodes deep does not hit the recursion limit.
    """
    root = output.grad_fn
    if root is None:
        return 0
    depth: dict[Any, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if node in depth:
            continue
        children = [child for child, _ in node.next_functions if child is not None]
        if expanded:
            depth[node] = 1 + max((depth[child] for child in children), default=0)
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in children if child not in depth)
    return depth[root]


def layer_graph_depth(name: str, length: int, d_model: int, settings: Table1Settings) -> int:
    """Autograd depth of one layer's output at length n.

    Parameters
    ----------
    name : str
        A :data:`LAYER_KINDS` name.
    length : int
        n.
    d_model : int
        d.
    settings : Table1Settings
        Heads, r and k.

    Returns
    -------
    int
        :func:`autograd_depth` of the layer's output; the LSTM is unrolled into cell steps
        (:meth:`RecurrentLayer.unrolled`), since the fused kernel is one node whatever n.

    Notes
    -----
    Measured at two lengths by :func:`measure_structure`: a depth that does not change with n means O(1)
    sequential operations.
    """
    torch.manual_seed(0)
    layer = build_layer(name, d_model, settings)
    hidden = torch.randn(1, length, d_model, requires_grad=True)
    output = layer.unrolled(hidden) if isinstance(layer, RecurrentLayer) else layer(hidden)
    return autograd_depth(output)


def expected_path(name: str, length: int, settings: Table1Settings) -> int:
    """Give the path length Table 1's reasoning predicts for this layer at length n.

    Parameters
    ----------
    name : str
        A :data:`LAYER_KINDS` name.
    length : int
        n.
    settings : Table1Settings
        r and k.

    Returns
    -------
    int
        Layers (recurrent steps for the LSTM) between input position 0 and output position n - 1.

    Notes
    -----
    Self-attention 1; restricted ceil((n - 1) / r); contiguous and separable convolutions
    ceil((n - 1) / (k - 1)); dilated the smallest L with k^L >= n; the LSTM n steps.
    """
    r, k = settings.window, settings.kernel
    if name == "self_attention":
        return 1
    if name in ("restricted_masked", "restricted_banded"):
        return -(-(length - 1) // r)
    if name in ("convolution", "separable_convolution"):
        return -(-(length - 1) // (k - 1))
    if name == "dilated_convolution":
        layers = 0
        while k**layers < length:
            layers += 1
        return layers
    if name == "recurrent":
        return length
    raise ValueError(f"unknown layer kind {name!r}")


def measure_structure(settings: Table1Settings) -> dict[str, dict[str, Any]]:
    """Measure the path length and the sequential operations of every layer kind.

    Parameters
    ----------
    settings : Table1Settings
        ``path_length`` and ``path_width``, r and k.

    Returns
    -------
    dict of str to dict
        Per layer kind: ``path`` (measured), ``path_expected``, ``path_unit`` (``layers`` or ``recurrent
        steps``), ``depth_short`` and ``depth_long`` (autograd depth at n / 2 and n), ``depth_per_position``
        and ``sequential`` (1, or ``"n"`` when the depth grows with n).

    Notes
    -----
    Runs on the CPU at a small width; the dependence structure does not depend on d or the device.
    """
    length, width = settings.path_length, settings.path_width
    short = length // 2
    results: dict[str, dict[str, Any]] = {}
    for kind in LAYER_KINDS:
        if kind.name == "recurrent":
            path, unit = recurrent_steps_until_connected(length, width), "recurrent steps (1 layer)"
        else:
            path = layers_until_connected(kind.name, length, width, settings, max_layers=length)
            unit = "layer" if path == 1 else "layers"
        depth_short = layer_graph_depth(kind.name, short, width, settings)
        depth_long = layer_graph_depth(kind.name, length, width, settings)
        per_position = (depth_long - depth_short) / (length - short)
        results[kind.name] = {
            "path": path,
            "path_expected": expected_path(kind.name, length, settings),
            "path_unit": unit,
            "depth_short": depth_short,
            "depth_long": depth_long,
            "depth_per_position": per_position,
            "sequential": 1 if depth_long == depth_short else "n",
        }
    return results
