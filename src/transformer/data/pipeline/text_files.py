"""Read corpus text: UTF-8 files, plain or gzipped, line by line, and two line-aligned files as sentence pairs.

Corpora come as two line-aligned files (``train.en``/``train.de``, gzipped or not). Every problem
is reported with the file and line at fault: misaligned line counts, bytes that are not UTF-8, a
truncated gzip stream, an empty file.
"""

import gzip
import io
import os
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # the type of a buffer ``readinto`` fills; typeshed's, not importable at run time
    from _typeshed import WriteableBuffer

GZIP_MAGIC = b"\x1f\x8b"
#: Longest line read from a pipe, FIFO or device, in bytes: a sentence is far shorter, and a stream without
#: line ends (``/dev/zero``) would otherwise be read into memory until it ran out before any check could name
#: it. A regular file is finite and read whole, so a long line of a web corpus still reaches the length filter.
MAX_LINE_BYTES = 1 << 20


class CorpusError(ValueError):
    """A corpus file is missing, unreadable or malformed; the message names the file and line.

    Notes
    -----
    A ValueError subclass, so the command line reports it as a one-line error like any other bad input;
    catching it alone tells a broken corpus apart from a bad setting.
    """


class _ReplayedStream(io.RawIOBase):
    """A byte stream whose first bytes were already read: gives them again, then reads on from the file.

    Parameters
    ----------
    head : bytes
        The bytes already read from ``rest``.
    rest : IO[bytes]
        The open file, positioned just after ``head``; closed with this stream.

    Notes
    -----
    A pipe or FIFO can be read only once, so the gzip check cannot read its first bytes and then open the
    file again (that lost the 8 KiB the check had buffered, or all of a short input); replaying them works
    for every kind of file alike.
    """

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        super().__init__()
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        """Say the stream can be read (``io.BufferedReader`` asks).

        Returns
        -------
        bool
            Always True.

        Notes
        -----
        Required by ``io.RawIOBase``, whose default says False.
        """
        return True

    def readinto(self, buffer: "WriteableBuffer") -> int:
        """Fill ``buffer`` with the replayed bytes first, then with bytes read from the file.

        Parameters
        ----------
        buffer : writable bytes-like object
            Where the bytes go.

        Returns
        -------
        int
            How many bytes were written to ``buffer``; 0 at the end of the file.

        Notes
        -----
        One call gives either replayed bytes or file bytes, never both: a short read is allowed by the
        ``RawIOBase`` contract, and the buffered reader above asks again.
        """
        view = memoryview(buffer).cast("B")
        if self._head:
            count = min(len(view), len(self._head))
            view[:count] = self._head[:count]
            self._head = self._head[count:]
            return count
        data = self._rest.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        """Close the file below, then this stream.

        Returns
        -------
        None

        Notes
        -----
        ``io.BufferedReader`` closes its raw stream, so closing the outermost reader closes the file.
        """
        self._rest.close()
        super().close()


@contextmanager
def _opened_corpus_file(path: Path) -> Iterator[tuple[io.BufferedIOBase, int]]:
    """Open a plain or gzipped file once, for reading bytes (decompressed when gzipped).

    Parameters
    ----------
    path : pathlib.Path
        The file, a pipe (``/dev/stdin``, ``<(...)``), a FIFO or a device; gzip is detected from its first two
        bytes, whatever its name.

    Returns
    -------
    Iterator[tuple[io.BufferedIOBase, int]]
        A context manager yielding the byte stream and the longest line to read from it (-1: no limit, for a
        regular file; :data:`MAX_LINE_BYTES` for a pipe, FIFO or device); leaving it closes the file.

    Notes
    -----
    Raises CorpusError naming the file if it is missing or unreadable. The file is opened exactly once and
    its first bytes replayed (:class:`_ReplayedStream`), so a pipe loses nothing. Whether it is a regular file
    is asked of the open descriptor, not the path, so a path replaced meanwhile cannot mislead it.
    """
    try:
        file = Path(path).open("rb", buffering=0)  # noqa: SIM115 (closed through the replaying stream)
    except OSError as error:
        raise CorpusError(f"cannot read {path}: {error.strerror or error}") from None
    line_limit = -1 if stat.S_ISREG(os.fstat(file.fileno()).st_mode) else MAX_LINE_BYTES
    head = _read_head(file, path)
    with io.BufferedReader(_ReplayedStream(head, file)) as byte_stream:
        if head == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=byte_stream, mode="rb") as decompressed:
                yield decompressed, line_limit
        else:
            yield byte_stream, line_limit


def _read_head(file: IO[bytes], path: Path) -> bytes:
    """Read the first bytes of an open file, enough to tell gzip, however few a pipe gives per read."""
    head = b""
    try:
        while len(head) < len(GZIP_MAGIC):
            chunk = file.read(len(GZIP_MAGIC) - len(head))
            if not chunk:
                break
            head += chunk
    except OSError as error:
        file.close()
        raise CorpusError(f"cannot read {path}: {error.strerror or error}") from None
    return head


def iter_lines(path: Path) -> Iterator[str]:
    r"""Stream a UTF-8 text file, plain or gzipped, one stripped line at a time.

    Parameters
    ----------
    path : pathlib.Path
        The file; a pipe (``/dev/stdin``, ``<(...)``), a FIFO or a device is read as it comes, once.

    Yields
    ------
    str
        One string per line, without the newline and surrounding whitespace.

    Raises
    ------
    CorpusError
        Naming the file and line for bytes that are not UTF-8, for a line of a pipe, FIFO or device longer
        than :data:`MAX_LINE_BYTES` and for corrupt or truncated (gzip) data.

    Notes
    -----
    Lines are split on "\n" only (a "\r" before it is stripped), never on the other Unicode line separators
    that ``str.splitlines`` honours and that would shift the alignment with the other language. A UTF-8
    byte-order mark at the start is dropped. Holds one line in memory at a time, whatever the file's size; from a
    pipe, FIFO or device never more than :data:`MAX_LINE_BYTES` of it (a regular file's long line is read
    whole: training corpora from the web hold such lines, and the length filter drops them).
    """
    with _opened_corpus_file(path) as (byte_stream, line_limit):
        lines_read = 0
        read_size = line_limit + 1 if line_limit > 0 else -1
        try:
            while raw_line := byte_stream.readline(read_size):
                if line_limit > 0 and len(raw_line) > line_limit and not raw_line.endswith(b"\n"):
                    raise CorpusError(
                        f"{path} line {lines_read + 1}: more than {line_limit:,} bytes without a line end "
                        "(is this a binary file or a device such as /dev/zero?)"
                    )
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
