"""Which decoder rows exist and which source each one reads: the search's side of the decoder cache.

The model stores incremental-decoding state (:class:`~transformer.model.decoder.DecoderCache`) and honours one
layout rule: ``rows_per_source`` consecutive rows share one source sentence's projected encoder output. Beam
search decides the rows (a sentence's beams, survivors after each step, sentences dropped once done) and
rearranges the cache here, keeping each sentence's beams together so the shared layout holds.
"""

import torch
from torch import Tensor

from transformer.model.decoder import DecoderCache


def reorder_decoder_cache(cache: DecoderCache, batch_indices: Tensor) -> None:
    """Keep, duplicate or permute the rows of a decoder cache, e.g. to follow surviving beams.

    Parameters
    ----------
    cache : DecoderCache
        The cache of :meth:`Transformer.init_decoder_cache`, changed in place.
    batch_indices : torch.Tensor, shape (new_rows,), int64
        For each new row, the old row it continues.

    Returns
    -------
    None

    Notes
    -----
    Rows may grow (batch to batch x beam), shrink (finished sentences dropped) or be permuted freely.
    When the new rows keep each sentence's rows together, the same number per sentence (as beam search
    does), the encoder keys/values are kept once per sentence and the model folds those rows into one
    cross-attention query block; otherwise they are copied per row. Telling the two apart reads a few
    values back to the host (unique sentence counts), negligible on a CPU; on a GPU it is one of the syncs
    per beam step.
    """
    sentences = torch.div(batch_indices, cache.rows_per_source, rounding_mode="floor")
    kept, counts = torch.unique_consecutive(sentences, return_counts=True)
    rows_per_source = int(counts[0])
    if bool((counts == rows_per_source).all()) and kept.numel() == torch.unique(kept).numel():
        source_rows = kept  # grouped: one copy of the encoder side per sentence
    else:
        source_rows, rows_per_source = sentences, 1  # any other order: one copy per row
    unchanged = source_rows.numel() == cache.layers[0].cross_key.size(0) and torch.equal(
        source_rows, torch.arange(source_rows.numel(), device=source_rows.device)
    )
    for layer in cache.layers:
        if not unchanged:
            layer.cross_key = layer.cross_key.index_select(0, source_rows)
            layer.cross_value = layer.cross_value.index_select(0, source_rows)
        if layer.self_key is not None and layer.self_value is not None:
            layer.self_key = layer.self_key.index_select(0, batch_indices)
            layer.self_value = layer.self_value.index_select(0, batch_indices)
    if cache.cross_attend_mask is not None and not unchanged:
        cache.cross_attend_mask = cache.cross_attend_mask.index_select(0, source_rows)
    cache.rows_per_source = rows_per_source
