"""Build the boolean masks the model uses, and convert between their two senses.

Two conventions, each named by what True means (see STYLE.md):

* ``*_padding_mask`` is True on padding tokens, like ``torch.nn.MultiheadAttention``'s ``key_padding_mask``.
* ``attend_mask`` is True where a query may attend to a key, like ``F.scaled_dot_product_attention``.

Only this module builds or converts masks; attention turns an ``attend_mask`` into ``-inf`` scores.
"""

import torch
from torch import Tensor


def build_padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Mark the padding tokens of a batch.

    Parameters
    ----------
    tokens : torch.Tensor, shape (batch, seq_len), int64
        Token ids, right-padded with ``pad_id``.
    pad_id : int
        The id of the padding token.

    Returns
    -------
    torch.Tensor, shape (batch, seq_len), bool
        True where ``tokens`` is padding.

    Notes
    -----
    Same sense as ``key_padding_mask`` in ``torch.nn.MultiheadAttention``, the opposite of an attend mask:
    convert it with :func:`padding_to_attend_mask` before handing it to attention.
    """
    return tokens.eq(pad_id)


def padding_to_attend_mask(padding_mask: Tensor) -> Tensor:
    """Turn a key padding mask into an attend mask that broadcasts over heads and queries.

    Parameters
    ----------
    padding_mask : torch.Tensor, shape (batch, key_len), bool
        True on padding keys.

    Returns
    -------
    torch.Tensor, shape (batch, 1, 1, key_len), bool
        True where the key is a real token, so every query may attend to it.

    Notes
    -----
    The result broadcasts to ``(batch, num_heads, query_len, key_len)`` inside attention.
    """
    return ~padding_mask[:, None, None, :]


def build_causal_mask(
    query_len: int, key_len: int | None = None, device: torch.device | None = None
) -> Tensor:
    """Allow each query to attend to its own position and earlier ones only.

    Parameters
    ----------
    query_len : int
        Number of query positions; they are the last ``query_len`` of the ``key_len`` positions.
    key_len : int, optional
        Number of key positions; defaults to ``query_len``. Larger during incremental decoding, where the
        keys include cached earlier positions.
    device : torch.device, optional
        Device of the result.

    Returns
    -------
    torch.Tensor, shape (query_len, key_len), bool
        True where the key position is not in the query's future.

    Notes
    -----
    Paper section 3.2.3: masking future positions keeps the decoder auto-regressive.
    """
    key_len = query_len if key_len is None else key_len
    query_positions = torch.arange(key_len - query_len, key_len, device=device)[:, None]
    key_positions = torch.arange(key_len, device=device)[None, :]
    return key_positions <= query_positions


def build_window_mask(
    query_len: int, key_len: int, window: int, causal: bool, device: torch.device | None = None
) -> Tensor:
    """Restrict self-attention to a neighbourhood of ``window`` positions on each side.

    Parameters
    ----------
    query_len : int
        Number of query positions; they are the last ``query_len`` of the ``key_len`` positions.
    key_len : int
        Number of key positions.
    window : int
        The neighbourhood size r of Table 1: a query at position i sees keys i - r .. i + r.
    causal : bool
        Also hide future positions (decoder self-attention).
    device : torch.device, optional
        Device of the result.

    Returns
    -------
    torch.Tensor, shape (query_len, key_len), bool
        True where the key is inside the query's window (and not in its future when ``causal``).

    Notes
    -----
    Table 1, last row ("Self-Attention (restricted)"): O(r n d) work and O(n / r) maximum path length.
    """
    query_positions = torch.arange(key_len - query_len, key_len, device=device)[:, None]
    key_positions = torch.arange(key_len, device=device)[None, :]
    allowed = (key_positions - query_positions).abs() <= window
    if causal:
        allowed &= key_positions <= query_positions
    return allowed


def combine_attend_masks(first: Tensor | None, second: Tensor | None) -> Tensor | None:
    """Allow a query-key pair only where both masks allow it.

    Parameters
    ----------
    first, second : torch.Tensor or None, bool, broadcastable to (batch, num_heads, query_len, key_len)
        Attend masks; None allows every pair.

    Returns
    -------
    torch.Tensor or None, shape broadcast from ``first`` and ``second``
        The broadcast conjunction, or the one mask given, or None when both are None.

    Notes
    -----
    Used to join a padding mask, shape (batch, 1, 1, key_len), with a causal or window mask, shape
    (query_len, key_len). Returning None rather than an all-True mask lets attention skip masking
    altogether. The conjunction can leave a query no key at all; attention then gives it a zero output
    rather than NaN.
    """
    if first is None:
        return second
    if second is None:
        return first
    return first & second
