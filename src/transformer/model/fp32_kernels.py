"""fp32 linear layers through oneDNN's packed kernel, for CPU inference where it beats MKL's sgemm.

``F.linear`` on an x86 CPU calls MKL's sgemm. At decoding's few-row products (batch x beam rows against every
decoder weight and the vocabulary-sized output projection) oneDNN's fp32 linear, with its weight reordered
once into oneDNN's blocked layout, ran 1.2-3x as fast on the CPUs measured (BENCHMARKS.md, section 1d), yet
PyTorch's eager mode never uses it. This module provides the layer and the swap; which layers to swap is
measured per machine by :mod:`transformer.autotune.linear_probe` (this package sits below ``autotune``, so the
choice arrives as a function).
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer.model.multihead_attention import MultiHeadAttention, split_fused_heads
from transformer.model.transformer import Transformer

#: The two fp32 linear kernels: PyTorch's default (MKL's sgemm on x86) and oneDNN's packed linear.
LINEAR_BACKENDS = ("mkl", "onednn")
#: Row count oneDNN's weight layout is chosen for: any hint above 1 ran within the noise of the best one at
#: 1 to 128 rows (a hint of 1 was up to 2x slower at 4-32 rows), so one packing serves every batch and beam.
PACKING_ROWS = 32
#: Where a product runs: "decoder" once per search step (batch x beam rows), "encoder" over whole sources
#: (the encoder's layers and the decoder's projection of the encoder output into keys and values).
PRODUCT_ROLES = ("decoder", "encoder")

#: Chooses a backend ("mkl" or "onednn") for a product from its (in_features, out_features, role).
BackendChooser = Callable[[int, int, str], str]


def _onednn_linear(hidden: Tensor, packed_weight: Tensor, bias: Tensor | None) -> Tensor:
    """Run oneDNN's fp32 linear with a weight from :func:`pack_weight`."""
    return torch.ops.mkldnn._linear_pointwise(hidden, packed_weight, bias, "none", [], "")


def pack_weight(weight: Tensor) -> Tensor:
    """Reorder a dense fp32 weight into oneDNN's blocked layout for its linear kernel.

    Parameters
    ----------
    weight : torch.Tensor, shape (out_features, in_features), float32
        The weight (copied; later changes to it are not seen).

    Returns
    -------
    torch.Tensor, shape (out_features, in_features), layout ``torch._mkldnn``
        An opaque oneDNN tensor, usable only by :func:`torch.ops.mkldnn._linear_pointwise`.

    Notes
    -----
    Reordering once is what pays: the same kernel given the dense weight reorders it at every call and ran
    up to 2x slower at 4-32 rows.
    """
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().float().contiguous(), PACKING_ROWS)


def onednn_linear_unavailable_reason() -> str | None:
    """Probe whether oneDNN's fp32 linear works in this PyTorch build, and say why not if it does not.

    Returns
    -------
    str or None
        None when a small packed product ran and matched ``F.linear``; else one line saying what failed.

    Notes
    -----
    The operators are private (what ``torch.compile`` lowers linear layers to on x86), so the capability is
    probed by running them, not assumed from the CPU or the version: a build without oneDNN, or a future
    PyTorch that renames them, falls back to ``F.linear``.
    """
    if not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call]
        return "this PyTorch build has no oneDNN (torch.backends.mkldnn.is_available() is False)"
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(8, 16, generator=generator)
    bias = torch.randn(8, generator=generator)
    hidden = torch.randn(3, 16, generator=generator)
    try:
        with torch.no_grad():
            result = _onednn_linear(hidden, pack_weight(weight), bias)
    except (AttributeError, RuntimeError, NotImplementedError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return f"oneDNN's fp32 linear failed to run ({first_line})"
    if not torch.allclose(result, F.linear(hidden, weight, bias), rtol=1e-4, atol=1e-5):
        return "oneDNN's fp32 linear gave a result different from F.linear"
    return None


class OneDNNLinear(nn.Module):
    """A linear layer ``y = x W^T + b`` in fp32 through oneDNN's kernel, with a weight packed once.

    Parameters
    ----------
    weight : torch.Tensor, shape (out_features, in_features), float32
        The weight (packed copy; the original is not kept).
    bias : torch.Tensor or None, shape (out_features,), float32
        The bias (copied).
    keep_weight : bool
        Also keep ``weight`` itself (detached) as the attribute ``weight``, for code that reads rows of it
        (the vocabulary shortlist reads the output projection's); otherwise ``weight`` is None.

    Notes
    -----
    Inference only: the operator has no autograd, and the packed weight is neither a parameter nor a
    buffer, so ``state_dict`` does not hold it (swap a loaded model, as with int8). Keeping the dense
    weight beside the packed one doubles the layer's memory unless the tensor is held elsewhere anyway
    (a tied output projection's is the target embedding). Results equal
    ``F.linear``'s up to float32 summation order (a few units in the last place), not bit for bit.
    """

    def __init__(self, weight: Tensor, bias: Tensor | None, keep_weight: bool = False) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.packed_weight = pack_weight(weight)
        self.weight: Tensor | None = weight.detach() if keep_weight else None
        self.bias = None if bias is None else bias.detach().float().clone()

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> "OneDNNLinear":
        """Pack an ``nn.Linear``'s weight for oneDNN.

        Parameters
        ----------
        linear : nn.Linear
            The float32 layer (left unchanged).

        Returns
        -------
        OneDNNLinear
            The same map through oneDNN's kernel.

        Notes
        -----
        Nothing of ``linear`` is referenced afterwards: freeing it frees its dense weight.
        """
        return cls(linear.weight, linear.bias)

    def forward(self, hidden: Tensor) -> Tensor:
        """Apply the layer.

        Parameters
        ----------
        hidden : torch.Tensor, shape (..., in_features), float32
            Inputs, any leading shape.

        Returns
        -------
        torch.Tensor, shape (..., out_features), float32
            ``hidden W^T + b``.

        Notes
        -----
        Called without autograd (the translator decodes under ``torch.inference_mode``).
        """
        return _onednn_linear(hidden, self.packed_weight, self.bias)

    def extra_repr(self) -> str:
        """Describe the layer for ``print(model)``.

        Returns
        -------
        str
            The shape, as ``nn.Linear`` shows it, and the kernel.

        Notes
        -----
        The packed weight is opaque, so without this a printed model would not show the layer's shape.
        """
        return f"in_features={self.in_features}, out_features={self.out_features}, fp32 oneDNN"


def _linear_for(linear: nn.Linear, role: str, backend_for: BackendChooser) -> nn.Module:
    """Return ``linear`` itself or its oneDNN copy, as ``backend_for`` chooses for its shape and role."""
    if backend_for(linear.in_features, linear.out_features, role) == "onednn":
        return OneDNNLinear.from_linear(linear)
    return linear


class OneDNNMultiHeadAttention(MultiHeadAttention):
    """Multi-head attention whose projections each run through MKL or oneDNN, as chosen for their shape.

    Parameters
    ----------
    attention : MultiHeadAttention
        The float32 module to copy settings and weights from (left unchanged).
    role : {"decoder", "encoder"}
        Where the module is: in the decoder its query, output and stacked q/k/v products run once per step,
        its key and value products (cross-attention's) over the encoder output.
    backend_for : callable
        ``(in_features, out_features, role) -> "mkl" | "onednn"``.

    Notes
    -----
    The float module stacks the q/k/v weights for self-attention's single product; here the stack is built
    once, as :class:`~transformer.model.quantization.Int8MultiHeadAttention` does, as a oneDNN layer or a
    plain ``nn.Linear``, since the projections it would stack may no longer have a dense ``weight``.
    """

    def __init__(self, attention: MultiHeadAttention, role: str, backend_for: BackendChooser) -> None:
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
        memory_role = (
            "encoder"  # keys and values: of the source in cross-attention, unused by fused self-attention
        )
        self.q_proj = _linear_for(attention.q_proj, role, backend_for)  # type: ignore[assignment]
        self.k_proj = _linear_for(attention.k_proj, memory_role, backend_for)  # type: ignore[assignment]
        self.v_proj = _linear_for(attention.v_proj, memory_role, backend_for)  # type: ignore[assignment]
        self.out_proj = _linear_for(attention.out_proj, role, backend_for)  # type: ignore[assignment]
        projections = (attention.q_proj, attention.k_proj, attention.v_proj)
        biases = [projection.bias for projection in projections]
        has_bias = all(bias is not None for bias in biases)
        with torch.no_grad():
            weight = torch.cat([projection.weight for projection in projections])
            stacked = nn.Linear(weight.shape[1], weight.shape[0], bias=has_bias).requires_grad_(False)
            stacked.weight.copy_(weight)
            if has_bias:
                stacked.bias.copy_(torch.cat([bias for bias in biases if bias is not None]))
        self.qkv_proj = _linear_for(stacked, role, backend_for)

    def project_self(self, hidden: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Project one input into queries, keys and values with a single product.

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
            key, value = self.project_key_value(hidden, hidden)
            return self.project_query(hidden), key, value
        projected = self.qkv_proj(hidden)  # (batch, seq_len, 3 * num_heads * head_dim)
        return split_fused_heads(projected, self.num_heads)


def _attention_wants_onednn(attention: MultiHeadAttention, role: str, backend_for: BackendChooser) -> bool:
    """Tell whether any product of an attention module (its q/k/v stack included) is to run on oneDNN."""
    d_model = attention.q_proj.in_features
    stacked = attention.q_proj.out_features + attention.k_proj.out_features + attention.v_proj.out_features
    products = [
        (d_model, stacked, role),
        (d_model, attention.q_proj.out_features, role),
        (d_model, attention.k_proj.out_features, "encoder"),
        (d_model, attention.v_proj.out_features, "encoder"),
        (attention.out_proj.in_features, d_model, role),
    ]
    return any(backend_for(*product) == "onednn" for product in products)


def _swap_in(module: nn.Module, role: str, backend_for: BackendChooser) -> None:
    """Swap attention modules and ``nn.Linear`` children under ``module``, recursing into everything else.

    An attention module with every product on MKL is left as it is (not copied), so it keeps following its
    parameters, as the float module does.
    """
    for name, child in list(module.named_children()):
        if isinstance(child, (OneDNNMultiHeadAttention, OneDNNLinear)):
            continue  # swapped before (a second Translator over one model): its float weights are gone
        if isinstance(child, MultiHeadAttention):
            if _attention_wants_onednn(child, role, backend_for):
                setattr(module, name, OneDNNMultiHeadAttention(child, role, backend_for))
        elif isinstance(child, nn.Linear):
            setattr(module, name, _linear_for(child, role, backend_for))
        else:
            _swap_in(child, role, backend_for)


def swap_fp32_linear_layers(model: Transformer, backend_for: BackendChooser) -> Transformer:
    """Route a float32 CPU model's linear products through oneDNN where ``backend_for`` says so.

    Parameters
    ----------
    model : Transformer
        A float32 model on the CPU; converted in place and put in eval mode.
    backend_for : callable
        ``(in_features, out_features, role) -> "mkl" | "onednn"``, role one of :data:`PRODUCT_ROLES`.

    Returns
    -------
    Transformer
        ``model`` itself, for inference only.

    Raises
    ------
    ValueError
        For a model that is not float32 on the CPU.

    Notes
    -----
    Layers left on MKL stay the model's own modules; swapped ones hold packed copies, so changing a
    parameter in place afterwards reaches only the former. The output projection is a decoder product; tied to the target embedding (section 3.4), it gets its
    own packed copy while the embedding itself stays as it was (it is read one row per token). A oneDNN
    output projection keeps its dense ``weight`` too, for the vocabulary shortlist, which multiplies by a
    few of its rows.
    """
    first_parameter = next(model.parameters())
    if first_parameter.device.type != "cpu" or first_parameter.dtype != torch.float32:
        raise ValueError(
            f"oneDNN fp32 kernels need a float32 model on the CPU, got {first_parameter.dtype} on "
            f"{first_parameter.device}"
        )
    model.eval()
    _swap_in(model.encoder, "encoder", backend_for)
    _swap_in(model.decoder, "decoder", backend_for)
    projection = model.output_projection
    if isinstance(projection, OneDNNLinear):
        return model  # swapped before
    weight = model.tgt_embedding.weight if projection is None else projection.weight
    vocab_size, d_model = weight.shape
    if backend_for(d_model, vocab_size, "decoder") == "onednn":
        bias = None if projection is None else projection.bias
        model.output_projection = OneDNNLinear(weight, bias, keep_weight=True)  # type: ignore[assignment]
    return model
