"""Encode a parallel corpus into a token store, streaming and crash-safe, or reuse the store already there.

The builder reads the two text files a chunk of pairs at a time, encodes each chunk with SentencePiece's own
threads (one call per side, ``num_threads`` workers inside the C++ library), applies the same emptiness and
length filter as :func:`transformer.data.pipeline.dataset.encode_corpus`, and appends the kept ids and their offsets
to four files, hashing the bytes as they are written. Memory holds one chunk of text and ids, whatever the
corpus size.

Crash safety: everything is written into a hidden temporary sibling of the store directory
(:func:`transformer.atomic_files.staged_directory`); the manifest is written last, and the directory is
renamed into place only after every file is flushed. A prepare killed at any instant therefore leaves either
no store or the previous complete one, never a store that looks finished; the next prepare removes the
killed one's temporary directory and starts again from the first line (a restart, not a resume: encoding is
the cheap part of a run, and a restart needs no record of how far the dead process got).
"""

import hashlib
import itertools
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from transformer.atomic_files import staged_directory, write_json_atomically
from transformer.data.pipeline.dataset import FilterReport
from transformer.data.pipeline.file_digests import sha256_of_file
from transformer.data.pipeline.special_tokens import EOS_ID
from transformer.data.pipeline.text_files import iter_parallel_lines
from transformer.data.pipeline.token_store import (
    MANIFEST_FILE,
    OFFSETS_DTYPE,
    TokenStore,
    describe_source_files,
    ids_dtype,
    open_token_store,
    read_manifest,
    store_key,
)
from transformer.data.pipeline.tokenizer import Tokenizer

#: Pairs encoded per call into SentencePiece: large enough to keep its threads busy, small enough that the
#: chunk's Python lists (about 1 KB per pair) stay a few tens of MB.
CHUNK_PAIRS = 20_000


def encoding_threads() -> int:
    """Count the threads to give SentencePiece: the CPUs this process may run on.

    Returns
    -------
    int
        The size of the affinity mask (``os.cpu_count()`` where there is none), at least 1.

    Notes
    -----
    The affinity mask is what a container or ``taskset`` grants; ``os.cpu_count`` counts the host's cores.
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class _HashingWriter:
    """Append numpy arrays to a file as raw little-endian bytes, hashing and counting them on the way."""

    def __init__(self, path: Path, dtype: np.dtype) -> None:
        self.path = path
        self.dtype = dtype
        self.count = 0
        self._digest = hashlib.sha256()
        self._handle: IO[bytes] = path.open("xb")

    def append(self, values: np.ndarray) -> None:
        data = np.ascontiguousarray(values, dtype=self.dtype).tobytes()
        self._handle.write(data)
        self._digest.update(data)
        self.count += len(values)

    def close(self) -> dict[str, Any]:
        self._handle.close()
        return {"bytes": self.count * self.dtype.itemsize, "sha256": self._digest.hexdigest()}


def _chunks(pairs: Iterable[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    """Cut a stream of pairs into lists of at most ``size``."""
    iterator = iter(pairs)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _flatten(sequences: list[list[int]], lengths: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Concatenate id lists into one array of ``dtype`` (``lengths`` are theirs, for the count)."""
    return np.fromiter(itertools.chain.from_iterable(sequences), dtype=dtype, count=int(lengths.sum()))


@dataclass(frozen=True)
class _Encoding:
    """How a build encodes: the tokenizer, the length filter, the ids' dtype, the EOS id and the threads."""

    tokenizer: Tokenizer
    max_len: int
    dtype: np.dtype
    eos_id: int
    threads: int


@dataclass
class _BuildCounts:
    """Pairs read, kept and dropped (empty, too long) so far in a build."""

    pairs_read: int = 0
    kept: int = 0
    dropped_empty: int = 0
    dropped_too_long: int = 0


@dataclass(frozen=True)
class _FilteredChunk:
    """One chunk's encoded pairs that pass the filter, their lengths, and how many of the chunk were dropped."""

    sources: list[list[int]]
    targets: list[list[int]]
    source_lengths: np.ndarray
    target_lengths: np.ndarray
    dropped_empty: int
    dropped_too_long: int


def _open_writers(staging: Path, dtype: np.dtype) -> dict[str, _HashingWriter]:
    """Create the store's four array files in ``staging``: the ids of each side and their offsets."""
    return {
        "source_ids": _HashingWriter(staging / "source_ids.bin", dtype),
        "target_ids": _HashingWriter(staging / "target_ids.bin", dtype),
        "source_offsets": _HashingWriter(staging / "source_offsets.bin", OFFSETS_DTYPE),
        "target_offsets": _HashingWriter(staging / "target_offsets.bin", OFFSETS_DTYPE),
    }


def _write_pairs(
    writers: dict[str, _HashingWriter],
    pairs: Iterable[tuple[str, str]],
    encoding: _Encoding,
    chunk_pairs: int,
    progress: Callable[[int], None] | None,
) -> _BuildCounts:
    """Encode, filter and append every pair, a chunk at a time, after each side's leading zero offset."""
    zero = np.zeros(1, dtype=np.int64)
    writers["source_offsets"].append(zero)
    writers["target_offsets"].append(zero)
    counts = _BuildCounts()
    for chunk in _chunks(pairs, chunk_pairs):
        filtered = _encode_and_filter(chunk, encoding)
        _append_chunk(writers, filtered, encoding)
        counts.kept += len(filtered.sources)
        counts.dropped_empty += filtered.dropped_empty
        counts.dropped_too_long += filtered.dropped_too_long
        counts.pairs_read += len(chunk)
        if progress is not None:
            progress(counts.pairs_read)
    return counts


def _encode_and_filter(chunk: list[tuple[str, str]], encoding: _Encoding) -> _FilteredChunk:
    """Encode a chunk's two sides and keep the pairs with both sides non-empty and within ``max_len``."""
    sources = encoding.tokenizer.encode_batch([source for source, _ in chunk], num_threads=encoding.threads)
    targets = encoding.tokenizer.encode_batch([target for _, target in chunk], num_threads=encoding.threads)
    source_lengths = np.fromiter(map(len, sources), dtype=np.int64, count=len(sources))
    target_lengths = np.fromiter(map(len, targets), dtype=np.int64, count=len(targets))
    max_len = encoding.max_len
    empty = (source_lengths == 0) | (target_lengths == 0)
    too_long = ~empty & ((source_lengths + 1 > max_len) | (target_lengths + 1 > max_len))
    keep = ~(empty | too_long)
    kept_rows = np.flatnonzero(keep)
    return _FilteredChunk(
        sources=[sources[row] for row in kept_rows],
        targets=[targets[row] for row in kept_rows],
        source_lengths=source_lengths[keep],
        target_lengths=target_lengths[keep],
        dropped_empty=int(empty.sum()),
        dropped_too_long=int(too_long.sum()),
    )


def _append_chunk(writers: dict[str, _HashingWriter], chunk: _FilteredChunk, encoding: _Encoding) -> None:
    """Append a filtered chunk's offsets and ids (an EOS after each source) to the store's files."""
    writers["source_offsets"].append(
        writers["source_ids"].count + np.cumsum(chunk.source_lengths + 1)  # + 1: the EOS
    )
    writers["target_offsets"].append(writers["target_ids"].count + np.cumsum(chunk.target_lengths))
    source_flat = _flatten(chunk.sources, chunk.source_lengths, encoding.dtype)
    # Each source gets its EOS: insert it after every sentence's last id.
    writers["source_ids"].append(np.insert(source_flat, np.cumsum(chunk.source_lengths), encoding.eos_id))
    writers["target_ids"].append(_flatten(chunk.targets, chunk.target_lengths, encoding.dtype))


def _store_manifest(
    key: dict[str, Any],
    encoding: _Encoding,
    counts: _BuildCounts,
    writers: dict[str, _HashingWriter],
    files: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Describe a finished build: the key, the ids' format, the counts and each file's size and hash."""
    return {
        **key,
        "dtype": encoding.dtype.str,
        "vocab_size": encoding.tokenizer.vocab_size,
        "pairs": counts.kept,
        "input_pairs": counts.pairs_read,
        "dropped": {"empty": counts.dropped_empty, "too_long": counts.dropped_too_long},
        "tokens": {"source": writers["source_ids"].count, "target": writers["target_ids"].count},
        "files": files,
    }


def build_token_store(
    directory: Path,
    pairs: Iterable[tuple[str, str]],
    tokenizer: Tokenizer,
    max_len: int,
    key: dict[str, Any],
    *,
    chunk_pairs: int = CHUNK_PAIRS,
    num_threads: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> TokenStore:
    """Encode sentence pairs into a new token store at ``directory``, replacing any store there.

    Parameters
    ----------
    directory : pathlib.Path
        The store directory; written as a hidden sibling and renamed into place when complete.
    pairs : Iterable[tuple[str, str]]
        (source, target) sentences, consumed once as a stream (e.g. :func:`iter_parallel_lines`).
    tokenizer : Tokenizer
        The joint vocabulary; its size picks uint16 or uint32 ids.
    max_len : int
        Longest sequence kept, EOS included, as in :func:`transformer.data.pipeline.dataset.encode_corpus`.
    key : dict
        What the store is encoded from (:func:`transformer.data.pipeline.token_store.store_key`, plus the files'
        ``source_sha256`` when :func:`prepare_token_store` builds), copied into the manifest.
    chunk_pairs : int
        Pairs read and encoded per step.
    num_threads : int or None
        SentencePiece's encoding threads; None for :func:`encoding_threads`.
    progress : callable or None
        Called with the number of pairs read so far after each chunk is written.

    Returns
    -------
    TokenStore
        The new store, opened.

    Raises
    ------
    ValueError
        When no pair survives the filter.

    Notes
    -----
    The kept pairs, their ids and the filter's counts equal ``encode_corpus`` on the same pairs (tested), so a
    store-backed corpus batches exactly like the in-memory one. When no pair survives the filter,
    ``directory`` is left as it was; any exception (a corpus error, a full disk, Ctrl-C) likewise removes the
    temporary directory.
    """
    if max_len < 2:
        raise ValueError(f"build_token_store: max_len={max_len} must be at least 2 (one token plus EOS)")
    if chunk_pairs <= 0:
        raise ValueError(f"build_token_store: chunk_pairs={chunk_pairs} must be positive")
    encoding = _Encoding(
        tokenizer=tokenizer,
        max_len=max_len,
        dtype=ids_dtype(tokenizer.vocab_size),
        eos_id=int(key.get("eos_id", EOS_ID)),
        threads=num_threads or encoding_threads(),
    )
    directory = Path(directory)
    with staged_directory(directory) as staging:
        writers = _open_writers(staging, encoding.dtype)
        try:
            counts = _write_pairs(writers, pairs, encoding, chunk_pairs, progress)
        finally:
            files = {writer.path.name: writer.close() for writer in writers.values()}
        report = FilterReport(counts.kept, counts.dropped_empty, counts.dropped_too_long, max_len)
        if counts.kept == 0:
            raise ValueError(f"build_token_store: no sentence pair is left: {report.describe()}")
        manifest = _store_manifest(key, encoding, counts, writers, files)
        write_json_atomically(staging / MANIFEST_FILE, manifest)  # last: its presence marks the store done
    return open_token_store(directory)


def _remove_abandoned_staging(directory: Path) -> None:
    """Delete the hidden temporary directories that killed builds of ``directory`` left behind."""
    for leftover in directory.parent.glob(f".{directory.name}.tmp-*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)


def _same_request(manifest: dict[str, Any], key: dict[str, Any]) -> bool:
    """Whether a manifest was encoded from exactly what ``key`` asks for."""
    return all(manifest.get(name) == value for name, value in key.items())


def _differs_only_in_times(manifest: dict[str, Any], key: dict[str, Any]) -> bool:
    """Whether a manifest matches ``key`` except for the corpus files' modification times."""
    recorded = manifest.get("source_files")
    requested = key["source_files"]
    if not isinstance(recorded, list) or len(recorded) != len(requested):
        return False
    same_files = all(
        isinstance(old, dict) and (old.get("path"), old.get("bytes")) == (new["path"], new["bytes"])
        for old, new in zip(recorded, requested, strict=True)
    )
    others = {name: value for name, value in key.items() if name != "source_files"}
    return same_files and _same_request(manifest, others)


def _reuse_after_touch(
    directory: Path, manifest: dict[str, Any], key: dict[str, Any], files: tuple[Path, Path]
) -> bool:
    """Adopt a store whose corpus files were only touched (same SHA-256), recording their new times.

    Parameters
    ----------
    directory : pathlib.Path
        The store directory.
    manifest : dict
        Its manifest, which differs from ``key`` only in the files' modification times.
    key : dict
        The request (:func:`store_key`), with the files' current times.
    files : (pathlib.Path, pathlib.Path)
        The corpus files.

    Returns
    -------
    bool
        True when the files' SHA-256 equal the ones the store was encoded from; the manifest then records
        the new times (rewritten atomically), so the next start compares times alone again.

    Notes
    -----
    A copy without ``-p``, a ``touch``, a checkout or a regeneration of identical text changes the times
    but not the corpus; without this, reuse keyed on times would encode the corpus again (26 minutes for
    36 million pairs, 9.25 GiB of text, on two cores: BENCHMARKS.md section 6). Hashing reads the files
    once (about 6 s for those 9.25 GiB at the 1.8 GB/s measured on a 2-core AMD EPYC without AMX). Stores
    written before the hashes were recorded (no ``source_sha256``) are rebuilt as before.
    """
    recorded = manifest.get("source_sha256")
    if not isinstance(recorded, list) or recorded != [sha256_of_file(Path(path)) for path in files]:
        return False
    write_json_atomically(directory / MANIFEST_FILE, {**manifest, "source_files": key["source_files"]})
    return True


def _reuse_store(
    directory: Path,
    manifest: dict[str, Any],
    key: dict[str, Any],
    files: tuple[Path, Path],
    *,
    verify: bool,
    tell: Callable[[str], None],
) -> TokenStore | None:
    """Open the store at ``directory`` if its manifest matches ``key``, or differs only in the files' times.

    Returns None when the store must be rebuilt; a store whose corpus files were only touched (same SHA-256)
    is adopted by :func:`_reuse_after_touch`, which records the new times.
    """
    checked = "sizes and SHA-256 checked" if verify else "sizes checked"
    if _same_request(manifest, key):
        store = open_token_store(directory, verify=verify)
        tell(f"token store: reusing {directory} ({store.num_pairs} pairs, {checked})")
        return store
    if _differs_only_in_times(manifest, key) and _reuse_after_touch(directory, manifest, key, files):
        store = open_token_store(directory, verify=verify)
        tell(
            f"token store: reusing {directory} ({store.num_pairs} pairs, {checked}; the corpus files' "
            "modification times changed, their SHA-256 did not)"
        )
        return store
    return None


def _rebuild_reason(manifest: dict[str, Any] | None, key: dict[str, Any]) -> str:
    """Say why the store is encoded (again): there is none, or what changed since its manifest was written."""
    if manifest is None:
        return "none yet"
    touched = _differs_only_in_times(manifest, key)
    if touched and "source_sha256" not in manifest:
        return "the corpus files' modification times changed and the store records no SHA-256 to compare"
    if touched:
        return "the corpus files' contents changed"
    return "the corpus files, tokenizer or max_len changed"


def prepare_token_store(
    directory: Path,
    files: tuple[Path, Path],
    tokenizer: Tokenizer,
    max_len: int,
    *,
    verify: bool = False,
    chunk_pairs: int = CHUNK_PAIRS,
    num_threads: int | None = None,
    message: Callable[[str], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> TokenStore:
    """Reuse the token store at ``directory`` if it was encoded from these files and tokenizer, else build it.

    Parameters
    ----------
    directory : pathlib.Path
        Where the store lives (``run_dir/token_store/train`` for training).
    files : (pathlib.Path, pathlib.Path)
        The line-aligned source and target text files.
    tokenizer : Tokenizer
        The joint vocabulary; its fingerprint is part of the reuse key.
    max_len : int
        The length filter; part of the reuse key.
    verify : bool
        When reusing, also check every array file's SHA-256 against the manifest.
    chunk_pairs : int
        Pairs encoded per step when building.
    num_threads : int or None
        SentencePiece's encoding threads when building; None for all usable CPUs.
    message : callable or None
        Receives one-line notes (reused or built, counts, time).
    progress : callable or None
        Passed to :func:`build_token_store`.

    Returns
    -------
    TokenStore
        The opened store.

    Notes
    -----
    Reuse needs an equal key (:func:`transformer.data.pipeline.token_store.store_key`): the same files by resolved
    path, size and modification time, the same tokenizer fingerprint, ``max_len`` and format version; where
    only the files' times differ, their SHA-256 (recorded at the build, one extra read of the files) decide,
    so a corpus touched or replaced by an identical copy is not encoded again. A store with another key is
    replaced (safely: the old one stays until the new one is complete). A store whose key matches but whose
    files are damaged is refused with :class:`~transformer.data.pipeline.token_store.TokenStoreError` naming the
    file; it is not rebuilt silently.
    A directory without a manifest is an unfinished store and is rebuilt. One builder at a time per
    directory is assumed (the run lock gives that); the temporary directories of killed builds are removed
    before a new build.
    """
    tell = message or (lambda text: None)
    directory = Path(directory)
    key = store_key(describe_source_files(list(files)), tokenizer.fingerprint, max_len, EOS_ID)
    manifest = read_manifest(directory)
    if manifest is not None:
        store = _reuse_store(directory, manifest, key, files, verify=verify, tell=tell)
        if store is not None:
            return store
    tell(
        f"token store: encoding {files[0]} and {files[1]} into {directory} ({_rebuild_reason(manifest, key)})"
    )
    _remove_abandoned_staging(directory)
    source_hashes = [sha256_of_file(Path(path)) for path in files]  # lets a touched corpus be recognised
    return build_token_store(
        directory,
        iter_parallel_lines(*files),
        tokenizer,
        max_len,
        {**key, "source_sha256": source_hashes},
        chunk_pairs=chunk_pairs,
        num_threads=num_threads,
        progress=progress,
    )
