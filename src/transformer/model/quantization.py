"""Int8 weights for CPU inference: linear layers with per-channel int8 weights and int8 activations per call.

Decoding a batch streams every decoder weight and the vocabulary-sized output projection once per step, so
on a CPU its speed is bound by bytes of weights, not by arithmetic. Storing the weights of the linear layers as
int8 (a quarter of float32) and multiplying in int8 (AVX-512 VNNI) is how CTranslate2 decodes fast on CPUs;
this module does the same with PyTorch's own kernel, ``torch.ops.quantized.linear_dynamic``, on weights
packed for the engine that is faster on the CPU at hand: the translator times both
(:mod:`transformer.autotune.int8_engine_probe`); without a measurement, :func:`int8_packing_engine` guesses from
the flags (oneDNN with VNNI, FBGEMM without). Embeddings, layer norms, attention and the softmax stay float32.
"""

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from transformer.model.multihead_attention import MultiHeadAttention, split_fused_heads
from transformer.model.transformer import Transformer

#: Largest magnitude of a symmetric int8 weight (-127..127: no -128, so negation never overflows).
INT8_WEIGHT_MAX = 127
#: Quantized engine whose packed weights decode fastest where the int8 kernels have VNNI: oneDNN's products ran
#: 1.0-1.7x as fast as the default x86 engine's (FBGEMM) at decoding's shapes on an AVX-512 VNNI CPU
#: (BENCHMARKS.md, section 1b).
VNNI_PACKING_ENGINE = "onednn"
#: ... and where they have not: on an AVX2-only AMD EPYC, FBGEMM's (PyTorch's "x86" engine) ran 1.4-2.1x as fast
#: as oneDNN's at the same shapes (BENCHMARKS.md, section 1c; ``python -m experiments.benchmarks.int8_kernels``).
NO_VNNI_PACKING_ENGINE = "x86"


#: oneDNN ISA caps (``ONEDNN_MAX_CPU_ISA``) below which its int8 kernels have no VNNI dot-product instructions.
ISA_CAPS_WITHOUT_VNNI = ("SSE41", "AVX", "AVX2", "AVX512_CORE")


def int8_kernels_have_vnni() -> bool:
    """Tell whether the int8 products will run with VNNI (exact int32 sums) rather than AVX2's pairwise adds.

    Returns
    -------
    bool
        True when the CPU has VNNI and neither oneDNN's ISA cap nor ATen's CPU capability hides it.

    Notes
    -----
    Without VNNI the kernels add pairs of u8 x s8 products in saturating 16-bit lanes, so activations must use
    7 bits (``reduce_range``) or sums overflow: a relative error of 0.2-0.3 was measured with full range.
    The CPU flag alone is not enough: a oneDNN capped at AVX2 on a VNNI CPU (how this project reproduces the
    AVX2-only machines) runs the AVX2 kernels.
    """
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if cap in ISA_CAPS_WITHOUT_VNNI or torch.backends.cpu.get_cpu_capability() in ("DEFAULT", "AVX2"):
        return False
    return bool(torch.cpu._is_vnni_supported())


def int8_packing_engine() -> str:
    """Name the quantized engine whose packed weights decode fastest on this CPU.

    Returns
    -------
    str
        ``VNNI_PACKING_ENGINE`` ("onednn") where :func:`int8_kernels_have_vnni`, else ``NO_VNNI_PACKING_ENGINE``
        ("x86", FBGEMM's kernels).

    Notes
    -----
    Decided by the probed capability, each side measured on its CPU kind (the constants' comments): without
    VNNI oneDNN's int8 kernels emulate the dot product with AVX2's pairwise adds and lose to FBGEMM's at
    decoding's few-row products (the greedy output projection 11.2 against 5.3 ms), while with VNNI they win.
    Either engine's packed weight carries its kernel, so the choice is made once, when the model is quantised.
    """
    return VNNI_PACKING_ENGINE if int8_kernels_have_vnni() else NO_VNNI_PACKING_ENGINE


@contextmanager
def packing_engine(name: str) -> Iterator[str]:
    """Make ``name`` PyTorch's quantized engine for the block, if this build has it; restore the old one after.

    Parameters
    ----------
    name : str
        An engine of ``torch.backends.quantized.supported_engines``, e.g. "onednn".

    Returns
    -------
    Iterator of str
        Yields the engine in use inside the block (the previous one where ``name`` is not supported).

    Notes
    -----
    The engine is process-wide state read when weights are packed; the kernel then follows the packed
    weight's own type, so only packing needs the engine and nothing else sees the change once the block ends.
    """
    previous = torch.backends.quantized.engine
    if name in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = name
    try:
        yield torch.backends.quantized.engine
    finally:
        torch.backends.quantized.engine = previous


def quantize_weight_per_channel(weight: Tensor) -> tuple[Tensor, Tensor]:
    """Quantise a weight matrix to int8 with one symmetric scale per output channel (row).

    Parameters
    ----------
    weight : torch.Tensor, shape (out_features, in_features), float
        Weight of a linear layer.

    Returns
    -------
    int8_weight : torch.Tensor, shape (out_features, in_features), int8
        ``round(weight / scale)`` clamped to [-127, 127].
    scales : torch.Tensor, shape (out_features,), float32
        ``max |weight|`` of each row / 127; ``weight ~= int8_weight * scales[:, None]``.

    Notes
    -----
    Per-channel scales keep a row of small weights (a rare token's output embedding) from being rounded to
    zero by the largest row. An all-zero row (the padding token's embedding) gets the smallest normal scale
    instead of 0, so nothing divides by zero; its int8 values are all 0 either way.
    """
    weight = weight.detach().float()
    scales = weight.abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny) / INT8_WEIGHT_MAX
    int8_weight = torch.round(weight / scales[:, None]).clamp(-INT8_WEIGHT_MAX, INT8_WEIGHT_MAX)
    return int8_weight.to(torch.int8), scales


class Int8Linear(nn.Module):
    """A linear layer ``y = x W^T + b`` computed in int8: per-channel int8 weights, int8 activations per call.

    Parameters
    ----------
    weight : torch.Tensor, shape (out_features, in_features), float
        The float weight to quantise (copied; the original is not kept).
    bias : torch.Tensor or None, shape (out_features,), float
        Added in float32 after the product.
    engine : str or None
        The quantized engine that packs the weight, and so runs its products ("onednn" or "x86"); None
        takes :func:`int8_packing_engine`'s.

    Notes
    -----
    The weight is quantised once with :func:`quantize_weight_per_channel` and packed for the CPU kernel; at
    each call the kernel quantises the input to uint8 with one scale and zero point over the whole tensor
    (its minimum and maximum: "dynamic" quantisation), multiplies in int8 with int32 accumulation and
    rescales to float32. Inputs are float32 of any leading shape; the output is float32. CPU only: the
    kernel has no CUDA implementation. The packed weight is not a parameter, so ``state_dict`` holds nothing;
    quantise a float model after loading it. Activations use 7 of their 8 bits (``reduce_range``) on CPUs
    without VNNI, whose int8 multiply-add saturates 16-bit sums of two full-range products.
    """

    def __init__(self, weight: Tensor, bias: Tensor | None, engine: str | None = None) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        int8_weight, scales = quantize_weight_per_channel(weight)
        zero_points = torch.zeros(self.out_features, dtype=torch.long)
        # The kernel takes its weight as a quantized tensor, whose constructors torch deprecates in favour of
        # torchao; torch has no other packed int8 CPU linear as fast at decoding's batch sizes (measured in
        # BENCHMARKS.md), so the warning is silenced here, where the one such tensor is built.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
            quantized_weight = torch.quantize_per_channel(  # of int8 * scale, which rounds back exactly
                int8_weight.float() * scales[:, None], scales.double(), zero_points, axis=0, dtype=torch.qint8
            )
        float_bias = None if bias is None else bias.detach().float().clone()
        with packing_engine(engine or int8_packing_engine()) as packed_by:
            self.packed_weight = torch.ops.quantized.linear_prepack(quantized_weight, float_bias)
        #: The engine that packed the weight (and so runs the products): "onednn" or "x86".
        self.engine = packed_by
        self.reduce_range = not int8_kernels_have_vnni()
        self._unpacked: tuple[Tensor, Tensor, Tensor] | None = None  # int8 rows, scales, zero points

    def pack_rows(self, rows: Tensor) -> torch.ScriptObject:
        """Pack some rows of the int8 weight alone (no bias), as this layer's engine packs.

        Parameters
        ----------
        rows : torch.Tensor, shape (selected,), int64
            Output rows to keep, in the order wanted.

        Returns
        -------
        torch.ScriptObject
            Packed weights for ``torch.ops.quantized.linear_dynamic``: the same int8 values and scales as
            those rows of this layer.

        Notes
        -----
        For a vocabulary shortlist's projection onto a few rows of the output matrix, packed once per search.
        Unpacking the whole matrix took 6.6 ms of a 9 ms repack at 10,000 x 256 (more than a one-sentence
        translation's decoding), so the unpacked int8 rows are kept after the first call.
        """
        if self._unpacked is None:
            quantized, _ = torch.ops.quantized.linear_unpack(self.packed_weight)
            self._unpacked = (
                quantized.int_repr(),
                quantized.q_per_channel_scales(),
                quantized.q_per_channel_zero_points(),
            )
        int8_rows, scales, zero_points = self._unpacked
        rows = rows.to(int8_rows.device)
        selected = torch._make_per_channel_quantized_tensor(
            int8_rows.index_select(0, rows),
            scales.index_select(0, rows),
            zero_points.index_select(0, rows),
            0,
        )
        with packing_engine(self.engine):
            return torch.ops.quantized.linear_prepack(selected, None)

    @classmethod
    def from_linear(cls, linear: nn.Linear, engine: str | None = None) -> "Int8Linear":
        """Quantise an ``nn.Linear``.

        Parameters
        ----------
        linear : nn.Linear
            The float layer.
        engine : str or None
            The quantized engine that packs the weight ("onednn" or "x86"); None takes
            :func:`int8_packing_engine`'s.

        Returns
        -------
        Int8Linear
            The same map with int8 weights.

        Notes
        -----
        The float layer is left as it was, and the int8 layer keeps no reference to its tensors, so the
        caller may free or keep training the original without affecting the int8 layer.
        """
        return cls(linear.weight, linear.bias, engine)

    def forward(self, hidden: Tensor) -> Tensor:
        """Apply the layer.

        Parameters
        ----------
        hidden : torch.Tensor, shape (..., in_features), float32
            Inputs.

        Returns
        -------
        torch.Tensor, shape (..., out_features), float32
            ``hidden W^T + b`` up to the rounding of weights and inputs to int8.

        Raises
        ------
        RuntimeError
            From the kernel, for a non-float32 or non-CPU input.

        Notes
        -----
        Dynamic quantization: the inputs are quantized per call from their own range, so no calibration data
        is needed.
        """
        return torch.ops.quantized.linear_dynamic(hidden, self.packed_weight, self.reduce_range)

    def extra_repr(self) -> str:
        """Describe the layer's shape for ``print(model)``.

        Returns
        -------
        str
            ``in_features`` and ``out_features``, as ``nn.Linear`` shows them, the weight format and the
            engine whose kernel runs the products.

        Notes
        -----
        The packed weight is opaque (not a parameter or buffer), so without this a printed quantised model
        would show neither the layer's shape nor that it runs in int8.
        """
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per-channel, {self.engine}"


class Int8MultiHeadAttention(MultiHeadAttention):
    """Multi-head attention whose four projections (and their q/k/v stack) are :class:`Int8Linear`.

    Parameters
    ----------
    attention : MultiHeadAttention
        The float module to copy settings and weights from (left unchanged).
    engine : str or None
        The quantized engine packing its projections (see :class:`Int8Linear`).

    Notes
    -----
    Self-attention's :meth:`project_self` multiplies by the stacked q/k/v weight in one product; the float
    module stacks ``q_proj.weight`` and the others at run time, so this subclass quantises the stack once
    instead (per-channel scales make it exactly the three quantised projections side by side). Everything
    else, the attention itself included, is inherited.
    """

    def __init__(self, attention: MultiHeadAttention, engine: str | None = None) -> None:
        super().__init__(
            attention.q_proj.in_features,
            attention.num_heads,
            d_k=attention.d_k,
            d_v=attention.d_v,
            dropout=attention.dropout,
            bias=attention.q_proj.bias is not None,
            scoring="dot_product" if attention.additive_score is None else "additive",
            implementation=attention.implementation,
            scaling=attention.scaling,
        )
        self.explicit_max_length = attention.explicit_max_length
        self.additive_score = attention.additive_score
        self.q_proj = Int8Linear.from_linear(attention.q_proj, engine)  # type: ignore[assignment]
        self.k_proj = Int8Linear.from_linear(attention.k_proj, engine)  # type: ignore[assignment]
        self.v_proj = Int8Linear.from_linear(attention.v_proj, engine)  # type: ignore[assignment]
        self.out_proj = Int8Linear.from_linear(attention.out_proj, engine)  # type: ignore[assignment]
        projections = (attention.q_proj, attention.k_proj, attention.v_proj)
        biases = [projection.bias for projection in projections]
        stacked_bias = (
            torch.cat([bias for bias in biases if bias is not None]) if None not in biases else None
        )
        self.qkv_proj = Int8Linear(
            torch.cat([projection.weight for projection in projections]), stacked_bias, engine
        )

    def project_self(self, hidden: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Project one input into queries, keys and values with a single int8 product.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, seq_len, d_model), float32
            Input of self-attention.

        Returns
        -------
        query, key, value : torch.Tensor, each shape (batch, num_heads, seq_len, head_dim)
            Projected and split into heads.

        Notes
        -----
        With ``d_k != d_v`` the three projections run separately, as in the float module.
        """
        if self.d_k != self.d_v:
            return super().project_self(hidden)
        projected = self.qkv_proj(hidden)  # (batch, seq_len, 3 * num_heads * head_dim)
        return split_fused_heads(projected, self.num_heads)


def quantize_for_inference(model: Transformer, engine: str | None = None) -> Transformer:
    """Replace every linear layer of a float32 CPU model, the output projection included, by an int8 one.

    Parameters
    ----------
    model : Transformer
        A float32 model on the CPU; converted in place and put in eval mode.
    engine : str or None
        The quantized engine that packs every weight ("onednn" or "x86", e.g. as
        :func:`~transformer.autotune.int8_engine_probe.decide_int8_engine` measured it); None takes
        :func:`int8_packing_engine`'s, decided by the CPU's flags alone.

    Returns
    -------
    Transformer
        ``model`` itself, for inference only (no gradients flow through the int8 layers).

    Raises
    ------
    ValueError
        For a model that is not float32 on the CPU, the kernel's only case.

    Notes
    -----
    Attention modules become :class:`Int8MultiHeadAttention`, the feed-forward layers :class:`Int8Linear`.
    With tied weights (section 3.4) the output projection gets its own int8 copy of the target embedding,
    which itself stays float32: it is read one row per token, and the source side shares it.
    """
    first_parameter = next(model.parameters())
    if first_parameter.device.type != "cpu" or first_parameter.dtype != torch.float32:
        raise ValueError(
            f"int8 quantisation needs a float32 model on the CPU, got {first_parameter.dtype} on "
            f"{first_parameter.device}: PyTorch's int8 linear kernels (FBGEMM/oneDNN) run on CPUs only"
        )
    _replace_linear_layers(model.eval(), engine)
    if model.output_projection is None:  # tied: the projection reads the target embedding
        model.output_projection = Int8Linear(model.tgt_embedding.weight, None, engine)  # type: ignore[assignment]
    return model


def _replace_linear_layers(module: nn.Module, engine: str | None) -> None:
    """Swap attention modules and ``nn.Linear`` children for int8 ones, recursing into everything else."""
    for name, child in list(module.named_children()):
        if isinstance(child, MultiHeadAttention):
            setattr(module, name, Int8MultiHeadAttention(child, engine))
        elif isinstance(child, nn.Linear):
            setattr(module, name, Int8Linear.from_linear(child, engine))
        else:
            _replace_linear_layers(child, engine)
