"""A corpus encoded once into memory-mapped arrays on disk: the token store's format, opening and checking.

A store is a directory::

    source_ids.bin       token ids of every kept pair's source, EOS included, concatenated (uint16 or uint32)
    target_ids.bin       token ids of every kept pair's target, without BOS/EOS, concatenated
    source_offsets.bin   int64, num_pairs + 1 entries: pair i's source is source_ids[offsets[i]:offsets[i + 1]]
    target_offsets.bin   the same for the target side
    manifest.json        written last: format version, what was encoded (files, tokenizer, max_len), counts,
                         and the size and SHA-256 of every array file

The ids are uint16 when every id fits (a vocabulary of at most 65,536 pieces: the paper's 37,000 does) and
uint32 otherwise, so a WMT14 EN-DE training side (about 140 million tokens) is 280 MB on disk, and none of
it is in Python objects: the trainer maps the files and slices one batch's pairs at a time.

Why numpy memmap rather than Arrow: numpy is already a dependency and Arrow (pyarrow, about 100 MB) is not;
the trainer needs exactly two operations, the lengths of every pair (one ``np.diff`` of an offsets array)
and the ids of a few pairs by position (two slices per pair), which flat arrays plus offsets give with no
decoding step; and raw little-endian arrays are simple enough to check (a size is ``count * itemsize``) and
to hash. Arrow's columnar files, record batches and schema would add a format to learn and nothing the
trainer reads.

Checking, and what it costs: :func:`open_token_store` always checks the manifest (format version, fields,
types) and that every array file exists with exactly the manifest's byte size, then the offsets' end points
(first 0, last equal to the ids' count) and, when the corpus view computes the lengths, that no length is
negative. That catches a truncated, extended or missing file at no cost beyond a ``stat`` per file. The
SHA-256 of every file is computed by the builder from the bytes it writes and recorded in the manifest; it is
re-checked only on request (``verify=True``, ``data.token_store_verify: true``), since hashing gigabytes at
every start would cost more than the start-up itself (about 1 GB/s per core). A flipped byte inside an array
of the right size is therefore found only by a verifying open.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from transformer.data.pipeline.file_digests import sha256_of_file

#: The ``format`` field of every manifest; a different value is not a token store.
STORE_FORMAT = "transformer-token-store"
#: Version of the layout above; a store of another version is rebuilt, never read.
STORE_VERSION = 1
MANIFEST_FILE = "manifest.json"
ARRAY_FILES = ("source_ids.bin", "target_ids.bin", "source_offsets.bin", "target_offsets.bin")
OFFSETS_DTYPE = np.dtype("<i8")
#: Largest vocabulary whose ids fit uint16.
UINT16_VOCABULARY = 1 << 16


class TokenStoreError(ValueError):
    """A token store is damaged or unreadable; the message names the file at fault in one line.

    Notes
    -----
    A ValueError, so the command line reports it as a one-line error. A store whose manifest is missing is
    not an error (it was never finished, and is rebuilt); a store whose manifest promises files that are
    not there, or not of the recorded size or checksum, is refused rather than silently rebuilt, since its
    damage says something about the disk that a user should see.
    """


def ids_dtype(vocab_size: int) -> np.dtype:
    """Choose the narrowest unsigned integer type that holds every id of a vocabulary.

    Parameters
    ----------
    vocab_size : int
        Number of pieces; ids run from 0 to ``vocab_size - 1``.

    Returns
    -------
    numpy.dtype
        Little-endian uint16 for at most 65,536 pieces, uint32 otherwise.

    Notes
    -----
    Explicitly little-endian, so a store is read the same on any machine.
    """
    if vocab_size <= 0:
        raise ValueError(f"ids_dtype: vocab_size={vocab_size} must be positive")
    return np.dtype("<u2") if vocab_size <= UINT16_VOCABULARY else np.dtype("<u4")


def describe_source_files(paths: list[Path]) -> list[dict[str, Any]]:
    """Identify the text files a store is encoded from, cheaply: resolved path, size, modification time.

    Parameters
    ----------
    paths : list of pathlib.Path
        The corpus files (source then target).

    Returns
    -------
    list of dict
        ``{"path", "bytes", "mtime_ns"}`` per file, in order.

    Notes
    -----
    A file replaced by another of the same size in the same nanosecond would go unnoticed; anything a
    user does (editing, downloading again, regenerating) changes the time. Hashing the text instead would
    read the whole corpus at every start: the builder records the files' SHA-256 too, but reads them again
    only when the times alone differ (a ``touch`` or a copy), to reuse the store rather than encode it again.
    """
    described = []
    for path in paths:
        status = Path(path).stat()
        described.append(
            {"path": str(Path(path).resolve()), "bytes": status.st_size, "mtime_ns": status.st_mtime_ns}
        )
    return described


def store_key(
    source_files: list[dict[str, Any]], tokenizer_fingerprint: str, max_len: int, eos_id: int
) -> dict[str, Any]:
    """Build the part of a manifest that decides whether a store can be reused for a request.

    Parameters
    ----------
    source_files : list of dict
        From :func:`describe_source_files`.
    tokenizer_fingerprint : str
        SHA-256 of the tokenizer model (``Tokenizer.fingerprint``).
    max_len : int
        The length filter.
    eos_id : int
        The id appended to each source.

    Returns
    -------
    dict
        Format, version and the four inputs, as JSON-ready values.

    Notes
    -----
    Two requests with equal keys would encode identical arrays, so a store whose manifest holds the same
    key is reused as it is.
    """
    return {
        "format": STORE_FORMAT,
        "version": STORE_VERSION,
        "source_files": source_files,
        "tokenizer_fingerprint": tokenizer_fingerprint,
        "max_len": max_len,
        "eos_id": eos_id,
    }


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """Read a store's manifest, or None when the store was never finished.

    Parameters
    ----------
    directory : pathlib.Path
        The store directory.

    Returns
    -------
    dict or None
        The manifest; None if the directory or its manifest is missing.

    Raises
    ------
    TokenStoreError
        Naming the manifest when it cannot be read or is not a JSON object of this format.

    Notes
    -----
    The builder writes the manifest last, so a missing one means an unfinished store (None), while an
    unreadable or foreign one is an error.
    """
    path = Path(directory) / MANIFEST_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise TokenStoreError(f"{path}: cannot read the token store manifest: {error.strerror}") from None
    try:
        manifest = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TokenStoreError(f"{path}: the token store manifest is not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != STORE_FORMAT:
        raise TokenStoreError(f"{path}: not a token store manifest (format is not {STORE_FORMAT!r})")
    return manifest


@dataclass(frozen=True, eq=False)
class TokenStore:
    """An opened token store: its manifest and its four arrays, memory-mapped read-only.

    Parameters
    ----------
    directory : pathlib.Path
        The store directory.
    manifest : dict
        Its parsed ``manifest.json``.
    source_ids, target_ids : numpy.ndarray, shape (num_tokens,), uint16 or uint32
        Concatenated ids (``numpy.memmap``); sources end with EOS, targets are bare.
    source_offsets, target_offsets : numpy.ndarray, shape (num_pairs + 1,), int64
        Where each pair starts and ends in the ids.

    Notes
    -----
    Build one with :func:`open_token_store`. Compared by identity (arrays have no single truth value).
    Nothing is read until it is sliced: the operating system pages the files in on demand and may drop
    them again, so a store larger than memory is fine.
    """

    directory: Path
    manifest: dict[str, Any]
    source_ids: np.ndarray
    target_ids: np.ndarray
    source_offsets: np.ndarray
    target_offsets: np.ndarray

    @property
    def num_pairs(self) -> int:
        """Number of sentence pairs in the store.

        Returns
        -------
        int
            ``len(source_offsets) - 1``.

        Notes
        -----
        Equals the manifest's ``pairs`` (checked on opening).
        """
        return len(self.source_offsets) - 1


def _check_array_file(directory: Path, name: str, entry: Any, verify: bool) -> None:
    """Refuse an array file that is missing or whose size (and, when verifying, hash) differs from the manifest."""
    path = directory / name
    if not isinstance(entry, dict) or not isinstance(entry.get("bytes"), int) or "sha256" not in entry:
        raise TokenStoreError(f"{directory / MANIFEST_FILE}: no size and checksum recorded for {name}")
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise TokenStoreError(f"{path}: array file of the token store is missing") from None
    if size != entry["bytes"]:
        raise TokenStoreError(
            f"{path}: {size} bytes but the manifest records {entry['bytes']} (truncated or damaged token store; "
            f"delete {directory} to rebuild it)"
        )
    if verify and sha256_of_file(path) != entry["sha256"]:
        raise TokenStoreError(
            f"{path}: SHA-256 differs from the manifest's (damaged token store; delete {directory} to rebuild it)"
        )


def _map(path: Path, dtype: np.dtype, count: int) -> np.ndarray:
    """Map ``count`` items of a file read-only; an empty file gives an empty array (mmap cannot map 0 bytes)."""
    if count == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


def open_token_store(directory: Path, verify: bool = False) -> TokenStore:
    """Open a finished store, checking its manifest and array sizes (and, on request, checksums).

    Parameters
    ----------
    directory : pathlib.Path
        The store directory.
    verify : bool
        Also hash every array file and compare with the manifest (reads every byte).

    Returns
    -------
    TokenStore
        The memory-mapped arrays.

    Raises
    ------
    TokenStoreError
        In one line naming the file at fault: a missing manifest or array, a size other than the manifest's,
        offsets that do not start at 0 or end at the ids' count, or (with ``verify``) a checksum mismatch.

    Notes
    -----
    Checksums are not checked by default: hashing gigabytes at every start would cost more than the start-up
    itself, while the size and offset checks cost a ``stat`` per file (see the module notes).
    """
    directory = Path(directory)
    manifest = read_manifest(directory)
    if manifest is None:
        raise TokenStoreError(f"{directory / MANIFEST_FILE}: missing; the token store was never finished")
    manifest_path = directory / MANIFEST_FILE
    if manifest.get("version") != STORE_VERSION:
        raise TokenStoreError(
            f"{manifest_path}: token store version {manifest.get('version')}, this code reads {STORE_VERSION}"
        )
    try:
        dtype = np.dtype(manifest["dtype"])
        num_pairs = int(manifest["pairs"])
        tokens = {side: int(manifest["tokens"][side]) for side in ("source", "target")}
        files = manifest["files"]
    except (KeyError, TypeError, ValueError) as error:
        raise TokenStoreError(f"{manifest_path}: incomplete token store manifest ({error})") from None
    if dtype not in (np.dtype("<u2"), np.dtype("<u4")):
        raise TokenStoreError(f"{manifest_path}: unsupported id type {manifest['dtype']!r}")
    for name in ARRAY_FILES:
        _check_array_file(directory, name, files.get(name) if isinstance(files, dict) else None, verify)
    arrays = {}
    for side in ("source", "target"):
        ids_path, offsets_path = directory / f"{side}_ids.bin", directory / f"{side}_offsets.bin"
        expected = {
            ids_path: tokens[side] * dtype.itemsize,
            offsets_path: (num_pairs + 1) * OFFSETS_DTYPE.itemsize,
        }
        for path, size in expected.items():
            if files[path.name]["bytes"] != size:
                raise TokenStoreError(
                    f"{path}: the manifest records {files[path.name]['bytes']} bytes but its counts imply {size}"
                )
        offsets = _map(offsets_path, OFFSETS_DTYPE, num_pairs + 1)
        if int(offsets[0]) != 0 or int(offsets[-1]) != tokens[side]:
            raise TokenStoreError(
                f"{offsets_path}: offsets run from {int(offsets[0])} to {int(offsets[-1])}, "
                f"expected 0 to {tokens[side]} (damaged token store; delete {directory} to rebuild it)"
            )
        arrays[f"{side}_ids"] = _map(ids_path, dtype, tokens[side])
        arrays[f"{side}_offsets"] = offsets
    return TokenStore(directory=directory, manifest=manifest, **arrays)
