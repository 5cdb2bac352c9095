"""The text a command reads and writes: one sentence per line, from a file or standard input, to either.

Input files may be plain or gzipped, and pipes, FIFOs and devices (``/dev/stdin``, ``<(...)``) are read once,
whole (:func:`~transformer.data.pipeline.text_files.read_lines`); standard input is decoded here, so bytes that
are not UTF-8 stop with a line naming the line instead of a tokenizer traceback. Input text holding control
characters is refused (:func:`~transformer.command_checks.refuse_control_characters`). Output files are written
atomically, so an interrupted command leaves no partial output; a symbolic link is followed to its target and a
device or FIFO (``/dev/null``, ``/dev/stdout``) written straight, never replaced
(:func:`~transformer.atomic_files.write_destination`).
"""

import sys
from collections.abc import Sequence
from pathlib import Path

from transformer.atomic_files import write_text_atomically
from transformer.command_checks import check_output_file, refuse_control_characters
from transformer.data.pipeline.text_files import CorpusError, read_lines


def read_input_lines(path: str | None) -> list[str]:
    """Read sentences from a file (plain or .gz) or standard input.

    Parameters
    ----------
    path : str or None
        File path (a pipe, FIFO or device too: read once); None or "-" reads standard input.

    Returns
    -------
    list of str
        One sentence per line, newline removed.

    Raises
    ------
    CorpusError
        When the file is missing or unreadable, or it (or standard input) holds bytes that are not UTF-8,
        naming it and the line.
    ValueError
        When a line holds a control character other than tab (NUL, escape, ...), naming the file (or
        standard input), the line and the character.

    Notes
    -----
    Control characters are refused rather than stripped: a line of them is a binary file or a broken export,
    and stripping would change the text silently.
    """
    if path is None or path == "-":
        lines = read_standard_input_lines()
        refuse_control_characters(lines, "standard input")
        return lines
    lines = read_lines(Path(path))
    refuse_control_characters(lines, path)
    return lines


def read_standard_input_lines() -> list[str]:
    """Read standard input as UTF-8 lines, refusing bytes that are not UTF-8.

    Returns
    -------
    list of str
        One sentence per line, without its line end (LF or CR LF); other spaces are kept.

    Raises
    ------
    CorpusError
        Naming standard input and the line that is not UTF-8.

    Notes
    -----
    The bytes are decoded here rather than by ``sys.stdin``, whose ``surrogateescape`` handler (in a C or
    C.UTF-8 locale) would pass bad bytes on to the tokenizer as a traceback. A UTF-8 byte-order mark at the
    start is dropped, as :func:`~transformer.data.dataset.read_lines` does for files.
    """
    byte_stream = getattr(sys.stdin, "buffer", None)
    if byte_stream is None:  # a text stream with no bytes below it (io.StringIO): already decoded
        lines = [line.removesuffix("\n").removesuffix("\r") for line in sys.stdin]
    else:
        lines = [decode_input_line(raw_line, number) for number, raw_line in enumerate(byte_stream, start=1)]
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return lines


def decode_input_line(raw_line: bytes, line_number: int) -> str:
    """Decode one line of standard input.

    Parameters
    ----------
    raw_line : bytes
        The line as read, with its line end.
    line_number : int
        Its number, from 1, for the error message.

    Returns
    -------
    str
        The text without its line end (LF or CR LF).

    Raises
    ------
    CorpusError
        Such as "standard input line 2: not valid UTF-8 (byte 7 of the line)".

    Notes
    -----
    The byte offset in the message is where decoding failed, so a user can find the stray byte with a hex
    viewer; the line's text itself is not quoted, since it cannot be printed.
    """
    try:
        return raw_line.decode("utf-8").removesuffix("\n").removesuffix("\r")
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"standard input line {line_number}: not valid UTF-8 (byte {error.start} of the line)"
        ) from None


def write_output_lines(lines: Sequence[str], path: str | None) -> None:
    """Write lines to a file atomically, or to standard output.

    Parameters
    ----------
    lines : sequence of str
        Output lines.
    path : str or None
        Destination; None or "-" is standard output.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        When the destination is a directory or a loop of symbolic links, naming ``--output``.

    Notes
    -----
    A file is written to a temporary sibling and renamed, so an interrupted run leaves no partial output. A
    symbolic link is followed and its target replaced (the link stays a link); a device, a FIFO or a
    process's open file (``/dev/null``, ``/dev/stdout``, ``/proc/self/fd/1``) is written straight, never
    replaced by a regular file.
    """
    text = "".join(line + "\n" for line in lines)
    if path is None or path == "-":
        sys.stdout.write(text)
        return
    destination = Path(path)
    check_output_file(destination, "--output")
    write_text_atomically(destination, text)
