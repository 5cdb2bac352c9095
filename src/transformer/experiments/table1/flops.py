"""FLOPs of one forward+backward pass: counted by ``torch.utils.flop_counter``, analytic where the counter is blind."""

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, conv_flop_count

from transformer.experiments.table1.layers import RecurrentLayer, build_layer
from transformer.experiments.table1.settings import Table1Settings


def analytic_flops(name: str, length: int, d_model: int, settings: Table1Settings) -> int:
    """FLOPs of one forward+backward pass of a layer, from its formula.

    Parameters
    ----------
    name : str
        A timed :data:`LAYER_KINDS` name.
    length : int
        n.
    d_model : int
        d.
    settings : Table1Settings
        r, k and the batch.

    Returns
    -------
    int
        Matrix-product and convolution FLOPs (a multiply-add counts 2), forward and backward with the input's
        gradient, times the batch.

    Notes
    -----
    The convention of ``FlopCounterMode``: element-wise work (softmax, gates, biases) is not counted. A
    backward pass costs twice its forward (the input's and the weights' gradients), except the LSTM's initial
    state, which needs no gradient. Self-attention: 8nd² (four projections) + 4n²d (scores and weighted
    sum) forward; the window-masked variant computes all n² scores too; the banded one 12·r·n'·d for n' = n
    rounded up to a multiple of r (:func:`banded_attention`). LSTM: 16nd²
    forward (four gates from input and state). Convolution: 2knd²; separable: 2knd + 2nd².
    """
    n, d, r, k = length, d_model, settings.window, settings.kernel
    if name in ("self_attention", "restricted_masked"):
        forward = 8 * n * d * d + 4 * n * n * d
    elif name == "restricted_banded":
        forward = 8 * n * d * d + 12 * -(-n // r) * r * r * d
    elif name == "recurrent":
        return settings.batch * (48 * n * d * d - 8 * d * d)
    elif name in ("convolution", "dilated_convolution"):
        forward = 2 * k * n * d * d
    elif name == "separable_convolution":
        forward = 2 * k * n * d + 2 * n * d * d
    else:
        raise ValueError(f"unknown layer kind {name!r}")
    return settings.batch * 3 * forward


def _shape(value: Any) -> list[int]:
    return list(value.shape) if hasattr(value, "shape") else list(value)


def grouped_conv_backward_flops(
    grad_out_shape: Sequence[int],
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    _bias: Any,
    _stride: Any,
    _padding: Any,
    _dilation: Any,
    transposed: bool,
    _output_padding: Any,
    _groups: int,
    output_mask: Sequence[bool],
    out_shape: Sequence[Any],
    **kwargs: Any,
) -> int:
    """FLOPs of ``aten.convolution_backward``, right for grouped convolutions too.

    Parameters
    ----------
    grad_out_shape, x_shape, w_shape : sequence of int
        Shapes of the output's gradient, the input and the weight (``(c_out, c_in / groups, *kernel)``).
    _bias, _stride, _padding, _dilation, _output_padding : Any
        Unused.
    transposed : bool
        Whether the convolution is transposed.
    _groups : int
        Unused: the weight's shape already holds the grouping.
    output_mask : sequence of bool
        Which of the input's, the weight's and the bias's gradients are computed.
    out_shape : sequence
        Shapes of those gradients.
    **kwargs : Any
        Unused.

    Returns
    -------
    int
        FLOPs of the input's gradient plus the weight's gradient.

    Notes
    -----
    The weight's gradient multiplies every weight with every output position it touched once: the same count
    as the forward convolution. ``torch.utils.flop_counter`` (2.13) counts it as an ungrouped convolution, so
    a depthwise layer's weight gradient comes out d times too large; this formula replaces it in
    :func:`counted_flops` (the same fix as pytorch/pytorch pull request 183405).
    """
    flops = 0
    if output_mask[0]:
        flops += conv_flop_count(
            list(grad_out_shape), list(w_shape), _shape(out_shape[0]), transposed=not transposed
        )
    if output_mask[1]:
        flops += conv_flop_count(list(x_shape), list(w_shape), list(grad_out_shape), transposed=transposed)
    return flops


def counted_flops(name: str, length: int, d_model: int, settings: Table1Settings) -> tuple[int, str]:
    """Count the FLOPs of one forward+backward pass with ``FlopCounterMode``, on the meta device.

    Parameters
    ----------
    name : str
        A timed :data:`LAYER_KINDS` name.
    length : int
        n.
    d_model : int
        d.
    settings : Table1Settings
        Heads, r, k and the batch.

    Returns
    -------
    flops : int
        The count.
    source : str
        How it was obtained, for the report.

    Notes
    -----
    Meta tensors have shapes but no data, so counting costs no arithmetic and every point of the grid is
    counted, timed or not. Attention is counted on its explicit path: the fused CPU kernel
    (``_scaled_dot_product_flash_attention_for_cpu``) has no formula in ``FlopCounterMode`` and would count
    as zero; the arithmetic is the same. The fused LSTM kernel also counts as zero, so the LSTM gets its
    analytic count (checked against the counter on the unrolled cell by :func:`check_recurrent_formula`).
    Grouped convolutions use :func:`grouped_conv_backward_flops`.
    """
    if name == "recurrent":
        return analytic_flops(name, length, d_model, settings), "analytic (FlopCounterMode counts 0)"
    with torch.device("meta"):
        layer = build_layer(name, d_model, settings, implementation="explicit")
        hidden = torch.empty(settings.batch, length, d_model, requires_grad=True)
    counter = FlopCounterMode(
        display=False, custom_mapping={torch.ops.aten.convolution_backward: grouped_conv_backward_flops}
    )
    with counter:
        layer(hidden).sum().backward()
    source = "FlopCounterMode"
    if "attention" in name:
        source += " (explicit attention path)"
    if name == "separable_convolution":
        source += " (grouped weight gradient corrected)"
    return int(counter.get_total_flops()), source


def check_recurrent_formula(length: int, d_model: int, settings: Table1Settings) -> tuple[int, int]:
    """Count the unrolled LSTM with ``FlopCounterMode`` beside the analytic formula.

    Parameters
    ----------
    length : int
        n.
    d_model : int
        d.
    settings : Table1Settings
        The batch.

    Returns
    -------
    counted : int
        ``FlopCounterMode`` on :meth:`RecurrentLayer.unrolled` (meta device).
    analytic : int
        :func:`analytic_flops` for ``recurrent``.

    Notes
    -----
    The two are equal when the formula is right; the report prints both.
    """
    with torch.device("meta"):
        layer = RecurrentLayer(d_model)
        hidden = torch.empty(settings.batch, length, d_model, requires_grad=True)
    with FlopCounterMode(display=False) as counter:
        layer.unrolled(hidden).sum().backward()  # type: ignore[no-untyped-call]
    return int(counter.get_total_flops()), analytic_flops("recurrent", length, d_model, settings)
