"""Write a file so that no reader ever sees it half-written: a temporary sibling, flushed, then renamed."""

import os
import tempfile
from pathlib import Path


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step.

    Parameters
    ----------
    path : pathlib.Path
        Destination; its parent directory is created if missing.
    data : bytes
        The complete file content.

    Returns
    -------
    None

    Notes
    -----
    The temporary file lives in the destination's directory, so ``os.replace`` stays on one file system,
    where it is atomic (POSIX and Windows). It is fsynced first: after a crash the file holds either the old
    content or the new, never a prefix. On any failure the temporary file is removed and ``path`` is left
    as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as temporary_file:
            temporary_file.write(data)
            temporary_file.flush()
            os.fsync(temporary_file.fileno())
        os.replace(temporary_name, path)
    except BaseException:
        Path(temporary_name).unlink(missing_ok=True)
        raise


def write_text_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` in one step.

    Parameters
    ----------
    path : pathlib.Path
        Destination; its parent directory is created if missing.
    text : str
        The complete file content.

    Returns
    -------
    None

    Notes
    -----
    See :func:`write_bytes_atomically`.
    """
    write_bytes_atomically(path, text.encode("utf-8"))
