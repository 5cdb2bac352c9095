"""Known parallel corpora: where to download them, their checksums, and a verified local cache.

``fetch_corpus("multi30k", cache_dir)`` returns the (gzipped) files of each split, downloading
each one at most once. Every file is checked against its SHA-256 before it enters the cache, and
enters it atomically, so the cache never holds a partial or wrong file. ``mirror`` points at a
local copy (a directory or ``file://`` URL holding the same file names) for machines without
network access. ``local_directory_corpus`` finds the files of a corpus you already have.
"""

import hashlib
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from transformer.atomic_files import atomic_write
from transformer.data.dataset import CorpusError

DOWNLOAD_TIMEOUT_SECONDS = 60.0
_CHUNK_BYTES = 1 << 20


class ChecksumMismatchError(CorpusError):
    """A downloaded or copied file does not have the SHA-256 its corpus specification lists.

    Notes
    -----
    Raised inside the atomic write of the cache entry, so the wrong bytes are discarded and never
    cached. A wrong checksum means a corrupt transfer, a tampered mirror or a new upstream version;
    the message gives both hashes so the three can be told apart.
    """


@dataclass(frozen=True)
class RemoteFile:
    """One file of a corpus as its publisher distributes it.

    Parameters
    ----------
    url : str
        Where to download it.
    sha256 : str
        Hex SHA-256 of the file's bytes (64 lowercase hex digits).
    filename : str
        Its name in the cache directory and in a mirror.

    Notes
    -----
    Validated at construction: a path separator in ``filename`` or a malformed hash is an error.
    """

    url: str
    sha256: str
    filename: str

    def __post_init__(self) -> None:
        if len(self.sha256) != 64 or any(digit not in "0123456789abcdef" for digit in self.sha256):
            raise ValueError(
                f"RemoteFile {self.filename}: sha256={self.sha256!r} is not 64 lowercase hex digits"
            )
        if not self.filename or Path(self.filename).name != self.filename:
            raise ValueError(f"RemoteFile: filename={self.filename!r} must be a bare file name")


@dataclass(frozen=True)
class CorpusSpec:
    """A parallel corpus: its language pair and the source and target file of each split.

    Parameters
    ----------
    name : str
        Key in :data:`KNOWN_CORPORA` and directory name in the cache.
    source_lang, target_lang : str
        Language codes, e.g. "en" and "de".
    splits : dict[str, tuple[RemoteFile, RemoteFile]]
        (source file, target file) per split name ("train", "valid", ...).
    description : str
        What the corpus is, in one sentence.
    citation : str
        Who to cite when using it.

    Notes
    -----
    Splits are named "train" and "valid" whatever the publisher calls them.
    """

    name: str
    source_lang: str
    target_lang: str
    splits: dict[str, tuple[RemoteFile, RemoteFile]]
    description: str
    citation: str


def _multi30k_file(filename: str, sha256: str) -> RemoteFile:
    base_url = "https://github.com/multi30k/dataset/raw/master/data/task1/raw"
    return RemoteFile(url=f"{base_url}/{filename}", sha256=sha256, filename=filename)


# SHA-256 of the files as the multi30k/dataset repository distributes them: computed with sha256sum
# over local copies of those files (the project's shared data directory), not re-downloaded here.
MULTI30K = CorpusSpec(
    name="multi30k",
    source_lang="en",
    target_lang="de",
    splits={
        "train": (
            _multi30k_file("train.en.gz", "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f"),
            _multi30k_file("train.de.gz", "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6"),
        ),
        "valid": (
            _multi30k_file("val.en.gz", "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28"),
            _multi30k_file("val.de.gz", "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"),
        ),
    },
    description=(
        "Multi30k task 1: English image descriptions (Flickr30k) with professional German "
        "translations; 29,000 training and 1,014 validation pairs."
    ),
    citation=(
        "Elliott, Frank, Sima'an and Specia (2016). Multi30K: Multilingual English-German Image "
        "Descriptions. Proceedings of the 5th Workshop on Vision and Language."
    ),
)

KNOWN_CORPORA: dict[str, CorpusSpec] = {MULTI30K.name: MULTI30K}

Downloader = Callable[[str, IO[bytes]], None]
"""Writes the content at a URL (first argument) into a binary file open for writing (second argument)."""


def sha256_of_file(path: Path) -> str:
    """Hash a file in chunks.

    Parameters
    ----------
    path : pathlib.Path
        The file.

    Returns
    -------
    str
        Its SHA-256 as 64 lowercase hex digits.

    Notes
    -----
    Reads 1 MiB at a time, so memory stays flat for large corpora.
    """
    digest = hashlib.sha256()
    with Path(path).open("rb") as file:
        while chunk := file.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def download_url(url: str, destination: IO[bytes]) -> None:
    """Stream the content at a URL into an open binary file with ``urllib``, giving up after a timeout.

    Parameters
    ----------
    url : str
        http(s) or file URL; redirects are followed.
    destination : IO[bytes]
        A binary file open for writing; left open.

    Returns
    -------
    None

    Notes
    -----
    The default downloader of :func:`fetch_corpus`, which hands it the temporary file of
    :func:`transformer.atomic_files.atomic_write`: the bytes are copied 1 MiB at a time, never held
    whole in memory. Raises CorpusError naming the URL when the server cannot be reached, answers
    with an error, or stalls for ``DOWNLOAD_TIMEOUT_SECONDS``; the caller then discards the partial
    file.
    """
    request = urllib.request.Request(url, headers={"User-Agent": "transformer-reference/0.1"})
    try:
        with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:
            shutil.copyfileobj(response, destination, _CHUNK_BYTES)
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        reason = getattr(error, "reason", error)
        raise CorpusError(f"cannot download {url}: {reason}") from None


def _retrieve(remote: RemoteFile, mirror: str | None, downloader: Downloader, destination: IO[bytes]) -> str:
    """Write one corpus file into ``destination`` from its URL or from a mirror.

    Parameters
    ----------
    remote : RemoteFile
        The file.
    mirror : str or None
        A directory, ``file://`` URL or http(s) URL holding ``remote.filename``; None for ``remote.url``.
    downloader : Downloader
        Fetches URLs.
    destination : IO[bytes]
        The open binary file to write the bytes into.

    Returns
    -------
    str
        Where the bytes came from, for error messages.

    Notes
    -----
    Raises CorpusError when a local mirror lacks the file.
    """
    if mirror is None:
        downloader(remote.url, destination)
        return remote.url
    if mirror.startswith(("http://", "https://")):
        url = f"{mirror.rstrip('/')}/{remote.filename}"
        downloader(url, destination)
        return url
    if mirror.startswith("file://"):
        mirror = urllib.request.url2pathname(urllib.parse.urlparse(mirror).path)
    source = Path(mirror).expanduser() / remote.filename
    if not source.is_file():
        raise CorpusError(f"mirror {mirror} has no file {remote.filename}")
    with source.open("rb") as file:
        shutil.copyfileobj(file, destination, _CHUNK_BYTES)
    return str(source)


def _fetch_file(remote: RemoteFile, corpus_dir: Path, mirror: str | None, downloader: Downloader) -> Path:
    """Return the cached copy of one file, fetching and verifying it first if needed.

    Parameters
    ----------
    remote : RemoteFile
        The file and its checksum.
    corpus_dir : pathlib.Path
        The corpus's cache directory (exists).
    mirror : str or None
        As for :func:`fetch_corpus`.
    downloader : Downloader
        As for :func:`fetch_corpus`.

    Returns
    -------
    pathlib.Path
        ``corpus_dir / remote.filename``, with the expected checksum.

    Notes
    -----
    The bytes stream into the temporary file of :func:`transformer.atomic_files.atomic_write`, and
    the checksum is verified inside its block, on the bytes as written: a mismatch raises there, so
    the temporary file is removed and the cache entry (a stale or partial file included) is left as
    it was; only a verified file is renamed into place, with the mode a plain ``open`` gives (0644
    under umask 022; ``mkstemp``'s 0600 would hide a shared cache from other users).
    """
    cached = corpus_dir / remote.filename
    if cached.is_file() and sha256_of_file(cached) == remote.sha256:
        return cached
    with atomic_write(cached, "wb") as handle:
        origin = _retrieve(remote, mirror, downloader, handle)
        handle.flush()
        actual = sha256_of_file(Path(handle.name))
        if actual != remote.sha256:
            raise ChecksumMismatchError(
                f"{remote.filename} from {origin} has sha256 {actual}, expected {remote.sha256}; "
                "the file is corrupt or a different version, so it was not cached"
            )
    return cached


def fetch_corpus(
    name: str, cache_dir: Path, *, mirror: str | None = None, downloader: Downloader | None = None
) -> dict[str, tuple[Path, Path]]:
    """Return the verified local files of a known corpus, downloading only what the cache lacks.

    Parameters
    ----------
    name : str
        A key of :data:`KNOWN_CORPORA`, e.g. "multi30k".
    cache_dir : pathlib.Path
        Cache root; files live in ``cache_dir / name`` (created if missing).
    mirror : str or None
        A local directory or ``file://`` URL (copied from) or an http(s) URL (downloaded from)
        that holds the corpus files under their usual names; None downloads from the publisher.
    downloader : Downloader or None
        Replaces :func:`download_url`, e.g. in tests; it receives the URL and a binary file open for
        writing, which it must write the bytes into and leave open.

    Returns
    -------
    dict[str, tuple[pathlib.Path, pathlib.Path]]
        (source file, target file) per split, as distributed (gzipped for Multi30k; the readers
        in :mod:`transformer.data.dataset` decompress transparently).

    Notes
    -----
    A cached file with the right SHA-256 is used as is (no network access). A fetched file whose
    SHA-256 differs raises ChecksumMismatchError naming the file and both hashes, and nothing is
    written to the cache. Raises ValueError listing the known names for an unknown corpus.
    """
    if name not in KNOWN_CORPORA:
        raise ValueError(f"unknown corpus {name!r}; known corpora: {', '.join(sorted(KNOWN_CORPORA))}")
    corpus_dir = Path(cache_dir).expanduser() / name
    corpus_dir.mkdir(parents=True, exist_ok=True)
    fetch = downloader if downloader is not None else download_url
    return {
        split: (
            _fetch_file(source_file, corpus_dir, mirror, fetch),
            _fetch_file(target_file, corpus_dir, mirror, fetch),
        )
        for split, (source_file, target_file) in KNOWN_CORPORA[name].splits.items()
    }


# File-name prefixes accepted for each split, in order of preference.
SPLIT_FILE_PREFIXES = {"train": ("train",), "valid": ("valid", "val", "dev"), "test": ("test",)}


def _find_split_file(data_dir: Path, prefix: str, lang: str) -> Path | None:
    # A plain file wins over its gzipped twin, which is what `gunzip --keep` leaves behind.
    for candidate in (data_dir / f"{prefix}.{lang}", data_dir / f"{prefix}.{lang}.gz"):
        if candidate.is_file():
            return candidate
    return None


def local_directory_corpus(
    data_dir: Path, source_lang: str, target_lang: str
) -> dict[str, tuple[Path, Path]]:
    """Find the split files of a parallel corpus in a directory.

    Parameters
    ----------
    data_dir : pathlib.Path
        Directory with files named ``{split}.{lang}`` or ``{split}.{lang}.gz``.
    source_lang, target_lang : str
        Language codes used as file suffixes, e.g. "en" and "de".

    Returns
    -------
    dict[str, tuple[pathlib.Path, pathlib.Path]]
        (source file, target file) for "train" and for "valid" and "test" when present.

    Notes
    -----
    The validation split may be named ``valid``, ``val`` or ``dev`` (first found wins). Raises
    CorpusError when the directory or the training files are missing, or when a split has a file
    for one language only.
    """
    data_dir = Path(data_dir).expanduser()
    if not data_dir.is_dir():
        raise CorpusError(f"data directory {data_dir} does not exist")
    splits: dict[str, tuple[Path, Path]] = {}
    for split, prefixes in SPLIT_FILE_PREFIXES.items():
        for prefix in prefixes:
            source = _find_split_file(data_dir, prefix, source_lang)
            target = _find_split_file(data_dir, prefix, target_lang)
            if source is None and target is None:
                continue
            if source is None or target is None:
                present, missing_lang = (source or target), (source_lang if source is None else target_lang)
                raise CorpusError(f"{data_dir}: found {present} but no {prefix}.{missing_lang}[.gz]")
            splits[split] = (source, target)
            break
    if "train" not in splits:
        raise CorpusError(
            f"{data_dir} has no training files train.{source_lang}[.gz] and train.{target_lang}[.gz]"
        )
    return splits
