"""One published file: where to download it, its checksum, and a verified copy in a local cache.

A :class:`RemoteFile` names a file as its publisher distributes it (URL, file name, SHA-256 or MD5, size).
:func:`fetch_remote_file` returns a cached copy whose checksum has been verified, taking the bytes from the
URL, from a local mirror, or from a caller's downloader; a file enters the cache atomically, so the cache never
holds a partial or wrong file. :mod:`transformer.data.corpora.known_corpora` builds corpora out of these files.
"""

import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from transformer.atomic_files import atomic_write
from transformer.data.pipeline.file_digests import file_digest
from transformer.data.pipeline.text_files import CorpusError

DOWNLOAD_TIMEOUT_SECONDS = 60.0
_CHUNK_BYTES = 1 << 20
_HEX_DIGITS = frozenset("0123456789abcdef")

Downloader = Callable[[str, IO[bytes]], None]
"""Writes the content at a URL (first argument) into a binary file open for writing (second argument)."""


class ChecksumMismatchError(CorpusError):
    """A downloaded or copied file does not have the checksum (or size) its specification lists.

    Notes
    -----
    Raised inside the atomic write of the cache entry, so the wrong bytes are discarded and never
    cached. A wrong checksum means a corrupt transfer, a tampered mirror or a new upstream version;
    the message gives both hashes so the three can be told apart.
    """


def _is_hex(text: str, length: int) -> bool:
    return len(text) == length and all(digit in _HEX_DIGITS for digit in text)


@dataclass(frozen=True)
class RemoteFile:
    """One file as its publisher distributes it.

    Parameters
    ----------
    url : str
        Where to download it.
    sha256 : str or None
        Hex SHA-256 of the file's bytes (64 lowercase hex digits); None when only an MD5 was published.
    filename : str
        Its name in the cache directory and in a mirror.
    md5 : str or None
        Hex MD5 (32 lowercase hex digits), for files whose only published checksum is an MD5 (the WMT test
        sets, as sacreBLEU lists them). Checked only when ``sha256`` is None.
    size : int or None
        Size in bytes when published; a copy of another size is refused before it is hashed.

    Notes
    -----
    Validated at construction: a path separator in ``filename``, a malformed hash, no checksum at all, or a
    size below 1 is an error. SHA-256 is preferred: an MD5 guards against corrupt transfers and stale
    mirrors, not against a deliberately forged file.
    """

    url: str
    sha256: str | None
    filename: str
    md5: str | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        if self.sha256 is not None and not _is_hex(self.sha256, 64):
            raise ValueError(
                f"RemoteFile {self.filename}: sha256={self.sha256!r} is not 64 lowercase hex digits"
            )
        if self.md5 is not None and not _is_hex(self.md5, 32):
            raise ValueError(f"RemoteFile {self.filename}: md5={self.md5!r} is not 32 lowercase hex digits")
        if self.sha256 is None and self.md5 is None:
            raise ValueError(f"RemoteFile {self.filename}: give sha256 or md5")
        if self.size is not None and self.size < 1:
            raise ValueError(f"RemoteFile {self.filename}: size={self.size} must be positive")
        if not self.filename or Path(self.filename).name != self.filename:
            raise ValueError(f"RemoteFile: filename={self.filename!r} must be a bare file name")

    @property
    def checksum(self) -> tuple[str, str]:
        """The checksum this file is verified with.

        Returns
        -------
        tuple of (str, str)
            (algorithm, hex digest): ("sha256", ...) when a SHA-256 is known, else ("md5", ...).

        Notes
        -----
        One checksum is checked, the stronger one available; both hash the whole file.
        """
        if self.sha256 is not None:
            return "sha256", self.sha256
        assert self.md5 is not None  # checked in __post_init__
        return "md5", self.md5


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

    Raises
    ------
    CorpusError
        Naming the URL when the server cannot be reached, answers with an error, or stalls for
        ``DOWNLOAD_TIMEOUT_SECONDS``.

    Notes
    -----
    The default downloader of :func:`fetch_remote_file`, which hands it the temporary file of
    :func:`transformer.atomic_files.atomic_write`: the bytes are copied 1 MiB at a time, never held whole in
    memory. After an error the caller discards the partial file.
    """
    request = urllib.request.Request(url, headers={"User-Agent": "transformer-reference/0.1"})
    try:
        with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:
            shutil.copyfileobj(response, destination, _CHUNK_BYTES)
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        reason = getattr(error, "reason", error)
        raise CorpusError(f"cannot download {url}: {reason}") from None


def _retrieve(remote: RemoteFile, mirror: str | None, downloader: Downloader, destination: IO[bytes]) -> str:
    """Write one file into ``destination`` from its URL or from a mirror.

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


def _is_verified(path: Path, remote: RemoteFile) -> bool:
    if not path.is_file():
        return False
    if remote.size is not None and path.stat().st_size != remote.size:
        return False
    algorithm, expected = remote.checksum
    return file_digest(path, algorithm) == expected


def fetch_remote_file(
    remote: RemoteFile, directory: Path, mirror: str | None = None, downloader: Downloader | None = None
) -> Path:
    """Return the cached copy of one file, fetching and verifying it first if needed.

    Parameters
    ----------
    remote : RemoteFile
        The file and its checksum.
    directory : pathlib.Path
        The cache directory (created if missing).
    mirror : str or None
        A local directory or ``file://`` URL (copied from) or an http(s) URL (downloaded from) that holds
        the file under ``remote.filename``; None downloads ``remote.url``.
    downloader : Downloader or None
        Replaces :func:`download_url`, e.g. in tests.

    Returns
    -------
    pathlib.Path
        ``directory / remote.filename``, with the expected size and checksum.

    Raises
    ------
    ChecksumMismatchError
        When the size or checksum of the fetched bytes differs from the expected one.

    Notes
    -----
    A cached file with the right checksum is used as is (no network access). Otherwise the bytes stream into
    the temporary file of :func:`transformer.atomic_files.atomic_write`, and the size and checksum are
    verified inside its block, on the bytes as written: a mismatch fails there, so the temporary file is
    removed and the cache entry (a stale or partial file included) is left as it was; only a verified file is
    renamed into place, with the mode a plain ``open`` gives (0644 under umask 022; ``mkstemp``'s 0600 would
    hide a shared cache from other users).
    """
    directory = Path(directory).expanduser()
    cached = directory / remote.filename
    if _is_verified(cached, remote):
        return cached
    fetch = downloader if downloader is not None else download_url
    with atomic_write(cached, "wb") as handle:
        origin = _retrieve(remote, mirror, fetch, handle)
        handle.flush()
        written = Path(handle.name)
        if remote.size is not None and written.stat().st_size != remote.size:
            raise ChecksumMismatchError(
                f"{remote.filename} from {origin} has {written.stat().st_size:,} bytes, expected "
                f"{remote.size:,}; the transfer is incomplete or the file a different version, so it was not cached"
            )
        algorithm, expected = remote.checksum
        actual = file_digest(written, algorithm)
        if actual != expected:
            raise ChecksumMismatchError(
                f"{remote.filename} from {origin} has {algorithm} {actual}, expected {expected}; "
                "the file is corrupt or a different version, so it was not cached"
            )
    return cached
