"""Our model as a CTranslate2 ``TransformerSpec``: its layers, weights, position table and vocabularies.

CTranslate2 fuses the query, key and value projections of self-attention (and key and value of
cross-attention) into one matrix each, reads positions from a stored table (so our sinusoid layout, whichever
it is, or a learned table, goes in unchanged) and names the special tokens by their strings.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer.data.pipeline.marian_tokenizer import MarianTokenizer
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.interop.export_checks import attention_requirements, refuse_unsupported
from transformer.model.config import TransformerConfig
from transformer.model.positional_encoding import sinusoidal_table

# Rows of the stored sinusoid table: the longest source (truncated to DEFAULT_MAX_INPUT_TOKENS) or output.
SINUSOIDAL_POSITIONS = 2048
ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "silu": "SWISH"}


def import_ctranslate2() -> Any:
    """Import the optional ``ctranslate2`` package.

    Returns
    -------
    module
        ``ctranslate2``.

    Raises
    ------
    ImportError
        Naming the extra to install when ``ctranslate2`` is missing.

    Notes
    -----
    The one place that imports it; a missing package is reported with the extra to install, not as a bare
    module name.
    """
    try:
        import ctranslate2
    except ImportError:
        raise ImportError(
            "CTranslate2 support needs the ctranslate2 package: pip install 'transformer[interop]'"
        ) from None
    return ctranslate2


def position_table_size(config: TransformerConfig) -> int:
    """Return how many positions the exported model can encode.

    Parameters
    ----------
    config : TransformerConfig
        Our model's config.

    Returns
    -------
    int
        ``max_positions`` for learned positions, else :data:`SINUSOIDAL_POSITIONS`.

    Notes
    -----
    CTranslate2 reads positions from the stored table; :class:`CTranslate2Translator` keeps inputs and
    outputs within it.
    """
    return config.max_positions if config.positional_encoding == "learned" else SINUSOIDAL_POSITIONS


def check_ctranslate2_exportable(config: TransformerConfig, source: str) -> None:
    """Refuse a model CTranslate2's Transformer cannot run.

    Parameters
    ----------
    config : TransformerConfig
        Our model's config.
    source : str
        The checkpoint, for error messages.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the field for additive or windowed attention, a score scaling other than 1/sqrt(d_k), or
        per-head widths other than ``d_model / num_heads``.

    Notes
    -----
    Post-norm and pre-norm, sinusoidal and learned positions, every activation, shared or separate
    vocabularies, tied or untied output projections and the logits bias are supported; additive or windowed
    attention, a score scaling other than 1/sqrt(d_k) and per-head widths other than ``d_model / num_heads``
    are refused.
    """
    refuse_unsupported(attention_requirements(config), source, "CTranslate2")


def vocabulary_pieces(tokenizer: TextTokenizer) -> tuple[list[str], list[str]]:
    """List the source and target pieces in id order, the vocabularies CTranslate2 registers.

    Parameters
    ----------
    tokenizer : TextTokenizer
        This project's joint SentencePiece tokenizer or a :class:`MarianTokenizer`.

    Returns
    -------
    source_pieces, target_pieces : list of str
        ``pieces[i]`` is the piece of id ``i``.

    Notes
    -----
    CTranslate2 identifies tokens by their strings, so the pieces of each side must be distinct; both
    tokenizers guarantee it.
    """
    if isinstance(tokenizer, MarianTokenizer):
        return tokenizer.source_pieces(), tokenizer.target_pieces()
    pieces = [tokenizer.id_to_piece(token_id) for token_id in range(tokenizer.vocab_size)]
    return pieces, pieces


def _numpy(tensor: Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().contiguous().numpy()


def _set_linear(spec: Any, weights: dict[str, Tensor], names: Sequence[str]) -> None:
    """Fill a LinearSpec with one Linear, or several fused along the output axis (e.g. q, k and v)."""
    spec.weight = _numpy(torch.cat([weights[f"{name}.weight"] for name in names]))
    spec.bias = _numpy(torch.cat([weights[f"{name}.bias"] for name in names]))


def _set_norm(spec: Any, weights: dict[str, Tensor], name: str) -> None:
    spec.gamma = _numpy(weights[f"{name}.weight"])
    spec.beta = _numpy(weights[f"{name}.bias"])


def _set_layer(layer_spec: Any, weights: dict[str, Tensor], prefix: str, is_decoder: bool) -> None:
    """Copy one encoder or decoder layer (attention, residual norms, feed-forward)."""
    attention = f"{prefix}.self_attention"
    _set_linear(
        layer_spec.self_attention.linear[0],
        weights,
        [f"{attention}.{p}" for p in ("q_proj", "k_proj", "v_proj")],
    )
    _set_linear(layer_spec.self_attention.linear[1], weights, [f"{attention}.out_proj"])
    _set_norm(layer_spec.self_attention.layer_norm, weights, f"{prefix}.self_attention_residual.norm")
    if is_decoder:
        cross = f"{prefix}.cross_attention"
        _set_linear(layer_spec.attention.linear[0], weights, [f"{cross}.q_proj"])
        _set_linear(layer_spec.attention.linear[1], weights, [f"{cross}.k_proj", f"{cross}.v_proj"])
        _set_linear(layer_spec.attention.linear[2], weights, [f"{cross}.out_proj"])
        _set_norm(layer_spec.attention.layer_norm, weights, f"{prefix}.cross_attention_residual.norm")
    _set_linear(layer_spec.ffn.linear_0, weights, [f"{prefix}.feed_forward.linear_in"])
    _set_linear(layer_spec.ffn.linear_1, weights, [f"{prefix}.feed_forward.linear_out"])
    _set_norm(layer_spec.ffn.layer_norm, weights, f"{prefix}.feed_forward_residual.norm")


def _position_table(weights: dict[str, Tensor], config: TransformerConfig) -> np.ndarray:
    if config.positional_encoding == "learned":
        return _numpy(weights["positional_encoding.embedding.weight"])
    return _numpy(sinusoidal_table(SINUSOIDAL_POSITIONS, config.d_model, config.sinusoidal_layout))


def build_transformer_spec(weights: dict[str, Tensor], config: TransformerConfig) -> Any:
    """Describe our model as a ``ctranslate2.specs.TransformerSpec`` holding its weights.

    Parameters
    ----------
    weights : dict of str to torch.Tensor
        Our state-dict entries, each shared matrix once (``Checkpoint.weights``).
    config : TransformerConfig
        A config that passed :func:`check_ctranslate2_exportable`.

    Returns
    -------
    ctranslate2.specs.TransformerSpec
        The specification, without vocabularies.

    Notes
    -----
    Attention projections are fused as CTranslate2 expects (q, k, v for self-attention; k, v for
    cross-attention). The output projection is the target embedding when tied; ``output_bias`` becomes its
    bias.
    """
    specs = import_ctranslate2().specs
    spec = specs.TransformerSpec.from_config(
        (config.num_encoder_layers, config.num_decoder_layers),
        config.num_heads,
        pre_norm=config.norm_first,
        activation=getattr(specs.Activation, ACTIVATIONS[config.activation]),
    )
    source_embedding = weights["src_embedding.embedding.weight"]
    target_embedding = (
        source_embedding if config.share_embeddings else weights["tgt_embedding.embedding.weight"]
    )
    table = _position_table(weights, config)
    for stack, embedding in ((spec.encoder, source_embedding), (spec.decoder, target_embedding)):
        embeddings_spec = stack.embeddings[0] if isinstance(stack.embeddings, list) else stack.embeddings
        embeddings_spec.weight = _numpy(embedding)
        stack.scale_embeddings = config.scale_embeddings
        stack.position_encodings.encodings = table
    for index, layer_spec in enumerate(spec.encoder.layer):
        _set_layer(layer_spec, weights, f"encoder.layers.{index}", is_decoder=False)
    for index, layer_spec in enumerate(spec.decoder.layer):
        _set_layer(layer_spec, weights, f"decoder.layers.{index}", is_decoder=True)
    if config.norm_first:
        _set_norm(spec.encoder.layer_norm, weights, "encoder.final_norm")
        _set_norm(spec.decoder.layer_norm, weights, "decoder.final_norm")
    output = target_embedding if config.tie_output_projection else weights["output_projection.weight"]
    spec.decoder.projection.weight = _numpy(output)
    if config.output_bias:
        spec.decoder.projection.bias = _numpy(weights["output_bias"])
    return spec


def register_vocabularies(spec: Any, tokenizer: TextTokenizer, config: TransformerConfig) -> None:
    """Register both vocabularies and name the special tokens CTranslate2 decodes with.

    Parameters
    ----------
    spec : ctranslate2.specs.TransformerSpec
        The specification from :func:`build_transformer_spec`; changed in place.
    tokenizer : TextTokenizer
        The checkpoint's tokenizer.
    config : TransformerConfig
        Supplies the special ids and the LayerNorm epsilon.

    Returns
    -------
    None

    Notes
    -----
    The decoder starts from ``config.start_id``'s piece (``<s>`` for our models, ``<pad>`` for Marian ones).
    """
    source_pieces, target_pieces = vocabulary_pieces(tokenizer)
    spec.register_source_vocabulary(source_pieces)
    spec.register_target_vocabulary(target_pieces)
    spec.config.unk_token = target_pieces[config.unk_id]
    spec.config.bos_token = target_pieces[config.bos_id]
    spec.config.eos_token = target_pieces[config.eos_id]
    spec.config.decoder_start_token = target_pieces[config.start_id]
    spec.config.layer_norm_epsilon = config.layer_norm_eps
