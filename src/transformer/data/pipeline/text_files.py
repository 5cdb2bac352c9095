"""Read corpus text: UTF-8 files, plain or gzipped, line by line, and two line-aligned files as sentence pairs.

Corpora come as two line-aligned files (``train.en``/``train.de``, gzipped or not). Every problem
is reported with the file and line at fault: misaligned line counts, bytes that are not UTF-8, a
truncated gzip stream, an empty file.
"""

import gzip
import io
import zlib
from collections.abc import Iterator
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"


class CorpusError(ValueError):
    """A corpus file is missing, unreadable or malformed; the message names the file and line.

    Notes
    -----
    A ValueError subclass, so the command line reports it as a one-line error like any other bad input;
    catching it alone tells a broken corpus apart from a bad setting.
    """


def _open_corpus_file(path: Path) -> io.BufferedIOBase:
    """Open a plain or gzipped file for reading bytes.

    Parameters
    ----------
    path : pathlib.Path
        The file; gzip is detected from its first two bytes, whatever its name.

    Returns
    -------
    io.BufferedIOBase
        The (decompressed) byte stream; the caller closes it.

    Notes
    -----
    Raises CorpusError naming the file if it is missing or unreadable.
    """
    try:
        with Path(path).open("rb") as probe:
            is_gzip = probe.read(2) == GZIP_MAGIC
        return gzip.open(path, "rb") if is_gzip else Path(path).open("rb")
    except OSError as error:
        raise CorpusError(f"cannot read {path}: {error.strerror or error}") from None


def iter_lines(path: Path) -> Iterator[str]:
    r"""Stream a UTF-8 text file, plain or gzipped, one stripped line at a time.

    Parameters
    ----------
    path : pathlib.Path
        The file.

    Yields
    ------
    str
        One string per line, without the newline and surrounding whitespace.

    Raises
    ------
    CorpusError
        Naming the file and line for bytes that are not UTF-8 and for corrupt or truncated (gzip) data.

    Notes
    -----
    Lines are split on "\n" only (a "\r" before it is stripped), never on the other Unicode line separators
    that ``str.splitlines`` honours and that would shift the alignment with the other language. A UTF-8
    byte-order mark at the start is dropped. Holds one line in memory at a time, whatever the file's size.
    """
    with _open_corpus_file(path) as byte_stream:
        lines_read = 0
        try:
            for raw_line in byte_stream:
                try:
                    line = raw_line.decode("utf-8").strip()
                except UnicodeDecodeError as error:
                    raise CorpusError(
                        f"{path} line {lines_read + 1}: not valid UTF-8 (byte {error.start} of the line)"
                    ) from None
                if lines_read == 0 and line.startswith("\ufeff"):
                    line = line[1:].strip()
                lines_read += 1
                yield line
        except (OSError, EOFError, zlib.error) as error:
            raise CorpusError(
                f"{path}: cannot read past line {lines_read} (corrupt or truncated file): {error}"
            ) from None


def read_lines(path: Path) -> list[str]:
    r"""Read a UTF-8 text file, plain or gzipped, as a list of stripped lines.

    Parameters
    ----------
    path : pathlib.Path
        The file.

    Returns
    -------
    list[str]
        One string per line, without the newline and surrounding whitespace.

    Notes
    -----
    :func:`iter_lines` collected into a list, with its checks and errors.
    """
    return list(iter_lines(path))


def iter_parallel_lines(source_path: Path, target_path: Path) -> Iterator[tuple[str, str]]:
    """Stream two line-aligned files as (source, target) sentence pairs.

    Parameters
    ----------
    source_path, target_path : pathlib.Path
        Plain or gzipped UTF-8 files with one sentence per line, line i of one translating line i
        of the other.

    Yields
    ------
    tuple[str, str]
        (source, target) per line, stripped; empty lines are kept.

    Notes
    -----
    Holds one pair in memory at a time. The alignment check happens when one file ends: if the other
    goes on, the rest of it is counted and CorpusError names both files and their line counts (the
    pairs already yielded were then read from misaligned files: callers must not keep what they built).
    Both files empty is a CorpusError too. The errors of :func:`iter_lines` pass through.
    """
    sources, targets = iter_lines(source_path), iter_lines(target_path)
    count = 0
    for source in sources:
        target = next(targets, None)
        if target is None:
            rest = sum(1 for _ in sources)
            raise CorpusError(
                f"{source_path} has {count + 1 + rest} lines but {target_path} has {count}; "
                "parallel files must be line-aligned"
            )
        count += 1
        yield source, target
    rest = sum(1 for _ in targets)
    if rest:
        raise CorpusError(
            f"{source_path} has {count} lines but {target_path} has {count + rest}; "
            "parallel files must be line-aligned"
        )
    if count == 0:
        raise CorpusError(f"{source_path} and {target_path} are empty")


def read_parallel_files(source_path: Path, target_path: Path) -> list[tuple[str, str]]:
    """Read two line-aligned files into (source, target) sentence pairs.

    Parameters
    ----------
    source_path, target_path : pathlib.Path
        Plain or gzipped UTF-8 files with one sentence per line, line i of one translating line i
        of the other.

    Returns
    -------
    list[tuple[str, str]]
        (source, target) per line, stripped; empty lines are kept (``encode_corpus`` counts them).

    Raises
    ------
    CorpusError
        Naming the files when their line counts differ or both are empty, and those of :func:`iter_lines`.

    Notes
    -----
    :func:`iter_parallel_lines` collected into a list, with its checks and errors. Line alignment is the only
    link between a sentence and its translation, so unequal line counts are an error, never truncated to the
    shorter file; as the whole list is built before it is returned, a caller never sees misaligned pairs.
    """
    return list(iter_parallel_lines(source_path, target_path))
