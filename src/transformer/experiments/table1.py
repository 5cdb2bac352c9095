"""``transformer experiment table1``: the paper's Table 1 measured instead of quoted.

Table 1 compares layer types by complexity per layer, sequential operations and maximum path length. This
module measures all three for self-attention (this package's :class:`MultiHeadAttention`), restricted
self-attention with a window of r positions on each side (the same module with
:func:`~transformer.model.masks.build_window_mask`, and a banded version that computes only the 2r + 1
scores per query), a recurrent layer (``nn.LSTM``), a convolution with kernel k (contiguous, and a dilated
stack for the path length) and a depthwise-separable convolution:

* forward+backward seconds (median of several repetitions after a warm-up), FLOPs counted by
  ``torch.utils.flop_counter.FlopCounterMode`` (on the meta device, so even points too slow to time are
  counted) and the activation memory the layer keeps for backward, over n in {16, ..., 4096} and d in
  {128, 512, 1024}; log-log slopes of time and FLOPs in n and in d beside the paper's O(.);
* the maximum path length: how many stacked layers (or, for the LSTM, recurrent steps) it takes before
  output position n - 1 gets a non-zero gradient from input position 0;
* the sequential operations: the depth of the autograd graph of one layer at two lengths (constant: O(1);
  growing with n: one dependent step per position);
* where self-attention stops being faster than the LSTM at each d (the paper: when n < d).

Unlike the training experiments it has no ``build_plan``: it defines :func:`run_measurement`, which
``transformer experiment table1`` calls instead of the runner. Its output directory holds ``table1.md``,
``measurements.jsonl`` (one line per (layer, n, d) point, rewritten on every run), ``structure.json`` (path
lengths and graph depths) and the plots ``time_vs_n.png`` and ``flops_vs_n.png``.

Scales: ``cpu`` (the issue's grid, within 15 minutes on two CPU cores: a layer's larger n are skipped at a d
once its forward+backward is predicted to take over two seconds, and the report lists what was skipped),
``gpu`` and ``paper`` (the same grid with a larger time budget per point) and ``tiny`` (small n and d, for
tests).
"""

import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode, conv_flop_count

from transformer.atomic_files import write_json_atomically, write_text_atomically
from transformer.autotune.machine import describe_cpu
from transformer.experiments.results import append_result
from transformer.model.masks import build_window_mask
from transformer.model.multihead_attention import MultiHeadAttention, merge_heads

MEASUREMENTS_FILE = "measurements.jsonl"
STRUCTURE_FILE = "structure.json"
REPORT_FILE = "table1.md"
TIME_PLOT_FILE = "time_vs_n.png"
FLOPS_PLOT_FILE = "flops_vs_n.png"
#: How many of the largest lengths the slope in n is fitted on (fixed costs dominate the smallest ones).
SLOPE_POINTS = 4


@dataclass(frozen=True)
class Table1Settings:
    """The grid and the budgets of one scale.

    Parameters
    ----------
    lengths : tuple of int
        Sequence lengths n, increasing.
    widths : tuple of int
        Model widths d, increasing.
    num_heads : int
        Heads of the attention layers (d must divide by it).
    window : int
        r of restricted self-attention: a query sees r positions on each side.
    kernel : int
        k of the convolutions.
    batch : int
        Sequences per forward pass.
    point_budget_seconds : float
        A layer's larger lengths are skipped at a width once one forward+backward is predicted (or measured)
        to take longer than this.
    total_budget_seconds : float
        Timing stops (and the remaining points are listed as skipped) after this many seconds.
    repeat_seconds : float
        Repetitions per point aim at this much time in total, between ``min_repeats`` and ``max_repeats``.
    min_repeats : int
        Fewest timed repetitions per point (after one warm-up).
    max_repeats : int
        Most timed repetitions per point.
    path_length : int
        n of the path-length and graph-depth measurements.
    path_width : int
        d of those measurements.
    reference_length : int
        n at which the slope in d, the FLOPs and the memory are reported.
    reference_width : int
        d at which the FLOPs and the memory are reported.

    Notes
    -----
    Built by :func:`scale_settings`; recorded in ``structure.json`` so a report says what produced it.
    """

    lengths: tuple[int, ...]
    widths: tuple[int, ...]
    num_heads: int
    window: int
    kernel: int
    batch: int
    point_budget_seconds: float
    total_budget_seconds: float
    repeat_seconds: float
    min_repeats: int
    max_repeats: int
    path_length: int
    path_width: int
    reference_length: int
    reference_width: int


@dataclass(frozen=True)
class LayerKind:
    """One row of Table 1, with the paper's entries.

    Parameters
    ----------
    name : str
        Identifier in ``measurements.jsonl``, e.g. ``"self_attention"``.
    label : str
        Row label of the report.
    complexity : str
        The paper's complexity per layer, e.g. ``"O(n²·d)"``.
    exponents : str
        The exponents of n and d that complexity predicts, e.g. ``"2, 1"``.
    sequential : str
        The paper's sequential operations.
    path : str
        The paper's maximum path length.
    timed : bool
        Whether its time, FLOPs and memory are measured (the dilated stack costs what the contiguous
        convolution costs per layer, so only its path length is).

    Notes
    -----
    Separable convolutions are not a row of Table 1; their complexity is quoted from section 4's text.
    """

    name: str
    label: str
    complexity: str
    exponents: str
    sequential: str
    path: str
    timed: bool = True


LAYER_KINDS = (
    LayerKind("self_attention", "Self-attention", "O(n²·d)", "2, 1", "O(1)", "O(1)"),
    LayerKind("recurrent", "Recurrent (LSTM)", "O(n·d²)", "1, 2", "O(n)", "O(n)"),
    LayerKind("convolution", "Convolutional (kernel k, contiguous)", "O(k·n·d²)", "1, 2", "O(1)", "O(n/k)"),
    LayerKind(
        "dilated_convolution",
        "Convolutional (kernel k, dilated stack)",
        "O(k·n·d²)",
        "1, 2",
        "O(1)",
        "O(log_k(n))",
        timed=False,
    ),
    LayerKind(
        "separable_convolution",
        "Separable convolution (kernel k)",
        "O(k·n·d + n·d²)",
        "1, 1 to 2",
        "O(1)",
        "O(n/k)",
    ),
    LayerKind(
        "restricted_masked",
        "Self-attention (restricted r, window mask)",
        "O(r·n·d)",
        "1, 1",
        "O(1)",
        "O(n/r)",
    ),
    LayerKind(
        "restricted_banded",
        "Self-attention (restricted r, banded)",
        "O(r·n·d)",
        "1, 1",
        "O(1)",
        "O(n/r)",
    ),
)
TIMED_KINDS = tuple(kind.name for kind in LAYER_KINDS if kind.timed)


def scale_settings(scale: str) -> Table1Settings:
    """Give the grid and budgets of a scale.

    Parameters
    ----------
    scale : str
        ``tiny``, ``cpu``, ``gpu`` or ``paper``.

    Returns
    -------
    Table1Settings
        The settings.

    Notes
    -----
    ``cpu`` covers n = 16 .. 4096 and d = 128, 512, 1024 (the issue's grid) with one sequence per pass, 8
    heads, r = 16 and k = 3; its budgets keep the whole measurement under 15 minutes on two CPU cores.
    ``gpu`` and ``paper`` use the same grid with ten seconds per point. Raises ValueError for another name.
    """
    full_grid = Table1Settings(
        lengths=tuple(2**power for power in range(4, 13)),
        widths=(128, 512, 1024),
        num_heads=8,
        window=16,
        kernel=3,
        batch=1,
        point_budget_seconds=2.0,
        total_budget_seconds=12 * 60.0,
        repeat_seconds=0.3,
        min_repeats=3,
        max_repeats=10,
        path_length=64,
        path_width=16,
        reference_length=512,
        reference_width=512,
    )
    if scale == "cpu":
        return full_grid
    if scale in ("gpu", "paper"):
        return replace(
            full_grid,
            point_budget_seconds=10.0,
            total_budget_seconds=60 * 60.0,
            repeat_seconds=0.5,
            min_repeats=5,
            max_repeats=50,
        )
    if scale == "tiny":
        return Table1Settings(
            lengths=(8, 16, 32),
            widths=(16, 32),
            num_heads=2,
            window=2,
            kernel=3,
            batch=1,
            point_budget_seconds=1.0,
            total_budget_seconds=60.0,
            repeat_seconds=0.01,
            min_repeats=2,
            max_repeats=3,
            path_length=16,
            path_width=8,
            reference_length=16,
            reference_width=32,
        )
    raise ValueError(f"table1: unknown scale {scale!r}; choose tiny, cpu, gpu or paper")


# ==============================================================================================================
# The layers
# ==============================================================================================================


def banded_attention(query: Tensor, key: Tensor, value: Tensor, window: int) -> Tensor:
    """Scaled dot-product attention over the 2r + 1 positions around each query, in blocks of r queries.

    Parameters
    ----------
    query, key, value : torch.Tensor, each shape (batch, num_heads, seq_len, head_dim)
        Projected heads.
    window : int
        r: a query at position i sees the keys i - r .. i + r that exist.

    Returns
    -------
    torch.Tensor, shape (batch, num_heads, seq_len, head_dim)
        The attention output per head, equal to full attention under ``build_window_mask(n, n, r, False)``.

    Notes
    -----
    The queries are cut into blocks of r; a block's window lies within its own block and the two beside it,
    so each block multiplies its r queries with those 3r keys (one matrix product per block, masked to the
    window) and the work is 12·r·n·d multiply-adds per pass of scores and weighted sum, O(r·n·d) in time and
    memory: Table 1's restricted row. Masking full attention (what :func:`build_window_mask` does) gives the
    same output but still computes all n² scores.
    """
    batch, heads, seq_len, head_dim = query.shape
    blocks = -(-seq_len // window)
    padded = blocks * window
    query_blocks = F.pad(query, (0, 0, 0, padded - seq_len)).reshape(batch, heads, blocks, window, head_dim)
    # Keys padded by r before and r + (padded - n) after: block j's keys are padded positions j·r .. j·r + 3r - 1.
    pad_keys = (0, 0, window, window + padded - seq_len)
    key_blocks = F.pad(key, pad_keys).unfold(2, 3 * window, window)  # (b, h, blocks, head_dim, 3r)
    value_blocks = F.pad(value, pad_keys).unfold(2, 3 * window, window)
    scores = torch.matmul(query_blocks, key_blocks) / math.sqrt(head_dim)  # (b, h, blocks, r, 3r)
    device = query.device
    block_start = torch.arange(blocks, device=device)[:, None, None] * window
    query_position = block_start + torch.arange(window, device=device)[None, :, None]
    key_position = block_start - window + torch.arange(3 * window, device=device)[None, None, :]
    allowed = (
        ((key_position - query_position).abs() <= window) & (key_position >= 0) & (key_position < seq_len)
    )
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    output = torch.matmul(weights, value_blocks.transpose(-1, -2))  # (b, h, blocks, r, head_dim)
    return output.reshape(batch, heads, padded, head_dim)[:, :, :seq_len]


class SelfAttentionLayer(nn.Module):
    """Self-attention over a (batch, n, d) input: full, window-masked or banded.

    Parameters
    ----------
    d_model : int
        d.
    num_heads : int
        Heads.
    window : int or None
        r of restricted self-attention; None attends everywhere.
    banded : bool
        With a window, compute only the scores of each block of r queries with the 3r keys around it
        (:func:`banded_attention`) instead of masking the full n x n scores.
    implementation : str
        ``implementation`` of :class:`MultiHeadAttention` (``"explicit"`` for FLOP counting: the fused CPU
        kernel is invisible to ``FlopCounterMode``).

    Notes
    -----
    All three variants use the same :class:`MultiHeadAttention` projections; the window-masked one is the
    module exactly as the package uses it, with :func:`build_window_mask`.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        window: int | None = None,
        banded: bool = False,
        implementation: str = "fused",
    ) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(d_model, num_heads, implementation=implementation)
        self.window = window
        self.banded = banded

    def forward(self, hidden: Tensor) -> Tensor:
        """Attend from every position.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, n, d)
            Input.

        Returns
        -------
        torch.Tensor, shape (batch, n, d)
            Output after the output projection.

        Notes
        -----
        The window mask is built on every call, as a model would.
        """
        if self.window is None:
            return self.attention(hidden, hidden, hidden)[0]
        if self.banded:
            query, key, value = self.attention.project_self(hidden)
            return self.attention.out_proj(merge_heads(banded_attention(query, key, value, self.window)))
        seq_len = hidden.shape[1]
        mask = build_window_mask(seq_len, seq_len, self.window, causal=False, device=hidden.device)
        return self.attention(hidden, hidden, hidden, mask)[0]


class CausalConvolution(nn.Module):
    """A causal convolution over a (batch, n, d) input: contiguous, dilated or depthwise-separable.

    Parameters
    ----------
    d_model : int
        Channels in and out.
    kernel : int
        k.
    dilation : int
        Spacing of the kernel's taps (1: contiguous).
    separable : bool
        A depthwise convolution (``groups=d``) followed by a pointwise 1x1 one.

    Notes
    -----
    Left-padded by (k - 1)·dilation, so position i sees i - (k - 1)·dilation .. i and a contiguous stack of
    L layers reaches L·(k - 1) positions back: ceil((n - 1) / (k - 1)) layers connect position 0 to n - 1,
    the paper's O(n/k). Dilations 1, k, k², ... reach k^L - 1 back: ceil(log_k(n)) layers.
    """

    def __init__(self, d_model: int, kernel: int, dilation: int = 1, separable: bool = False) -> None:
        super().__init__()
        self.padding = (kernel - 1) * dilation
        self.conv = nn.Conv1d(d_model, d_model, kernel, dilation=dilation, groups=d_model if separable else 1)
        self.pointwise = nn.Conv1d(d_model, d_model, 1) if separable else None

    def forward(self, hidden: Tensor) -> Tensor:
        """Convolve along the positions.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, n, d)
            Input.

        Returns
        -------
        torch.Tensor, shape (batch, n, d)
            Output.

        Notes
        -----
        ``nn.Conv1d`` wants channels first, hence the transposes.
        """
        output = self.conv(F.pad(hidden.transpose(1, 2), (self.padding, 0)))
        if self.pointwise is not None:
            output = self.pointwise(output)
        return output.transpose(1, 2)


class RecurrentLayer(nn.Module):
    """One ``nn.LSTM`` layer over a (batch, n, d) input, returning its outputs.

    Parameters
    ----------
    d_model : int
        Input and hidden size.

    Notes
    -----
    :meth:`unrolled` computes the same outputs one ``nn.LSTMCell`` step at a time with the same weights, so
    the autograd graph shows the dependent steps the fused kernel hides.
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(d_model, d_model, batch_first=True)

    def forward(self, hidden: Tensor) -> Tensor:
        """Run the LSTM.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, n, d)
            Input.

        Returns
        -------
        torch.Tensor, shape (batch, n, d)
            The hidden state at every position.

        Notes
        -----
        The hidden and cell states start at zero, as ``nn.LSTM`` does without an initial state.
        """
        return self.lstm(hidden)[0]

    def unrolled(self, hidden: Tensor) -> Tensor:
        """Run the same LSTM one cell step at a time.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, n, d)
            Input.

        Returns
        -------
        torch.Tensor, shape (batch, n, d)
            Equal to :meth:`forward` up to rounding.

        Notes
        -----
        Used to count the dependent steps and to check the analytic LSTM FLOP count with
        ``FlopCounterMode``, which sees no matrix product inside the fused ``nn.LSTM`` kernel.
        """
        weight_ih, weight_hh, bias_ih, bias_hh = self.lstm.all_weights[0]
        state = hidden.new_zeros(hidden.shape[0], self.lstm.hidden_size)
        cell = state
        outputs = []
        for position in range(hidden.shape[1]):
            state, cell = torch.lstm_cell(
                hidden[:, position], (state, cell), weight_ih, weight_hh, bias_ih, bias_hh
            )
            outputs.append(state)
        return torch.stack(outputs, dim=1)


def build_layer(
    name: str, d_model: int, settings: Table1Settings, implementation: str = "fused"
) -> nn.Module:
    """Build one layer of a kind.

    Parameters
    ----------
    name : str
        A :data:`LAYER_KINDS` name.
    d_model : int
        d.
    settings : Table1Settings
        Heads, r and k.
    implementation : str
        Attention implementation (see :class:`SelfAttentionLayer`).

    Returns
    -------
    torch.nn.Module
        Maps (batch, n, d) to (batch, n, d).

    Notes
    -----
    ``dilated_convolution`` builds the first layer of the stack (dilation 1); :func:`stack_layer` builds the
    others. Raises ValueError for an unknown name.
    """
    return stack_layer(name, d_model, settings, 0, implementation)


def stack_layer(
    name: str, d_model: int, settings: Table1Settings, index: int, implementation: str = "fused"
) -> nn.Module:
    """Build layer ``index`` (from 0) of a stack of one kind.

    Parameters
    ----------
    name : str
        A :data:`LAYER_KINDS` name.
    d_model : int
        d.
    settings : Table1Settings
        Heads, r and k.
    index : int
        Position in the stack; only the dilated convolution depends on it (dilation k^index).
    implementation : str
        Attention implementation.

    Returns
    -------
    torch.nn.Module
        The layer.

    Notes
    -----
    Raises ValueError for an unknown name.
    """
    heads = settings.num_heads if d_model % settings.num_heads == 0 else 1
    if name == "self_attention":
        return SelfAttentionLayer(d_model, heads, implementation=implementation)
    if name == "restricted_masked":
        return SelfAttentionLayer(d_model, heads, settings.window, implementation=implementation)
    if name == "restricted_banded":
        return SelfAttentionLayer(d_model, heads, settings.window, banded=True, implementation=implementation)
    if name == "recurrent":
        return RecurrentLayer(d_model)
    if name == "convolution":
        return CausalConvolution(d_model, settings.kernel)
    if name == "dilated_convolution":
        return CausalConvolution(d_model, settings.kernel, dilation=settings.kernel**index)
    if name == "separable_convolution":
        return CausalConvolution(d_model, settings.kernel, separable=True)
    raise ValueError(f"unknown layer kind {name!r}")


# ==============================================================================================================
# FLOPs
# ==============================================================================================================


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


# ==============================================================================================================
# Time and memory
# ==============================================================================================================


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work.

    Parameters
    ----------
    device : torch.device
        CPU or CUDA.

    Returns
    -------
    None

    Notes
    -----
    CUDA kernels run asynchronously: a clock read without this would time the launch, not the work.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def saved_activation_bytes(layer: nn.Module, hidden: Tensor) -> int:
    """Bytes of the tensors a forward pass keeps for backward, parameters left out.

    Parameters
    ----------
    layer : torch.nn.Module
        The layer.
    hidden : torch.Tensor, shape (batch, n, d)
        Its input (requires grad).

    Returns
    -------
    int
        Sum of the distinct storages saved by autograd, excluding those of the parameters.

    Notes
    -----
    ``torch.autograd.graph.saved_tensors_hooks`` sees every tensor autograd saves; storages are counted
    once however many tensors view them. This is the memory a layer holds between forward and backward (what
    grows with n and decides the largest trainable length), measured the same way on every device; on CPU
    ``tracemalloc`` cannot see torch's allocations. The input itself is counted when saved.
    """
    parameter_storages = {parameter.untyped_storage().data_ptr() for parameter in layer.parameters()}
    seen: dict[int, int] = {}

    def pack(tensor: Tensor) -> Tensor:
        try:
            storage = tensor.untyped_storage()
            pointer, size = storage.data_ptr(), storage.nbytes()
        except (RuntimeError, NotImplementedError):  # opaque tensors (e.g. MKLDNN) have no storage
            pointer, size = id(tensor), tensor.numel() * tensor.element_size()
        if pointer not in parameter_storages:
            seen[pointer] = max(seen.get(pointer, 0), size)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = layer(hidden)
    del output
    return sum(seen.values())


def time_forward_backward(
    layer: nn.Module, hidden: Tensor, device: torch.device, settings: Table1Settings
) -> dict[str, Any]:
    """Time forward+backward of one layer: a warm-up, then the median of several repetitions.

    Parameters
    ----------
    layer : torch.nn.Module
        The layer, on ``device``.
    hidden : torch.Tensor, shape (batch, n, d)
        Input on ``device``, requiring grad.
    device : torch.device
        Where it runs.
    settings : Table1Settings
        Repetition targets.

    Returns
    -------
    dict of str to Any
        ``seconds`` (median), ``repeats``, ``spread`` (max / min of the repetitions), and on CUDA
        ``cuda_peak_bytes`` (peak allocation of the warm-up above what was allocated before it).

    Notes
    -----
    Each repetition clears the gradients, runs forward, backpropagates a fixed random gradient of the output
    and synchronises; ``time.perf_counter`` brackets it. The number of repetitions is the warm-up's time
    divided into ``repeat_seconds``, clamped to ``min_repeats .. max_repeats``.
    """
    torch.manual_seed(0)
    upstream = torch.randn(hidden.shape, device=device)

    def step() -> float:
        layer.zero_grad(set_to_none=True)
        hidden.grad = None
        synchronize(device)
        start = time.perf_counter()
        layer(hidden).backward(upstream)
        synchronize(device)
        return time.perf_counter() - start

    measured: dict[str, Any] = {}
    if device.type == "cuda":
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        warm = step()
        measured["cuda_peak_bytes"] = int(torch.cuda.max_memory_allocated(device) - before)
    else:
        warm = step()
    repeats = int(min(settings.max_repeats, max(settings.min_repeats, settings.repeat_seconds // warm)))
    times = [step() for _ in range(repeats)]
    measured.update(
        seconds=statistics.median(times), repeats=repeats, spread=max(times) / max(min(times), 1e-12)
    )
    return measured


def predicted_seconds(times: Sequence[tuple[int, float]], length: int) -> float | None:
    """Extrapolate a layer's time to a longer length from its last two measurements.

    Parameters
    ----------
    times : sequence of (int, float)
        (n, seconds) measured so far at one width, increasing n.
    length : int
        The next n.

    Returns
    -------
    float or None
        Predicted seconds; None before the first measurement.

    Notes
    -----
    The local log-log slope is clamped to [1, 3]: at small n fixed costs make it look flatter than it will
    be, and no layer here grows faster than n² per pass.
    """
    if not times:
        return None
    last_length, last_seconds = times[-1]
    slope = 2.0
    if len(times) >= 2:
        previous_length, previous_seconds = times[-2]
        slope = math.log(last_seconds / max(previous_seconds, 1e-12)) / math.log(
            last_length / previous_length
        )
        slope = min(3.0, max(1.0, slope))
    return last_seconds * (length / last_length) ** slope


def resolve_device(device: str) -> torch.device:
    """Turn ``--device`` into a torch device.

    Parameters
    ----------
    device : str
        ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

    Returns
    -------
    torch.device
        CUDA for ``auto`` when available, else CPU.

    Notes
    -----
    The CLI has already refused a device this machine lacks.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def describe_device(device: torch.device) -> str:
    """Name the hardware of the measurement.

    Parameters
    ----------
    device : torch.device
        CPU or CUDA.

    Returns
    -------
    str
        The GPU's name, or the CPU model and flags (:func:`describe_cpu`).

    Notes
    -----
    Recorded on every line of ``measurements.jsonl``.
    """
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    return describe_cpu()


def measure_points(
    settings: Table1Settings,
    device: torch.device,
    measurements: Path,
    report: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Measure every (layer, n, d) point of the grid that fits the budgets, and count every point's FLOPs.

    Parameters
    ----------
    settings : Table1Settings
        Grid and budgets.
    device : torch.device
        Where layers run.
    measurements : Path
        ``measurements.jsonl``; each point is appended as it finishes.
    report : callable
        Receives one progress line per length.

    Returns
    -------
    list of dict
        One record per point: ``layer``, ``n``, ``d``, ``batch``, ``seconds`` (None when skipped, with
        ``skipped`` saying why), ``repeats``, ``spread``, ``flops``, ``flops_source``, ``flops_analytic``,
        ``memory_bytes``, ``memory_source``, ``device``, ``machine``, ``threads``.

    Notes
    -----
    Lengths are the outer loop, so when the total budget runs out it is the longest sequences that go
    unmeasured, at every width and layer alike. At a width, a layer whose next point is predicted
    (:func:`predicted_seconds`) to exceed ``point_budget_seconds`` is skipped from that length on.
    """
    machine = describe_device(device)
    started = time.perf_counter()
    layers: dict[tuple[str, int], nn.Module] = {}
    times: dict[tuple[str, int], list[tuple[int, float]]] = {}
    stopped: dict[tuple[str, int], str] = {}
    records = []
    for length in settings.lengths:
        for d_model in settings.widths:
            for name in TIMED_KINDS:
                key = (name, d_model)
                flops, flops_source = counted_flops(name, length, d_model, settings)
                record: dict[str, Any] = {
                    "layer": name,
                    "n": length,
                    "d": d_model,
                    "batch": settings.batch,
                    "seconds": None,
                    "flops": flops,
                    "flops_source": flops_source,
                    "flops_analytic": analytic_flops(name, length, d_model, settings),
                    "memory_bytes": None,
                    "memory_source": "saved tensors (saved_tensors_hooks), parameters excluded",
                    "device": str(device),
                    "machine": machine,
                    "threads": torch.get_num_threads(),
                }
                prediction = predicted_seconds(times.get(key, []), length)
                if key not in stopped and time.perf_counter() - started > settings.total_budget_seconds:
                    stopped[key] = (
                        f"the run's timing budget of {settings.total_budget_seconds:.0f} s was spent"
                    )
                elif (
                    key not in stopped
                    and prediction is not None
                    and prediction > settings.point_budget_seconds
                ):
                    stopped[key] = (
                        f"predicted {prediction:.2f} s per pass > {settings.point_budget_seconds:g} s budget"
                    )
                if key in stopped:
                    record["skipped"] = stopped[key]
                else:
                    if key not in layers:
                        torch.manual_seed(0)
                        layers[key] = build_layer(name, d_model, settings).to(device)
                    layer = layers[key]
                    torch.manual_seed(1)
                    hidden = torch.randn(settings.batch, length, d_model, device=device, requires_grad=True)
                    record.update(time_forward_backward(layer, hidden, device, settings))
                    record["memory_bytes"] = saved_activation_bytes(layer, hidden)
                    times.setdefault(key, []).append((length, record["seconds"]))
                    if record["seconds"] > settings.point_budget_seconds:
                        stopped[key] = (
                            f"n = {length} took {record['seconds']:.2f} s > {settings.point_budget_seconds:g} s"
                        )
                append_result(measurements, record)
                records.append(record)
        timed = sum(1 for record in records if record["n"] == length and record["seconds"] is not None)
        report(
            f"table1: n = {length}: {timed} of {len(settings.widths) * len(TIMED_KINDS)} points timed, "
            f"{time.perf_counter() - started:.0f} s so far"
        )
    return records


# ==============================================================================================================
# Path length and sequential operations
# ==============================================================================================================


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


# ==============================================================================================================
# Slopes, crossover, report
# ==============================================================================================================


def fit_loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y against log x.

    Parameters
    ----------
    xs : sequence of float
        Positive abscissae, at least two distinct.
    ys : sequence of float
        Positive ordinates, as many.

    Returns
    -------
    float
        The exponent p of the best fit y ~ c·x^p.

    Notes
    -----
    Raises ValueError with fewer than two distinct x or a non-positive value.
    """
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError("a slope needs at least two distinct points")
    if min(xs) <= 0 or min(ys) <= 0:
        raise ValueError("log-log slopes need positive values")
    log_x = [math.log(x) for x in xs]
    log_y = [math.log(y) for y in ys]
    mean_x, mean_y = statistics.fmean(log_x), statistics.fmean(log_y)
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in zip(log_x, log_y, strict=True))
    variance = sum((x - mean_x) ** 2 for x in log_x)
    return covariance / variance


def _slope(points: Iterable[tuple[float, float | None]], last: int | None = None) -> float | None:
    usable = sorted((x, y) for x, y in points if y is not None and y > 0)
    if last is not None:
        usable = usable[-last:]
    if len({x for x, _ in usable}) < 2:
        return None
    return fit_loglog_slope([x for x, _ in usable], [y for _, y in usable])


def point(records: Sequence[dict[str, Any]], layer: str, length: int, d_model: int) -> dict[str, Any] | None:
    """Find one point's record.

    Parameters
    ----------
    records : sequence of dict
        Measurement records.
    layer : str
        Layer kind.
    length : int
        n.
    d_model : int
        d.

    Returns
    -------
    dict or None
        The record, None when the grid has no such point.

    Notes
    -----
    Linear search: the grid has a few hundred points.
    """
    for record in records:
        if record["layer"] == layer and record["n"] == length and record["d"] == d_model:
            return record
    return None


def slopes(records: Sequence[dict[str, Any]], layer: str, settings: Table1Settings) -> dict[str, Any]:
    """Fit the log-log slopes of time and FLOPs in n (per d) and in d (at the reference n).

    Parameters
    ----------
    records : sequence of dict
        Measurement records.
    layer : str
        Layer kind.
    settings : Table1Settings
        Grid and reference length.

    Returns
    -------
    dict of str to Any
        ``time_n`` and ``flops_n`` (d -> slope or None), ``time_d`` and ``flops_d`` (slope or None).

    Notes
    -----
    Slopes in n use the :data:`SLOPE_POINTS` largest lengths measured (timed, for time; of the grid, for
    FLOPs), where fixed per-call costs matter least; slopes in d use every width at ``reference_length``.
    """
    mine = [record for record in records if record["layer"] == layer]
    time_n, flops_n = {}, {}
    for d_model in settings.widths:
        at_d = [record for record in mine if record["d"] == d_model]
        time_n[d_model] = _slope(((r["n"], r["seconds"]) for r in at_d), SLOPE_POINTS)
        flops_n[d_model] = _slope(((r["n"], r["flops"]) for r in at_d), SLOPE_POINTS)
    at_n = [record for record in mine if record["n"] == settings.reference_length]
    return {
        "time_n": time_n,
        "flops_n": flops_n,
        "time_d": _slope((r["d"], r["seconds"]) for r in at_n),
        "flops_d": _slope((r["d"], r["flops"]) for r in at_n),
    }


def crossover(records: Sequence[dict[str, Any]], d_model: int, settings: Table1Settings) -> dict[str, Any]:
    """Where self-attention stops being cheaper than the LSTM at one width.

    Parameters
    ----------
    records : sequence of dict
        Measurement records.
    d_model : int
        d.
    settings : Table1Settings
        The lengths.

    Returns
    -------
    dict of str to Any
        ``time_faster`` and ``time_slower`` (lengths, both timed, where attention's forward+backward is
        faster / slower), ``time_largest`` (the largest faster one or None), ``flops_largest`` (the largest
        length where attention needs fewer FLOPs, or None) and ``paper`` (the largest grid length below d).

    Notes
    -----
    The paper's "self-attention layers are faster than recurrent layers when the sequence length n is
    smaller than the representation dimensionality d" compares n²·d with n·d²; counting the projections,
    attention's 24nd² + 12n²d FLOPs beat the LSTM's 48nd² while n < 2d.
    """
    faster: list[int] = []
    slower: list[int] = []
    fewer: list[int] = []
    for length in settings.lengths:
        attention = point(records, "self_attention", length, d_model)
        recurrent = point(records, "recurrent", length, d_model)
        if attention is None or recurrent is None:
            continue
        if attention["flops"] < recurrent["flops"]:
            fewer.append(length)
        if attention["seconds"] is not None and recurrent["seconds"] is not None:
            (faster if attention["seconds"] < recurrent["seconds"] else slower).append(length)
    below_d = [length for length in settings.lengths if length < d_model]
    return {
        "time_faster": faster,
        "time_slower": slower,
        "time_largest": max(faster) if faster else None,
        "flops_largest": max(fewer) if fewer else None,
        "paper": max(below_d) if below_d else None,
    }


def _format_slope(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _format_si(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _format_bytes(value: int | None) -> str:
    if value is None:
        return "-"
    for factor, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if value >= factor:
            return f"{value / factor:.3g} {unit}"
    return f"{value} B"


def _format_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} µs"


def render_report(
    settings: Table1Settings,
    scale: str,
    records: Sequence[dict[str, Any]],
    structure: dict[str, dict[str, Any]],
    recurrent_check: tuple[int, int],
    elapsed_seconds: float,
) -> str:
    """Write ``table1.md``: the measured Table 1 beside the paper's.

    Parameters
    ----------
    settings : Table1Settings
        The grid.
    scale : str
        Its name.
    records : sequence of dict
        Measurement records.
    structure : dict
        :func:`measure_structure`'s results.
    recurrent_check : (int, int)
        :func:`check_recurrent_formula`'s counted and analytic LSTM FLOPs.
    elapsed_seconds : float
        Wall-clock time of the whole measurement.

    Returns
    -------
    str
        Markdown.

    Notes
    -----
    Four tables (complexity, sequential operations and path length, crossover, skipped points) and the
    methods, so the file stands on its own in EXPERIMENTS.md.
    """
    first = records[0] if records else {}
    widths = " / ".join(str(d) for d in settings.widths)
    n_ref, d_ref = settings.reference_length, settings.reference_width
    lines = [
        "# Table 1, measured",
        "",
        f"Scale `{scale}`: n in {{{', '.join(str(n) for n in settings.lengths)}}}, d in "
        f"{{{', '.join(str(d) for d in settings.widths)}}}, "
        f"batch {settings.batch}, {settings.num_heads} heads, window r = {settings.window}, kernel k = "
        f"{settings.kernel}. Device `{first.get('device', '-')}` ({first.get('machine', '-')}, "
        f"{first.get('threads', '-')} threads), torch {torch.__version__}; {elapsed_seconds / 60:.1f} minutes.",
        "",
        "## Complexity per layer",
        "",
        f"Slopes of log(time) and log(FLOPs) against log(n) at d = {widths} (fitted on the {SLOPE_POINTS} "
        f"largest n measured) and against log(d) at n = {n_ref}; FLOPs (forward+backward) and activation "
        f"memory kept for backward at n = {n_ref}, d = {d_ref}.",
        "",
        "| Layer type | Paper: complexity | Paper: exponents of n, d | Time slope in n | FLOP slope in n "
        "| Time slope in d | FLOP slope in d | FLOPs | Time | Memory |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in LAYER_KINDS:
        if not kind.timed:
            continue
        fitted = slopes(records, kind.name, settings)
        reference = point(records, kind.name, n_ref, d_ref) or {}
        cells = [
            kind.label,
            kind.complexity,
            kind.exponents,
            " / ".join(_format_slope(fitted["time_n"][d]) for d in settings.widths),
            " / ".join(_format_slope(fitted["flops_n"][d]) for d in settings.widths),
            _format_slope(fitted["time_d"]),
            _format_slope(fitted["flops_d"]),
            _format_si(reference.get("flops"), "FLOP"),
            _format_seconds(reference.get("seconds")),
            _format_bytes(reference.get("memory_bytes")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Sequential operations and maximum path length",
        "",
        f"Measured at n = {settings.path_length}, d = {settings.path_width}. Path length: layers stacked (for "
        "the LSTM, recurrent steps within one layer) before output position n - 1 gets a non-zero gradient "
        "from input position 0. Sequential operations: depth of one layer's autograd graph (nodes that must "
        f"run one after another) at n = {settings.path_length // 2} and n = {settings.path_length}; the LSTM "
        "is unrolled into cell steps, since its fused kernel is a single node.",
        "",
        "| Layer type | Paper: sequential ops | Measured sequential ops | Graph depth (n/2, n) "
        "| Paper: max path length | Measured path length | Expected |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in LAYER_KINDS:
        found = structure[kind.name]
        sequential = (
            "O(1)"
            if found["sequential"] == 1
            else f"O(n): +{found['depth_per_position']:.3g} nodes per position"
        )
        cells = [
            kind.label,
            kind.sequential,
            sequential,
            f"{found['depth_short']}, {found['depth_long']}",
            kind.path,
            f"{found['path'] if found['path'] is not None else 'not connected'} {found['path_unit']}",
            str(found["path_expected"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Where self-attention stops being cheaper than recurrence",
        "",
        "Self-attention against the LSTM, forward+backward. The paper: self-attention is faster when n < d.",
        "",
        "| d | Paper: largest n < d | Largest n with attention faster (time) | n where attention was slower "
        "| Largest n with fewer attention FLOPs |",
        "|---|---|---|---|---|",
    ]
    for d_model in settings.widths:
        found = crossover(records, d_model, settings)
        measured = [record for record in records if record["d"] == d_model and record["seconds"] is not None]
        longest = max((record["n"] for record in measured), default=None)
        largest = found["time_largest"]
        cells = [
            str(d_model),
            str(found["paper"] if found["paper"] is not None else "-"),
            "-" if largest is None else str(largest),
            ", ".join(str(n) for n in found["time_slower"]) or f"none up to n = {longest}",
            str(found["flops_largest"] if found["flops_largest"] is not None else "-"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    counted, analytic = recurrent_check
    skipped: dict[tuple[str, int], list[int]] = {}
    reasons: dict[tuple[str, int], str] = {}
    for record in records:
        if record.get("skipped"):
            skipped.setdefault((record["layer"], record["d"]), []).append(record["n"])
            reasons.setdefault((record["layer"], record["d"]), record["skipped"])
    lines += [
        "",
        "## Skipped points",
        "",
    ]
    if skipped:
        lines += [
            "Timing stops for a layer at a width once one pass is predicted (from the last two lengths) or "
            f"measured to take over {settings.point_budget_seconds:g} s, or when the run's "
            f"{settings.total_budget_seconds / 60:.0f}-minute timing budget is spent; their FLOPs are still "
            "counted.",
            "",
            "| Layer | d | n not timed | Why |",
            "|---|---|---|---|",
        ]
        for (layer, d_model), lengths in skipped.items():
            lines.append(
                f"| {layer} | {d_model} | {', '.join(str(n) for n in lengths)} | {reasons[(layer, d_model)]} |"
            )
    else:
        lines.append("None: every point was timed.")
    lines += [
        "",
        "## How it was measured",
        "",
        f"* Time: median of {settings.min_repeats} to {settings.max_repeats} forward+backward passes after one "
        "warm-up, `time.perf_counter` (with `torch.cuda.synchronize` on a GPU); the backward pass "
        "propagates a random gradient of the output to the input and the weights.",
        "* FLOPs: `torch.utils.flop_counter.FlopCounterMode` on the meta device (a multiply-add counts 2; "
        "element-wise work is not counted). Attention is counted on its explicit path, since the fused CPU "
        "kernel has no formula there and counts 0; the fused `nn.LSTM` kernel also counts 0, so the LSTM "
        f"has the analytic 48nd² - 8d², which the counter confirms on the unrolled cell ({counted} counted, "
        f"{analytic} analytic at n = {settings.path_length}, d = {settings.path_width}); the counter's "
        "formula for a grouped convolution's weight gradient counts it as ungrouped (d times too many for "
        "the depthwise layer), so that term is replaced by the forward count.",
        "* Memory: bytes of the distinct storages autograd saves for backward "
        "(`torch.autograd.graph.saved_tensors_hooks`), parameters excluded; on a GPU `measurements.jsonl` "
        "also has `cuda_peak_bytes`. The fused attention kernel saves O(n) statistics, not the n² weights "
        "(the window-masked variant also keeps its n x n boolean mask).",
        "* The window-masked restricted attention is the package's module with `build_window_mask`: the mask "
        "hides scores but all n² are still computed, so its time and FLOPs grow like full attention's; the "
        "banded variant multiplies each block of r queries with the 3r keys around it only (masked to the "
        "window) and shows the O(r·n·d) of the table.",
        "* Convolutions are causal (left-padded), as in the paper's references; the dilated stack uses "
        "dilations 1, k, k², ....",
        "",
    ]
    return "\n".join(lines)


def plot_measurements(
    records: Sequence[dict[str, Any]], settings: Table1Settings, output_dir: Path
) -> list[Path]:
    """Plot time and FLOPs against n per layer type, log-log, one panel per d.

    Parameters
    ----------
    records : sequence of dict
        Measurement records.
    settings : Table1Settings
        The widths.
    output_dir : Path
        Where ``time_vs_n.png`` and ``flops_vs_n.png`` go.

    Returns
    -------
    list of Path
        The two figures.

    Notes
    -----
    Only timed points are drawn on the time plot; every point has FLOPs.
    """
    from matplotlib.figure import Figure

    from transformer.visualization.attention_plot import save_figure_atomically

    labels = {kind.name: kind.label for kind in LAYER_KINDS}
    paths = []
    for key, file_name, ylabel in (
        ("seconds", TIME_PLOT_FILE, "forward+backward seconds"),
        ("flops", FLOPS_PLOT_FILE, "forward+backward FLOPs"),
    ):
        figure = Figure(figsize=(4.5 * len(settings.widths), 4.2))
        axes = figure.subplots(1, len(settings.widths), squeeze=False)[0]
        for panel, d_model in zip(axes, settings.widths, strict=True):
            for name in TIMED_KINDS:
                found = sorted(
                    (record["n"], record[key])
                    for record in records
                    if record["layer"] == name and record["d"] == d_model and record[key] is not None
                )
                if found:
                    panel.plot(
                        [n for n, _ in found], [y for _, y in found], marker="o", ms=3, label=labels[name]
                    )
            panel.set_xscale("log", base=2)
            panel.set_yscale("log")
            panel.set(title=f"d = {d_model}", xlabel="sequence length n", ylabel=ylabel)
            panel.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=7)
        figure.tight_layout()
        path = output_dir / file_name
        save_figure_atomically(figure, path)
        paths.append(path)
    return paths


def run_measurement(output_dir: Path, device: str, scale: str, report: Callable[[str], None]) -> Path:
    """Measure Table 1 and write its report, measurements and plots.

    Parameters
    ----------
    output_dir : Path
        Created if missing; ``measurements.jsonl`` there is replaced.
    device : str
        ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    scale : str
        ``tiny``, ``cpu``, ``gpu`` or ``paper``.
    report : callable
        Receives one-line progress notes.

    Returns
    -------
    Path
        ``table1.md``.

    Notes
    -----
    The entry point of a measurement experiment: ``transformer experiment table1`` calls it in place of the
    training runner. A rerun measures everything again (timings are of the machine at that moment).
    """
    settings = scale_settings(scale)
    torch_device = resolve_device(device)
    started = time.perf_counter()
    output_dir.mkdir(parents=True, exist_ok=True)
    measurements = output_dir / MEASUREMENTS_FILE
    measurements.unlink(missing_ok=True)
    report(f"table1: measuring {len(TIMED_KINDS)} layer types on {torch_device} at scale {scale}")
    records = measure_points(settings, torch_device, measurements, report)
    report("table1: path lengths and graph depths")
    structure = measure_structure(settings)
    recurrent_check = check_recurrent_formula(settings.path_length, settings.path_width, settings)
    write_json_atomically(
        output_dir / STRUCTURE_FILE,
        {"settings": asdict(settings), "layers": structure, "recurrent_flops_check": list(recurrent_check)},
    )
    plot_measurements(records, settings, output_dir)
    text = render_report(settings, scale, records, structure, recurrent_check, time.perf_counter() - started)
    write_text_atomically(output_dir / REPORT_FILE, text)
    return output_dir / REPORT_FILE
