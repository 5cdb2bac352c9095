"""The two graphs an ONNX export holds: the encoder, and one decoder step with its key/value cache.

Incremental decoding (section 3.2.3's decoder, one token at a time) needs state between steps, and an ONNX
graph has none: the state travels as tensors. :class:`EncoderGraph` encodes a batch once and returns every
decoder layer's projected encoder output (its cross-attention keys and values); :class:`DecoderStepGraph`
takes one token per row, the keys/values of every earlier position (``past``) and those projections, and
returns the next token's log-probabilities and the keys/values grown by the new position (``present``).
Both call the model's own methods through a :class:`~transformer.model.decoder.DecoderCache` built from their
inputs, so the exported arithmetic is the arithmetic the PyTorch search runs, not a second copy of it.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from transformer.model.decoder import DecoderCache, DecoderLayerCache
from transformer.model.masks import build_padding_mask
from transformer.model.positional_encoding import SinusoidalPositionalEncoding
from transformer.model.transformer import Transformer

#: The ONNX operator set the graphs are written in (onnxruntime 1.17 and later run it).
ONNX_OPSET = 18
ENCODER_FILE = "encoder.onnx"
DECODER_STEP_FILE = "decoder_step.onnx"


def cache_names(prefix: str, num_layers: int) -> list[str]:
    """Name each layer's key and value tensors, in the order the graphs take and give them.

    Parameters
    ----------
    prefix : str
        "cross", "past" or "present".
    num_layers : int
        Decoder layers.

    Returns
    -------
    list of str
        ``[f"{prefix}_key_0", f"{prefix}_value_0", f"{prefix}_key_1", ...]``: 2 x ``num_layers`` names.

    Notes
    -----
    One naming rule for the exporter and the engine (:mod:`~transformer.interop.onnx_step_model`), so a
    graph's inputs are always fed by name, never by a position that could silently shift.
    """
    return [f"{prefix}_{part}_{layer}" for layer in range(num_layers) for part in ("key", "value")]


class EncoderGraph(nn.Module):
    """Encode source sentences and project them for every decoder layer's cross-attention.

    Parameters
    ----------
    model : Transformer
        The model, in eval mode.

    Notes
    -----
    The encoder output itself is not returned: decoding only ever reads its per-layer projections, which
    :meth:`~transformer.model.transformer.Transformer.init_decoder_cache` computes once per sentence.
    """

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, src_tokens: Tensor) -> tuple[Tensor, ...]:
        """Encode and project.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source ids, each sentence ending with EOS, right-padded with the pad id.

        Returns
        -------
        tuple of torch.Tensor
            Per decoder layer, ``cross_key`` and ``cross_value``, each (batch, num_heads, src_len, d_k).

        Notes
        -----
        The padding mask is rebuilt from ``src_tokens`` inside the graph, so padding is never attended to.
        """
        memory = self.model.encode(src_tokens)  # (batch, src_len, d_model)
        cache = self.model.init_decoder_cache(
            memory, build_padding_mask(src_tokens, self.model.config.pad_id)
        )
        return tuple(tensor for layer in cache.layers for tensor in (layer.cross_key, layer.cross_value))


class DecoderStepGraph(nn.Module):
    """One incremental decoder step: a token per row in, next-token log-probabilities and grown caches out.

    Parameters
    ----------
    model : Transformer
        The model, in eval mode.

    Notes
    -----
    The new token's position is the length of ``past``, read from the tensor's shape, so the graph needs no
    step counter and every row of a call sits at the same position (as in our searches, which extend every
    row by one token per step). Cross-attention tensors come one per row (``rows_per_source`` 1): the engine
    copies a sentence's projections to its beams once, and again only when rows change sentence.
    """

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model
        self.num_layers = model.config.num_decoder_layers

    def forward(self, last_tokens: Tensor, source_mask: Tensor, *caches: Tensor) -> tuple[Tensor, ...]:
        """Feed one token per row.

        Parameters
        ----------
        last_tokens : torch.Tensor, shape (rows,), int64
            Newest token of every row (the start token at the first step).
        source_mask : torch.Tensor, shape (rows, src_len), bool
            True on each row's real source tokens.
        *caches : torch.Tensor
            ``cross_key_0, cross_value_0, ...`` (rows, num_heads, src_len, d_k), then ``past_key_0,
            past_value_0, ...`` (rows, num_heads, past_len, d_k), in :func:`cache_names` order.

        Returns
        -------
        tuple of torch.Tensor
            ``log_probs`` (rows, tgt_vocab_size) float32, then ``present_key_0, present_value_0, ...``
            (rows, num_heads, past_len + 1, d_k).

        Notes
        -----
        ``past_len`` may be 0 (the first step): concatenating an empty cache is exact.
        """
        cross, past = caches[: 2 * self.num_layers], caches[2 * self.num_layers :]
        layers = [
            DecoderLayerCache(cross[2 * index], cross[2 * index + 1], past[2 * index], past[2 * index + 1])
            for index in range(self.num_layers)
        ]
        cache = DecoderCache(layers, source_mask[:, None, None, :], decoded_len=past[0].size(2))
        logits = self.model.decode(last_tokens[:, None], None, None, cache)  # (rows, 1, vocab)
        log_probs = F.log_softmax(logits[:, -1], dim=-1, dtype=torch.float32)
        grown = [tensor for layer in cache.layers for tensor in (layer.self_key, layer.self_value)]
        return (log_probs, *[tensor for tensor in grown if tensor is not None])


def export_graphs(model: Transformer, directory: Path, max_positions: int) -> list[str]:
    """Trace the encoder and the decoder step of ``model`` into ONNX files in ``directory``.

    Parameters
    ----------
    model : Transformer
        The model (float32, on the CPU, in eval mode).
    directory : Path
        Where :data:`ENCODER_FILE` and :data:`DECODER_STEP_FILE` are written.
    max_positions : int
        Positions the graphs can encode: a sinusoidal table is grown to this size before tracing and stored
        as a constant of this many rows.

    Returns
    -------
    list of str
        The file names written.

    Notes
    -----
    Traced by ``torch.onnx.export(dynamo=True)`` with batch, source length and past length dynamic; the
    example inputs have at least 2 of each, since ``torch.export`` specialises sizes 0 and 1. Needs the
    ``onnx`` extra (onnx, onnxscript).
    """
    if isinstance(model.positional_encoding, SinusoidalPositionalEncoding):
        model.positional_encoding(max_positions)  # grow the table now: the graph holds it as a constant
    config, layers = model.config, model.config.num_decoder_layers
    rows, src_len, past_len = 3, 5, 2
    src_tokens = torch.full((rows, src_len), config.eos_id, dtype=torch.long)
    src_tokens[0, -1] = config.pad_id  # a padded row, so the mask is a real computation, not a constant
    batch, source, past = torch.export.Dim("batch"), torch.export.Dim("src_len"), torch.export.Dim("past_len")
    _export(EncoderGraph(model).eval(), (src_tokens,), ["src_tokens"], cache_names("cross", layers),
            ({0: batch, 1: source},), directory / ENCODER_FILE)  # fmt: skip
    with torch.no_grad():
        cross = EncoderGraph(model)(src_tokens)
    past_caches = tuple(torch.zeros(*tensor.shape[:2], past_len, tensor.size(3)) for tensor in cross)
    cross_shape, past_shape = {0: batch, 2: source}, {0: batch, 2: past}
    _export(
        DecoderStepGraph(model).eval(),
        (
            torch.full((rows,), config.bos_id, dtype=torch.long),
            src_tokens != config.pad_id,
            *cross,
            *past_caches,
        ),
        ["last_tokens", "source_mask", *cache_names("cross", layers), *cache_names("past", layers)],
        ["log_probs", *cache_names("present", layers)],
        ({0: batch}, {0: batch, 1: source}, (*[cross_shape] * len(cross), *[past_shape] * len(past_caches))),
        directory / DECODER_STEP_FILE,
    )
    return [ENCODER_FILE, DECODER_STEP_FILE]


def _export(
    graph: nn.Module,
    inputs: tuple[Tensor, ...],
    input_names: Sequence[str],
    output_names: Sequence[str],
    dynamic_shapes: tuple[Any, ...],
    path: Path,
) -> None:
    """Trace one graph to ``path`` with named inputs/outputs and the given dynamic dimensions."""
    with torch.no_grad():
        program = torch.onnx.export(
            graph,
            inputs,
            dynamo=True,
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_shapes=dynamic_shapes,
            opset_version=ONNX_OPSET,
            optimize=True,
            verbose=False,
        )
    assert program is not None
    program.save(str(path), external_data=False)
