"""The padded layout of a continuous batch's decoder cache: appending sentences, trimming unused columns.

:class:`~transformer.serving.continuous_batching.ContinuousBatch` keeps the cache of sentences at different
steps in one :class:`~transformer.model.decoder.DecoderCache`: the projected sources right-padded to the longest
(``cross_attend_mask`` False on the padding), and each row's self-attention keys right-aligned, the columns
before them padding that ``self_valid`` (shape (rows, key_len), True on real keys) masks out.
"""

import torch
from torch import Tensor, nn

from transformer.model.decoder import DecoderCache


def append_sentences(
    cache: DecoderCache, new_cache: DecoderCache, self_valid: Tensor, new_rows: int
) -> Tensor:
    """Append new sentences' projected sources to a running cache, and padding self-attention rows.

    Parameters
    ----------
    cache : DecoderCache
        The running batch's cache (at least one sentence), changed in place.
    new_cache : DecoderCache
        ``Transformer.init_decoder_cache`` of the new sentences: cross-attention keys/values, no self part.
    self_valid : torch.Tensor, shape (rows, key_len), bool
        True on the running rows' real self-attention keys.
    new_rows : int
        Rows of the new sentences (sentences x ``cache.rows_per_source``).

    Returns
    -------
    torch.Tensor, shape (rows + new_rows, key_len), bool
        ``self_valid`` with the new rows, all padding: their first step feeds position 0.

    Notes
    -----
    Sources of a different length are right-padded to the longest (zeros, masked). The cross-attention keys
    get back the layout :meth:`Decoder.init_cache` chose (``key.transpose(-2, -1)`` contiguous), since every
    step multiplies by them.
    """
    old_mask, new_mask = cache.cross_attend_mask, new_cache.cross_attend_mask
    assert old_mask is not None and new_mask is not None
    src_len = max(old_mask.size(-1), new_mask.size(-1))
    cache.cross_attend_mask = torch.cat(
        [_pad_last(old_mask, src_len), _pad_last(new_mask, src_len)]
    )  # (sentences, 1, 1, src_len)
    for layer, new_layer in zip(cache.layers, new_cache.layers, strict=True):
        cross_key = torch.cat(
            [_pad_keys(layer.cross_key, src_len), _pad_keys(new_layer.cross_key, src_len)]
        )  # (sentences, num_heads, src_len, d_k)
        layer.cross_key = cross_key.transpose(-2, -1).contiguous().transpose(-2, -1)
        layer.cross_value = torch.cat(
            [_pad_keys(layer.cross_value, src_len), _pad_keys(new_layer.cross_value, src_len)]
        )
        if layer.self_key is not None and layer.self_value is not None:
            layer.self_key = _append_padding_rows(layer.self_key, new_rows)
            layer.self_value = _append_padding_rows(layer.self_value, new_rows)
    padding = self_valid.new_zeros((new_rows, self_valid.size(1)))
    return torch.cat([self_valid, padding])  # (rows, key_len)


def trim_unused_columns(cache: DecoderCache, self_valid: Tensor, src_len: int) -> Tensor:
    """Drop the self-attention columns no row uses and the source columns past ``src_len``.

    Parameters
    ----------
    cache : DecoderCache
        The running batch's cache, changed in place.
    self_valid : torch.Tensor, shape (rows, key_len), bool
        True on real self-attention keys.
    src_len : int
        The longest running source, in tokens.

    Returns
    -------
    torch.Tensor, shape (rows, kept_len), bool
        ``self_valid`` without the dropped columns.

    Notes
    -----
    Called after sentences leave: without it the cache would keep the width of the longest sentence ever
    decoded, and every step would attend over its padding.
    """
    used_columns = self_valid.any(dim=0)  # (key_len,)
    if used_columns.numel() and not bool(used_columns[0]):
        first = int(used_columns.nonzero()[0]) if bool(used_columns.any()) else used_columns.numel()
        self_valid = self_valid[:, first:]
        for layer in cache.layers:
            if layer.self_key is not None and layer.self_value is not None:
                layer.self_key = layer.self_key[:, :, first:]
                layer.self_value = layer.self_value[:, :, first:]
    mask = cache.cross_attend_mask
    if mask is not None and src_len < mask.size(-1):
        cache.cross_attend_mask = mask[..., :src_len]
        for layer in cache.layers:
            layer.cross_key = layer.cross_key[:, :, :src_len]
            layer.cross_value = layer.cross_value[:, :, :src_len]
    return self_valid


def model_device(model: nn.Module) -> torch.device:
    """Find where a model runs.

    Parameters
    ----------
    model : torch.nn.Module
        A model.

    Returns
    -------
    torch.device
        The device of its first parameter, else of its first buffer (an int8 model packs its weights), else
        the CPU.

    Notes
    -----
    Inputs must be moved there before a forward pass.
    """
    for tensor in [*model.parameters(), *model.buffers()]:
        return tensor.device
    return torch.device("cpu")


def _pad_last(mask: Tensor, length: int) -> Tensor:
    """Right-pad a mask's last dimension to ``length`` with False."""
    if mask.size(-1) == length:
        return mask
    padding = mask.new_zeros((*mask.shape[:-1], length - mask.size(-1)))
    return torch.cat([mask, padding], dim=-1)


def _pad_keys(keys: Tensor, length: int) -> Tensor:
    """Right-pad projected keys or values, shape (sources, num_heads, src_len, d_k), to ``length`` columns."""
    if keys.size(2) == length:
        return keys
    padding = keys.new_zeros((keys.size(0), keys.size(1), length - keys.size(2), keys.size(3)))
    return torch.cat([keys, padding], dim=2)


def _append_padding_rows(keys: Tensor, new_rows: int) -> Tensor:
    """Append ``new_rows`` all-padding rows to self-attention keys, shape (rows, num_heads, key_len, d_k)."""
    padding = keys.new_zeros((new_rows, *keys.shape[1:]))
    return torch.cat([keys, padding])
