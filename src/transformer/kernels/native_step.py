"""The int8 decoder's incremental step in C++: the same kernels as the Python decoder, without Python between them.

At decoding's small batches a CPU step is mostly Python: an int8 model of the Multi30k recipe (3 decoder layers,
d_model 256) runs about 20 tiny matrix products per step, and the module calls, argument parsing and dispatch
around them cost several times the products themselves. :class:`NativeInt8DecoderStep` runs the whole step
(embedding, every layer, the output projection) in one C++ call (``int8_decoder_step.cpp``), through the same
ATen kernels and the same packed int8 weights as :class:`~transformer.model.quantization.Int8Linear`. It is built
on first use with PyTorch's extension builder (a C++ compiler and ninja, cached under
``TORCH_EXTENSIONS_DIR``); where it cannot be built, or does not cover the model, decoding runs the Python
step, and :func:`native_int8_step` says why.
"""

import os
import shutil
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from transformer.model.decoder import DecoderCache, DecoderLayer
from transformer.model.positional_encoding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from transformer.model.quantization import Int8Linear, Int8MultiHeadAttention
from transformer.model.scaled_dot_product_attention import score_scale
from transformer.model.transformer import Transformer

#: Set to "off" (or "0", "no", "false") to decode with the Python step even where the native one builds.
NATIVE_STEP_VARIABLE = "TRANSFORMER_NATIVE_STEP"
#: The C++ source, shipped as package data beside this module.
SOURCE_FILE = Path(__file__).with_name("int8_decoder_step.cpp")
#: The extension's name; PyTorch's builder keys its cache directory on it and rebuilds when the source changes.
EXTENSION_NAME = "transformer_int8_decoder_step"


@dataclass(frozen=True)
class NativeBuild:
    """The outcome of building (or loading) the extension.

    Parameters
    ----------
    module : ModuleType or None
        The compiled extension; None when it could not be built.
    note : str
        One line: how long the build or load took, or why there is no extension.

    Notes
    -----
    Kept per process by :func:`build_native_extension`, so a failed build is not retried on every search.
    """

    module: ModuleType | None
    note: str


@cache
def build_native_extension() -> NativeBuild:
    """Compile the C++ step once per machine (PyTorch caches the build) and load it once per process.

    Returns
    -------
    NativeBuild
        The module, or None with the reason: opted out, no compiler, no ninja, or the compiler's failure.

    Notes
    -----
    The first build compiles against PyTorch's headers, about 30-40 s on 2 cores; later processes load the
    cached library in about a second. The result is memoised per process (``functools.cache``): one build or
    one failure message, whoever asks. The compiler's output stays in the exception, reduced here to its last
    line, because a search must not fail for want of a faster path.
    """
    setting = os.environ.get(NATIVE_STEP_VARIABLE, "").strip().lower()
    if setting in ("off", "0", "no", "false"):
        return NativeBuild(None, f"native decoder step: off ({NATIVE_STEP_VARIABLE}={setting})")
    from torch.utils import cpp_extension

    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return NativeBuild(None, f"native decoder step: no C++ compiler ({compiler!r} not on PATH)")
    if not cpp_extension.is_ninja_available():
        return NativeBuild(None, "native decoder step: ninja is not installed (pip install ninja)")
    started = time.perf_counter()
    try:
        module = cpp_extension.load(
            name=EXTENSION_NAME, sources=[str(SOURCE_FILE)], extra_cflags=["-O2"], verbose=False
        )
    except (RuntimeError, OSError, ImportError) as error:
        last_line = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        return NativeBuild(None, f"native decoder step: build failed ({last_line})")
    seconds = time.perf_counter() - started
    return NativeBuild(module, f"native decoder step: C++ (built or loaded in {seconds:.1f} s)")


def unsupported_reason(model: Transformer) -> str | None:
    """Say why the native step cannot run a model, or None when it can.

    Parameters
    ----------
    model : Transformer
        A model prepared for inference.

    Returns
    -------
    str or None
        The first obstacle found, as a short phrase.

    Notes
    -----
    The C++ step implements the decoder of :mod:`transformer.model.decoder` with the int8 layers of
    :mod:`transformer.model.quantization` and scaled dot-product attention, on the CPU, in eval mode; anything
    else (float weights, additive scoring, an attention window, a logits hook, d_k != d_v) keeps the Python
    step, which handles every configuration.
    """
    config = model.config
    if model.training:
        return "the model is in training mode"
    if model.tgt_embedding.embedding.weight.device.type != "cpu":
        return "the model is not on the CPU"
    if config.attention_window is not None:
        return "windowed self-attention"
    if not isinstance(model.output_projection, Int8Linear):
        return "the output projection is not int8"
    first = model.decoder.layers[0].self_attention
    attention_settings = (first.implementation, first.explicit_max_length, first.scaling)
    for layer in model.decoder.layers:
        assert isinstance(layer, DecoderLayer)
        for attention in (layer.self_attention, layer.cross_attention):
            if not isinstance(attention, Int8MultiHeadAttention) or not hasattr(attention, "qkv_proj"):
                return "an attention layer is not int8 with stacked q/k/v"
            if attention.additive_score is not None or attention.logits_hook is not None:
                return "additive attention or a logits hook"
            settings = (attention.implementation, attention.explicit_max_length, attention.scaling)
            if settings != attention_settings:
                return "attention layers with different implementations or scalings"
        linears = (layer.feed_forward.linear_in, layer.feed_forward.linear_out)
        if not all(isinstance(linear, Int8Linear) for linear in linears):
            return "a feed-forward layer is not int8"
    if model.positional_encoding is not None and not isinstance(
        model.positional_encoding, SinusoidalPositionalEncoding | LearnedPositionalEmbedding
    ):
        return f"positional encoding {type(model.positional_encoding).__name__}"
    return None


class NativeInt8DecoderStep:
    """Run an int8 Transformer's incremental decoder step in one C++ call.

    Parameters
    ----------
    model : Transformer
        An int8 model (:func:`~transformer.model.quantization.quantize_for_inference`) that
        :func:`unsupported_reason` accepts.
    extension : ModuleType
        The built extension (:func:`build_native_extension`).

    Notes
    -----
    The C++ object keeps references to the model's packed weights and norms, so build a new step after
    changing the model. The caches it reads and extends are the model's own :class:`DecoderCache`, so beam
    search's reordering, the shortlist-free searches and the Python step can take turns on one cache.
    """

    def __init__(self, model: Transformer, extension: ModuleType) -> None:
        config = model.config
        self.model = model
        self.num_heads = config.num_heads
        layers = []
        for layer in model.decoder.layers:
            assert isinstance(layer, DecoderLayer)
            self_attention, cross_attention = layer.self_attention, layer.cross_attention
            norms = [
                residual.norm
                for residual in (
                    layer.self_attention_residual,
                    layer.cross_attention_residual,
                    layer.feed_forward_residual,
                )
            ]
            layers.append(
                (
                    *(tensor.detach() for norm in norms for tensor in (norm.weight, norm.bias)),
                    _packed(self_attention.qkv_proj),
                    _packed(self_attention.out_proj),
                    _packed(cross_attention.q_proj),
                    _packed(cross_attention.out_proj),
                    _packed(layer.feed_forward.linear_in),
                    _packed(layer.feed_forward.linear_out),
                )
            )
        first_attention = model.decoder.layers[0].self_attention
        assert isinstance(first_attention, Int8MultiHeadAttention)
        final_norm = model.decoder.final_norm
        output_projection = model.output_projection
        assert isinstance(output_projection, Int8Linear)
        #: Rows of positional encodings the C++ step adds (None without positions); regrown on demand.
        self.position_table: Tensor | None = self._position_table(0)
        self._step: Any = extension.Int8DecoderStep(
            layers,
            final_norm.weight.detach() if final_norm is not None else None,
            final_norm.bias.detach() if final_norm is not None else None,
            output_projection.packed_weight,
            model.output_bias.detach().float() if model.output_bias is not None else None,
            model.tgt_embedding.embedding.weight.detach(),
            float(model.tgt_embedding.scale),
            config.num_heads,
            score_scale(first_attention.d_k, first_attention.scaling),
            first_attention.scaling,
            first_attention.implementation != "explicit",
            -1 if first_attention.implementation == "fused" else first_attention.explicit_max_length,
            config.norm_first,
            config.layer_norm_eps,
            config.activation,
            output_projection.reduce_range,
        )

    def _position_table(self, length: int) -> Tensor | None:
        """Positions 0 .. length - 1 (at least the encoding's current table), or None without positions."""
        encoding = self.model.positional_encoding
        if encoding is None:
            return None
        if isinstance(encoding, LearnedPositionalEmbedding):
            return encoding.embedding.weight.detach()
        assert isinstance(encoding, SinusoidalPositionalEncoding)
        return encoding(max(length, encoding.table.size(0)), 0).detach().float()

    def log_probs(self, cache: DecoderCache, last_tokens: Tensor) -> Tensor:
        """Feed one token per row, extend the cache, and return the next-token log-probabilities.

        Parameters
        ----------
        cache : DecoderCache
            The rows' cache from :meth:`Transformer.init_decoder_cache`; extended in place, ``decoded_len``
            advanced by one.
        last_tokens : torch.Tensor, shape (rows,), int64
            The newest token of every row.

        Returns
        -------
        torch.Tensor, shape (rows, tgt_vocab_size), float32
            What :meth:`TransformerStepModel.log_probs` returns for the same cache and tokens.

        Notes
        -----
        A sinusoidal table shorter than the position is regrown (doubling), as the Python encoding grows its
        own. Attention takes the path :func:`~transformer.model.scaled_dot_product_attention.scaled_dot_product_attention`
        takes for the layer's settings (explicit formula at short lengths, fused kernel beyond), so the
        log-probabilities are the Python step's, bit for bit (tested).
        """
        position = cache.decoded_len
        if self.position_table is not None and position >= self.position_table.size(0):
            self.position_table = self._position_table(2 * (position + 1))
        mask = cache.cross_attend_mask
        assert mask is not None
        rows = last_tokens.size(0)
        self_keys = [
            _self_cache(layer.self_key, rows, self.num_heads, layer.cross_key) for layer in cache.layers
        ]
        self_values = [
            _self_cache(layer.self_value, rows, self.num_heads, layer.cross_value) for layer in cache.layers
        ]
        logits, self_keys, self_values = self._step.step(
            last_tokens,
            self.position_table,
            position,
            self_keys,
            self_values,
            [layer.cross_key for layer in cache.layers],
            [layer.cross_value for layer in cache.layers],
            mask,
            cache.rows_per_source,
        )
        for layer, key, value in zip(cache.layers, self_keys, self_values, strict=True):
            layer.self_key, layer.self_value = key, value
        cache.decoded_len = position + 1
        return F.log_softmax(logits, dim=-1, dtype=torch.float32)


def _packed(linear: Tensor | nn.Module) -> torch.ScriptObject:
    """Return the packed int8 weight (and bias) of an :class:`Int8Linear`."""
    assert isinstance(linear, Int8Linear)
    return linear.packed_weight


def _self_cache(cached: Tensor | None, rows: int, num_heads: int, like: Tensor) -> Tensor:
    """Return the cached self-attention keys (or values), or (rows, heads, 0, head_dim) empty at the first step."""
    if cached is not None:
        return cached
    return like.new_empty((rows, num_heads, 0, like.size(-1)))


def native_int8_step(model: Transformer) -> tuple[NativeInt8DecoderStep | None, str]:
    """Build the native step for a model, or say why decoding keeps the Python step.

    Parameters
    ----------
    model : Transformer
        A model prepared for inference.

    Returns
    -------
    tuple of (NativeInt8DecoderStep or None, str)
        The step (None when unavailable) and one line for the translator's kernel notes.

    Notes
    -----
    Checks the model before building, so a float model never triggers a compilation.
    """
    reason = unsupported_reason(model)
    if reason is not None:
        return None, f"native decoder step: not used ({reason})"
    build = build_native_extension()
    if build.module is None:
        return None, build.note
    return NativeInt8DecoderStep(model, build.module), build.note
