"""A training corpus read from a token store: lengths as arrays, ids sliced from the mapped files per batch.

:class:`StoredCorpus` has what :func:`transformer.data.pipeline.batch.collate` and
:class:`transformer.data.pipeline.token_batch_sampler.TokenBatchSampler` read from an
:class:`~transformer.data.pipeline.dataset.EncodedCorpus` (``len``, ``source[i]``, ``target[i]``, ``source_lengths``,
``target_lengths``, ``report``), so both work on it unchanged. Nothing is built per sentence for the whole
corpus: the two length arrays are one ``np.diff`` of the offsets each, and a pair's ids become a Python list
only when its batch is collated.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import overload

import numpy as np

from transformer.data.pipeline.dataset import FilterReport
from transformer.data.pipeline.token_store import TokenStore, TokenStoreError, open_token_store


class TokenSequences(Sequence[list[int]]):
    """One side of a token store as a read-only sequence of id lists.

    Parameters
    ----------
    ids : numpy.ndarray, shape (num_tokens,)
        The side's concatenated ids (memory-mapped).
    offsets : numpy.ndarray, shape (num_pairs + 1,), int64
        Pair i is ``ids[offsets[i]:offsets[i + 1]]``.

    Notes
    -----
    ``sequences[i]`` returns a fresh ``list[int]``, equal to the in-memory corpus's list for that pair;
    negative indices count from the end as for a list, and a slice gives a list of lists.
    """

    def __init__(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self.ids = ids
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, index: int) -> list[int]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[int]]: ...

    def __getitem__(self, index: int | slice) -> list[int] | list[list[int]]:
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        position = int(index)
        size = len(self)
        if position < 0:
            position += size
        if not 0 <= position < size:
            raise IndexError(f"pair index {index} is outside the {size} pairs of the token store")
        start, end = int(self.offsets[position]), int(self.offsets[position + 1])
        ids: list[int] = np.asarray(self.ids[start:end]).tolist()
        return ids


def _lengths(offsets: np.ndarray, path: Path) -> np.ndarray:
    """Per-pair lengths from offsets as int32, refusing offsets that go backwards or jump (a damaged file)."""
    decreasing = offsets[1:] < offsets[:-1]
    if decreasing.any():
        raise TokenStoreError(
            f"{path}: offsets decrease at pair {int(decreasing.argmax())} (damaged token store; delete "
            f"{path.parent} to rebuild it)"
        )
    # The offsets do not decrease, so a pair of 2**31 tokens or more wraps in int32 to a smaller length and the
    # int64 sum of the lengths falls short of the offsets' span by a multiple of 2**32.
    lengths = np.subtract(offsets[1:], offsets[:-1], dtype=np.int32, casting="unsafe")
    if int(lengths.sum(dtype=np.int64)) != int(offsets[-1]) - int(offsets[0]):
        raise TokenStoreError(
            f"{path}: a pair spans 2**31 tokens or more (damaged token store; delete {path.parent} to rebuild it)"
        )
    return lengths


class StoredCorpus:
    """Token ids of the sentence pairs in a token store, with the interface batching reads.

    Parameters
    ----------
    store : TokenStore
        An opened store (:func:`transformer.data.pipeline.token_store.open_token_store`).

    Notes
    -----
    ``source_lengths`` and ``target_lengths`` are computed once, at construction, and are plain int32
    arrays (4 bytes per pair and side: 144 MB per side at 36M pairs, allocated and written at start-up,
    which is why not int64); the ids stay on disk and are paged in
    by the operating system as batches read them. ``pair_indices`` is None: the store keeps only the kept
    pairs, not where they were in the text. Pickling reopens the store by path rather than copying arrays.
    """

    def __init__(self, store: TokenStore) -> None:
        self.store = store
        self._source = TokenSequences(store.source_ids, store.source_offsets)
        self._target = TokenSequences(store.target_ids, store.target_offsets)
        self._source_lengths = _lengths(store.source_offsets, store.directory / "source_offsets.bin")
        self._target_lengths = _lengths(store.target_offsets, store.directory / "target_offsets.bin")
        dropped = store.manifest.get("dropped", {})
        self._report = FilterReport(
            store.num_pairs,
            int(dropped.get("empty", 0)),
            int(dropped.get("too_long", 0)),
            store.manifest.get("max_len"),
        )
        self.pair_indices: list[int] | None = None

    @classmethod
    def open(cls, directory: Path, verify: bool = False) -> "StoredCorpus":
        """Open the store at ``directory`` as a corpus.

        Parameters
        ----------
        directory : pathlib.Path
            A finished token store.
        verify : bool
            Also check every array file's SHA-256.

        Returns
        -------
        StoredCorpus
            The corpus.

        Raises
        ------
        TokenStoreError
            From :func:`~transformer.data.pipeline.token_store.open_token_store`, naming the damaged file.

        Notes
        -----
        ``verify`` hashes every array, which reads the whole store once; without it only the sizes and offsets
        are checked, which is instant.
        """
        return cls(open_token_store(directory, verify=verify))

    def __len__(self) -> int:
        return self.store.num_pairs

    def __reduce__(self) -> tuple[object, tuple[Path]]:
        return (StoredCorpus.open, (self.store.directory,))

    @property
    def source(self) -> TokenSequences:
        """Source ids per pair, each ending with EOS.

        Returns
        -------
        TokenSequences
            ``source[i]`` is pair i's ids as a list.

        Notes
        -----
        Sliced from the memory-mapped file on each access.
        """
        return self._source

    @property
    def target(self) -> TokenSequences:
        """Target ids per pair, without BOS or EOS.

        Returns
        -------
        TokenSequences
            ``target[i]`` is pair i's ids as a list.

        Notes
        -----
        Sliced from the memory-mapped file on each access.
        """
        return self._target

    @property
    def source_lengths(self) -> np.ndarray:
        """Source length of each pair, EOS included.

        Returns
        -------
        numpy.ndarray, shape (num_pairs,), int32
            Differences of consecutive source offsets.

        Notes
        -----
        Computed once when the corpus is built; the same array is returned each time.
        """
        return self._source_lengths

    @property
    def target_lengths(self) -> np.ndarray:
        """Target length of each pair, without BOS or EOS.

        Returns
        -------
        numpy.ndarray, shape (num_pairs,), int32
            Differences of consecutive target offsets.

        Notes
        -----
        One less than the decoder's sequence length, as for the in-memory corpus.
        """
        return self._target_lengths

    @property
    def report(self) -> FilterReport:
        """What the length and emptiness filter kept and dropped when the store was built.

        Returns
        -------
        FilterReport
            From the manifest's counts.

        Notes
        -----
        The same counts ``encode_corpus`` reports for the same text, tokenizer and ``max_len``.
        """
        return self._report
