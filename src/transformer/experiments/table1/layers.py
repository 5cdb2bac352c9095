"""The layers Table 1 compares, each (batch, n, d) to (batch, n, d): attention, an LSTM, convolutions."""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer.experiments.table1.settings import Table1Settings
from transformer.model.masks import build_window_mask
from transformer.model.multihead_attention import MultiHeadAttention, merge_heads


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

    Raises
    ------
    ValueError
        For an unknown name.

    Notes
    -----
    ``dilated_convolution`` builds the first layer of the stack (dilation 1); :func:`stack_layer` builds the
    others.
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

    Raises
    ------
    ValueError
        For an unknown name.

    Notes
    -----
    A width not divisible by ``settings.num_heads`` gets one head, so every width of the sweep can be built.
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
