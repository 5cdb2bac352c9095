"""Hash a file in chunks: the checksums of downloads and of the token store's files.

Downloads are checked against their publisher's SHA-256 or MD5 (:mod:`transformer.data.corpora.remote_files`);
the token store records the SHA-256 of its arrays and of the corpus files it was encoded from
(:mod:`transformer.data.pipeline.token_store`). Both read files of gigabytes, so the hash is fed a chunk at a
time.
"""

import hashlib
from pathlib import Path

_CHUNK_BYTES = 1 << 20


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    """Hash a file in chunks.

    Parameters
    ----------
    path : pathlib.Path
        The file.
    algorithm : str
        A :mod:`hashlib` algorithm name ("sha256", "md5").

    Returns
    -------
    str
        The digest as lowercase hex digits.

    Notes
    -----
    Reads 1 MiB at a time, so memory stays flat for corpora of gigabytes.
    """
    digest = hashlib.new(algorithm)
    with Path(path).open("rb") as file:
        while chunk := file.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_of_file(path: Path) -> str:
    """Hash a file with SHA-256, in chunks.

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
    return file_digest(path, "sha256")
