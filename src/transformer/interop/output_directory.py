"""Write a converted model into a directory all at once, without clobbering unrelated files."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from transformer import atomic_files


def check_replaceable(destination: Path, marker: str) -> None:
    """Refuse to replace a directory that holds something other than an earlier conversion.

    Parameters
    ----------
    destination : Path
        Where the converted model will go.
    marker : str
        A file every conversion of this kind writes (e.g. ``config.json``).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the directory when it holds anything else.

    Notes
    -----
    A missing or empty directory is fine; so is one holding ``marker`` (it is replaced as a whole). Anything
    else is refused, so a mistyped path cannot delete unrelated files.
    """
    destination = Path(destination)
    if destination.is_file():
        raise ValueError(f"{destination}: is a file; the output must be a directory")
    if destination.is_dir() and any(destination.iterdir()) and not (destination / marker).exists():
        raise ValueError(
            f"{destination}: exists and does not hold a converted model ({marker}); choose a new directory"
        )


@contextmanager
def staged_directory(destination: Path, marker: str) -> Iterator[Path]:
    """Give a hidden temporary directory to fill, then move it to ``destination``.

    Parameters
    ----------
    destination : Path
        The final directory; replaced if it holds an earlier conversion (see :func:`check_replaceable`).
    marker : str
        A file the conversion writes.

    Returns
    -------
    Iterator[Path]
        A context manager yielding the temporary sibling directory.

    Notes
    -----
    On an exception the temporary directory is removed and ``destination`` is left as it was; readers see
    either the old directory or the complete new one.
    """
    destination = Path(destination)
    check_replaceable(destination, marker)
    with atomic_files.staged_directory(destination) as temporary:
        yield temporary
