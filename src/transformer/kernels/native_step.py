"""A Transformer decoder's incremental step in C++: the same kernels as the Python decoder, without Python between.

At decoding's small batches a CPU step is mostly Python: the Multi30k recipe's model (3 decoder layers, d_model
256) runs about 20 small matrix products per step, and the module calls, argument parsing and dispatch around
them cost several times the products themselves (int8 most of all, whose products are the cheapest).
:class:`NativeDecoderStep` runs the whole step (embedding, every layer, the output projection) in one C++ call
(``decoder_step.cpp``), through the same ATen kernels and the same weights as the Python layers: int8 packed
for FBGEMM or oneDNN (:class:`~transformer.model.quantization.Int8Linear`), fp32 packed for oneDNN
(:class:`~transformer.model.fp32_kernels.OneDNNLinear`) or dense (``nn.Linear``, fp32 or bf16). It is built
on first use with PyTorch's extension builder (a C++ compiler and ninja; cached under
``TORCH_EXTENSIONS_DIR``); where it cannot be built, or does not cover the model, decoding runs the Python
step, and :func:`native_decoder_step` says why.
"""

from types import ModuleType
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from transformer.kernels.native_build import build_native_extension
from transformer.model.decoder import DecoderCache, DecoderLayer, DecoderLayerCache
from transformer.model.encoder import EncoderLayer
from transformer.model.fp32_kernels import OneDNNLinear
from transformer.model.masks import build_padding_mask, padding_to_attend_mask
from transformer.model.multihead_attention import MultiHeadAttention
from transformer.model.positional_encoding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from transformer.model.quantization import Int8Linear
from transformer.model.scaled_dot_product_attention import score_scale
from transformer.model.transformer import Transformer


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
    The C++ step implements the decoder of :mod:`transformer.model.decoder` with dot-product attention, on the
    CPU, in eval mode, in float32 or bfloat16, with the linear layers the translator prepares (int8, oneDNN fp32
    or dense); anything else (additive scoring, an attention window, a logits hook, d_k != d_v, another layer
    type) keeps the Python step, which handles every configuration.
    """
    config = model.config
    weight = model.tgt_embedding.embedding.weight
    if model.training:
        return "the model is in training mode"
    if weight.device.type != "cpu":
        return "the model is not on the CPU"
    if weight.dtype not in (torch.float32, torch.bfloat16):
        return f"{weight.dtype} weights"
    if config.attention_window is not None:
        return "windowed self-attention"
    if model.output_projection is not None and _linear_spec(model.output_projection) is None:
        return f"output projection {type(model.output_projection).__name__}"
    first = model.decoder.layers[0].self_attention
    assert isinstance(first, MultiHeadAttention)
    attention_settings = (first.implementation, first.explicit_max_length, first.scaling)
    for stacked_owner in [*model.encoder.layers, *model.decoder.layers]:
        stacked = getattr(stacked_owner.self_attention, "qkv_proj", None)
        if isinstance(stacked, nn.Module) and _linear_spec(stacked) is None:
            return f"a stacked q/k/v layer {type(stacked).__name__}"
    for encoder_layer in model.encoder.layers:
        assert isinstance(encoder_layer, EncoderLayer)
        attention = encoder_layer.self_attention
        if attention.additive_score is not None or attention.logits_hook is not None:
            return "additive attention or a logits hook"
        if (attention.implementation, attention.explicit_max_length, attention.scaling) != attention_settings:
            return "attention layers with different implementations or scalings"
        encoder_linears = (
            attention.out_proj,
            encoder_layer.feed_forward.linear_in,
            encoder_layer.feed_forward.linear_out,
        )
        if any(_linear_spec(linear) is None for linear in encoder_linears):
            return "an encoder linear layer of another kind"
    for layer in model.decoder.layers:
        assert isinstance(layer, DecoderLayer)
        if any(
            _linear_spec(linear) is None
            for linear in (layer.cross_attention.k_proj, layer.cross_attention.v_proj)
        ):
            return "a cross-attention key or value projection of another kind"
        for attention in (layer.self_attention, layer.cross_attention):
            if attention.additive_score is not None or attention.logits_hook is not None:
                return "additive attention or a logits hook"
            if attention.d_k != attention.d_v or attention.d_k * attention.num_heads != config.d_model:
                return "per-head widths other than d_model / num_heads"
            settings = (attention.implementation, attention.explicit_max_length, attention.scaling)
            if settings != attention_settings:
                return "attention layers with different implementations or scalings"
        linears = (
            layer.self_attention.out_proj,
            layer.cross_attention.q_proj,
            layer.cross_attention.out_proj,
            layer.feed_forward.linear_in,
            layer.feed_forward.linear_out,
        )
        unknown = [type(linear).__name__ for linear in linears if _linear_spec(linear) is None]
        if unknown:
            return f"linear layer {unknown[0]}"
    if model.positional_encoding is not None and not isinstance(
        model.positional_encoding, SinusoidalPositionalEncoding | LearnedPositionalEmbedding
    ):
        return f"positional encoding {type(model.positional_encoding).__name__}"
    return None


class NativeDecoderStep:
    """Run a Transformer's incremental decoder step in one C++ call.

    Parameters
    ----------
    model : Transformer
        A model prepared for inference that :func:`unsupported_reason` accepts.
    extension : ModuleType
        The built extension (:func:`build_native_extension`).

    Notes
    -----
    The C++ object holds the model's own tensors (norms, dense weights, packed weights), so a weight changed
    in place is seen, as the Python step sees it; the one copy, a float self-attention's stacked q/k/v
    weight, is rebuilt when a q/k/v parameter's version moves, as the module rebuilds its own. Replacing a
    layer or a parameter object needs a new step. The caches it reads and extends are the model's own
    :class:`DecoderCache`, so beam search's reordering and the Python step can take turns on one cache.
    """

    def __init__(self, model: Transformer, extension: ModuleType) -> None:
        self.model = model
        self.extension = extension
        #: The float q/k/v parameters the stacked weights copy; their versions say when to rebuild.
        self.stacked_parameters: list[nn.Parameter] = []
        for layer in [*model.encoder.layers, *model.decoder.layers]:
            assert isinstance(layer, EncoderLayer | DecoderLayer)
            attention = layer.self_attention
            if not isinstance(getattr(attention, "qkv_proj", None), nn.Module):
                for projection in (attention.q_proj, attention.k_proj, attention.v_proj):
                    self.stacked_parameters += list(projection.parameters())
        self._build()

    def _stacked_versions(self) -> int:
        """Sum the versions of the stacked parameters (each in-place change adds one)."""
        return sum(parameter._version for parameter in self.stacked_parameters)

    def _build(self) -> None:
        """Hand the model's weights to a new C++ step."""
        model, extension = self.model, self.extension
        config = model.config
        self.built_versions = self._stacked_versions()
        self.num_heads = config.num_heads
        self.dtype = model.tgt_embedding.embedding.weight.dtype
        layers = []
        for layer in model.decoder.layers:
            assert isinstance(layer, DecoderLayer)
            norms = [
                residual.norm
                for residual in (
                    layer.self_attention_residual,
                    layer.cross_attention_residual,
                    layer.feed_forward_residual,
                )
            ]
            linears = (
                layer.self_attention.out_proj,
                layer.cross_attention.q_proj,
                layer.cross_attention.out_proj,
                layer.feed_forward.linear_in,
                layer.feed_forward.linear_out,
            )
            layers.append(
                (
                    *(tensor.detach() for norm in norms for tensor in (norm.weight, norm.bias)),
                    _stacked_projection_spec(layer.self_attention),
                    *(_required_spec(linear) for linear in linears),
                )
            )
        final_norm = model.decoder.final_norm
        if model.output_projection is not None:
            output_projection = _required_spec(model.output_projection)
        else:  # tied to the target embedding (section 3.4), as Transformer.project_output multiplies
            output_projection = ("dense", model.tgt_embedding.weight.detach(), None)
        #: Rows of positional encodings the C++ step adds (None without positions); regrown on demand.
        self.position_table: Tensor | None = self._position_table(0)
        settings = _stack_settings(model)
        self._step: Any = extension.DecoderStep(
            layers,
            final_norm.weight.detach() if final_norm is not None else None,
            final_norm.bias.detach() if final_norm is not None else None,
            output_projection,
            model.output_bias.detach().to(self.dtype) if model.output_bias is not None else None,
            model.tgt_embedding.embedding.weight.detach(),
            float(model.tgt_embedding.scale),
            settings,
        )
        encoder_layers = []
        for encoder_layer in model.encoder.layers:
            assert isinstance(encoder_layer, EncoderLayer)
            encoder_layers.append(
                (
                    encoder_layer.self_attention_residual.norm.weight.detach(),
                    encoder_layer.self_attention_residual.norm.bias.detach(),
                    encoder_layer.feed_forward_residual.norm.weight.detach(),
                    encoder_layer.feed_forward_residual.norm.bias.detach(),
                    _stacked_projection_spec(encoder_layer.self_attention),
                    _required_spec(encoder_layer.self_attention.out_proj),
                    _required_spec(encoder_layer.feed_forward.linear_in),
                    _required_spec(encoder_layer.feed_forward.linear_out),
                )
            )
        cross_projections = []
        for layer in model.decoder.layers:
            assert isinstance(layer, DecoderLayer)
            cross = layer.cross_attention
            cross_projections.append((_required_spec(cross.k_proj), _required_spec(cross.v_proj)))
        self._encoder: Any = extension.EncoderForward(
            encoder_layers,
            cross_projections,
            model.encoder.final_norm.weight.detach() if model.encoder.final_norm is not None else None,
            model.encoder.final_norm.bias.detach() if model.encoder.final_norm is not None else None,
            model.src_embedding.embedding.weight.detach(),
            float(model.src_embedding.scale),
            settings,
        )

    def encode(self, src_tokens: Tensor) -> tuple[Tensor, DecoderCache]:
        """Encode sources and project them for every decoder layer's cross-attention, in one C++ call.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, right-padded with ``pad_id``.

        Returns
        -------
        memory : torch.Tensor, shape (batch, src_len, d_model)
            What :meth:`Transformer.encode` returns.
        cache : DecoderCache
            What :meth:`Transformer.init_decoder_cache` returns for it: nothing decoded yet.

        Notes
        -----
        The same operations as the Python encoder and :meth:`Decoder.init_cache`, on the same tensors, so
        the same bits (tested); the keys are laid out as ``init_cache`` lays them out.
        """
        if self.stacked_parameters and self._stacked_versions() != self.built_versions:
            self._build()
        self._cover_positions(src_tokens.size(1))
        attend_mask = padding_to_attend_mask(build_padding_mask(src_tokens, self.model.config.pad_id))
        memory, keys, values = self._encoder.forward(src_tokens, self.position_table, attend_mask)
        layers = [
            DecoderLayerCache(cross_key=key, cross_value=value)
            for key, value in zip(keys, values, strict=True)
        ]
        return memory, DecoderCache(layers=layers, cross_attend_mask=attend_mask)

    def _cover_positions(self, length: int) -> None:
        """Make the position table hold positions 0 .. length - 1, or refuse as the model would."""
        if self.position_table is None or length <= self.position_table.size(0):
            return
        if isinstance(self.model.positional_encoding, LearnedPositionalEmbedding):
            limit = self.model.positional_encoding.max_positions
            raise ValueError(f"position {length - 1} is beyond the learned positions (max_positions={limit})")
        self.position_table = self._position_table(2 * length)

    def _position_table(self, length: int) -> Tensor | None:
        """Positions 0 .. length - 1 (at least the encoding's current table) in the model's dtype, or None."""
        encoding = self.model.positional_encoding
        if encoding is None:
            return None
        if isinstance(encoding, LearnedPositionalEmbedding):
            return encoding.embedding.weight.detach().to(self.dtype)
        assert isinstance(encoding, SinusoidalPositionalEncoding)
        return encoding(max(length, encoding.table.size(0)), 0).detach().to(self.dtype)

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
        Attention takes the path
        :func:`~transformer.model.scaled_dot_product_attention.scaled_dot_product_attention` takes for the
        layer's settings (explicit formula at short lengths, fused kernel beyond), so the log-probabilities
        are the Python step's, bit for bit (tested).
        """
        logits = self.run(cache, last_tokens, project=True)  # (rows, 1, vocab)
        return F.log_softmax(logits[:, -1], dim=-1, dtype=torch.float32)

    def hidden(self, cache: DecoderCache, last_tokens: Tensor) -> Tensor:
        """Feed one token per row, extend the cache, and return the final decoder states.

        Parameters
        ----------
        cache : DecoderCache
            As for :meth:`log_probs`.
        last_tokens : torch.Tensor, shape (rows,), int64
            The newest token of every row.

        Returns
        -------
        torch.Tensor, shape (rows, 1, d_model)
            What :meth:`Transformer.decode_hidden` returns for the new position.

        Notes
        -----
        For the vocabulary shortlist, which projects onto a few rows of the output matrix itself.
        """
        return self.run(cache, last_tokens, project=False)

    def run(
        self,
        cache: DecoderCache,
        last_tokens: Tensor,
        project: bool,
        positions: Tensor | None = None,
        self_attend_mask: Tensor | None = None,
    ) -> Tensor:
        """Run one step: the logits or the final states of every row.

        Parameters
        ----------
        cache : DecoderCache
            The rows' cache, extended in place; ``decoded_len`` advanced by one when ``positions`` is None.
        last_tokens : torch.Tensor, shape (rows,), int64
            The newest token of every row.
        project : bool
            Return logits rather than the final decoder states.
        positions : torch.Tensor or None, shape (rows,), int64
            Each row's own position (a continuous batch's rows start at different times); None places every
            row at ``cache.decoded_len``.
        self_attend_mask : torch.Tensor or None, shape (rows, 1, 1, key_len), bool
            True on the cached keys (and the new one) each row may see; None: all of them.

        Returns
        -------
        torch.Tensor, shape (rows, 1, tgt_vocab_size) or (rows, 1, d_model)
            Logits or states, in the model's dtype.

        Notes
        -----
        A sinusoidal table shorter than the furthest position is regrown (doubling), as the Python encoding
        grows its own.
        """
        if self.stacked_parameters and self._stacked_versions() != self.built_versions:
            self._build()
        position = cache.decoded_len
        furthest = position if positions is None else int(positions.max())
        self._cover_positions(furthest + 1)
        mask = cache.cross_attend_mask
        assert mask is not None
        rows = last_tokens.size(0)
        self_keys = [
            _self_cache(layer.self_key, rows, self.num_heads, layer.cross_key) for layer in cache.layers
        ]
        self_values = [
            _self_cache(layer.self_value, rows, self.num_heads, layer.cross_value) for layer in cache.layers
        ]
        output, self_keys, self_values = self._step.step(
            last_tokens,
            self.position_table,
            position,
            positions,
            self_keys,
            self_values,
            self_attend_mask,
            [layer.cross_key for layer in cache.layers],
            [layer.cross_value for layer in cache.layers],
            mask,
            cache.rows_per_source,
            project,
        )
        for layer, key, value in zip(cache.layers, self_keys, self_values, strict=True):
            layer.self_key, layer.self_value = key, value
        if positions is None:
            cache.decoded_len = position + 1
        return output


#: How the C++ step is told about one linear layer: ("int8", packed, reduce_range), ("onednn", packed weight,
#: bias) or ("dense", weight, bias).
LinearSpec = tuple[str, Any, Any]


def _linear_spec(linear: Tensor | nn.Module) -> LinearSpec | None:
    """Describe a linear layer for the C++ step, or None for a kind it does not know."""
    if isinstance(linear, Int8Linear):
        return ("int8", linear.packed_weight, linear.reduce_range)
    if isinstance(linear, OneDNNLinear):
        return ("onednn", linear.packed_weight, linear.bias)
    if isinstance(linear, nn.Linear):
        return ("dense", linear.weight.detach(), None if linear.bias is None else linear.bias.detach())
    return None


def _required_spec(linear: Tensor | nn.Module) -> LinearSpec:
    """Describe a linear layer :func:`unsupported_reason` has accepted."""
    spec = _linear_spec(linear)
    assert spec is not None, type(linear).__name__
    return spec


def _stacked_projection_spec(attention: Tensor | nn.Module) -> LinearSpec:
    """Describe the self-attention's one q/k/v product: its stacked layer, or the stacked float weight."""
    assert isinstance(attention, MultiHeadAttention)
    stacked = getattr(attention, "qkv_proj", None)  # int8 and oneDNN attention keep one
    if isinstance(stacked, nn.Module):
        return _required_spec(stacked)
    with torch.no_grad():
        weight, bias = attention._fused_projection()  # the very tensors project_self multiplies by
    return ("dense", weight.detach(), None if bias is None else bias.detach())


def _stack_settings(model: Transformer) -> tuple[int, float, str, bool, int, bool, float, str]:
    """Both stacks' shared rules, as the C++ ``Rules`` reads them.

    (num_heads, attention_scale, scaling, fused_attention, explicit_max_length, norm_first, layer_norm_eps,
    activation); :func:`unsupported_reason` has checked that every attention layer has the first one's.
    """
    config = model.config
    attention = model.decoder.layers[0].self_attention
    assert isinstance(attention, MultiHeadAttention)
    return (
        config.num_heads,
        score_scale(attention.d_k, attention.scaling),
        attention.scaling,
        attention.implementation != "explicit",
        -1 if attention.implementation == "fused" else attention.explicit_max_length,
        config.norm_first,
        config.layer_norm_eps,
        config.activation,
    )


def _self_cache(cached: Tensor | None, rows: int, num_heads: int, like: Tensor) -> Tensor:
    """Return the cached self-attention keys (or values), or (rows, heads, 0, head_dim) empty at the first step."""
    if cached is not None:
        return cached
    return like.new_empty((rows, num_heads, 0, like.size(-1)))


def native_decoder_step(model: Transformer) -> tuple[NativeDecoderStep | None, str]:
    """Build the native step for a model, or say why decoding keeps the Python step.

    Parameters
    ----------
    model : Transformer
        A model prepared for inference.

    Returns
    -------
    tuple of (NativeDecoderStep or None, str)
        The step (None when unavailable) and one line for the translator's kernel notes.

    Notes
    -----
    Checks the model before building, so a model the step does not cover never triggers a compilation.
    """
    reason = unsupported_reason(model)
    if reason is not None:
        return None, f"native decoder step: not used ({reason})"
    build = build_native_extension()
    if build.module is None:
        return None, build.note
    try:
        step = NativeDecoderStep(model, build.module)
        mismatch = _differs_from_python(step)
    except (
        RuntimeError,
        ValueError,
        TypeError,
    ) as error:  # an operator this PyTorch lacks, a packing it reads differently
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return None, f"native decoder step: not used (its check failed: {first_line})"
    if mismatch is not None:
        return None, f"native decoder step: not used (its check {mismatch})"
    return step, build.note


def _differs_from_python(step: NativeDecoderStep) -> str | None:
    """Encode two short sources and take two steps both ways; say where the bits differ, or None."""
    model = step.model
    config = model.config
    special = {config.pad_id, config.bos_id, config.eos_id, config.unk_id}
    token = next(index for index in range(config.vocab_size) if index not in special)
    src_tokens = torch.tensor([[token, token, config.eos_id], [token, config.eos_id, config.pad_id]])
    last_tokens = torch.tensor([config.bos_id, config.bos_id])
    with torch.inference_mode():
        memory = model.encode(src_tokens)
        python_cache = model.init_decoder_cache(memory, build_padding_mask(src_tokens, config.pad_id))
        native_memory, native_cache = step.encode(src_tokens)
        if not torch.equal(memory, native_memory):
            return "encoded differently from the Python encoder"
        for _ in range(2):
            expected = model.decode(last_tokens[:, None], None, None, python_cache)[:, -1]
            expected = F.log_softmax(expected, dim=-1, dtype=torch.float32)
            actual = step.log_probs(native_cache, last_tokens)
            if not torch.equal(expected, actual):
                return "decoded differently from the Python step"
            last_tokens = expected.argmax(dim=-1)
    return None
