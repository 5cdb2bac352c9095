"""Checks a command makes before it reads or writes anything: option values, input text, outputs against inputs.

``transformer`` commands call these before the work starts, so a bad input stops with one line naming the
option, file or line at fault and nothing is written: numbers are finite and within a stated range, input
text holds no control characters, and no output is one of the command's own inputs.
"""

import argparse
import errno
import math
import os
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

from transformer.atomic_files import write_destination


def number_in_range(minimum: float, maximum: float) -> Callable[[str], float]:
    """Make an argparse ``type`` that accepts finite numbers from ``minimum`` to ``maximum``.

    Parameters
    ----------
    minimum, maximum : float
        The inclusive bounds.

    Returns
    -------
    callable
        Parses one option value; raises ``argparse.ArgumentTypeError`` for text that is not a number,
        for NaN and infinities, and for values outside the bounds.

    Notes
    -----
    ``type=float`` accepts "nan" and "inf", which then flow into the search and print ``nan`` scores.
    argparse puts the option's name before the message ("argument --alpha: ..."), so every float option
    names itself the same way.
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"expected a finite number from {minimum:g} to {maximum:g}, got {text!r}"
            )
        return value

    return parse


def integer_in_range(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """Make an argparse ``type`` that accepts integers from ``minimum`` to ``maximum``.

    Parameters
    ----------
    minimum : int
        The smallest value allowed.
    maximum : int or None
        The largest value allowed; None for no upper bound.

    Returns
    -------
    callable
        Parses one option value; raises ``argparse.ArgumentTypeError`` for anything else.

    Notes
    -----
    The bounds are the sane range of each option, stated in its help, so a typo (``--beam 40000``) stops at
    once instead of exhausting memory or running for hours.
    """
    bounds = f"from {minimum} to {maximum}" if maximum is not None else f"of at least {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected an integer {bounds}, got {text!r}")
        return value

    return parse


def integers_in_range(minimum: int, maximum: int | None = None) -> Callable[[str], tuple[int, ...]]:
    """Make an argparse ``type`` that accepts comma-separated integers, each from ``minimum`` to ``maximum``.

    Parameters
    ----------
    minimum : int
        The smallest value allowed for each item.
    maximum : int or None
        The largest value allowed for each item; None for no upper bound.

    Returns
    -------
    callable
        ``parse(text) -> tuple of int``, the items in the order given; raises ``argparse.ArgumentTypeError``
        naming the first item out of range or not an integer.

    Notes
    -----
    Each item goes through :func:`integer_in_range`, so a list option and a single one word their errors
    alike ("argument --clients: expected an integer of at least 1, got 'x'"). Spaces around items are allowed
    ("64, 1"); an empty item is refused like any other non-integer.
    """
    parse_item = integer_in_range(minimum, maximum)

    def parse(text: str) -> tuple[int, ...]:
        return tuple(parse_item(item.strip()) for item in text.split(","))

    return parse


#: The most seeds one ``--seeds`` may name (a typo such as ``--seeds 1000`` would plan a thousand trainings).
MAX_SEEDS = 100


def seed_selection(text: str) -> tuple[int, ...]:
    """Parse ``--seeds``: a count (``3`` is seeds 1, 2, 3) or explicit seeds (``1,5,7``, ``4-6``, ``7-7``).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    tuple of int
        The seeds, in the order given.

    Raises
    ------
    argparse.ArgumentTypeError
        Quoting the value, for a seed named twice, an empty item, a reversed range or more than
        :data:`MAX_SEEDS` seeds.

    Notes
    -----
    A bare number stays a count, as ``--seeds 3`` always meant; a list or a range names the seeds themselves
    (non-negative), so a researcher can add seeds 4-6 to a table that has 1-3, or rerun seed 7 alone
    (``--seeds 7-7``). Duplicates, empty items, reversed ranges and more than :data:`MAX_SEEDS` seeds are
    refused, never silently dropped or truncated.
    """
    stripped = text.strip()
    if stripped.isdigit():
        count = int(stripped)
        if not 1 <= count <= MAX_SEEDS:
            raise argparse.ArgumentTypeError(
                f"expected a count from 1 to {MAX_SEEDS} or seeds such as 1,5,7 or 4-6, got {text!r}"
            )
        return tuple(range(1, count + 1))
    seeds: list[int] = []
    for item in stripped.split(","):
        first, dash, last = item.strip().partition("-")
        if not first.strip().isdigit() or (dash and not last.strip().isdigit()):
            raise argparse.ArgumentTypeError(f"expected seeds such as 1,5,7 or 4-6, got {text!r}")
        low, high = int(first), int(last) if dash else int(first)
        if high < low:
            raise argparse.ArgumentTypeError(f"range {item.strip()!r} in {text!r} ends before it starts")
        if len(seeds) + high - low + 1 > MAX_SEEDS:
            raise argparse.ArgumentTypeError(f"{text!r} names more than {MAX_SEEDS} seeds")
        seeds.extend(range(low, high + 1))
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"seed {repeated[0]} named twice in {text!r}")
    return tuple(seeds)


def refuse_control_characters(lines: Sequence[str], source: str) -> None:
    """Refuse text whose lines hold control characters other than tab.

    Parameters
    ----------
    lines : sequence of str
        The lines as read, without their line ends.
    source : str
        What they came from, for the message: a file name, "standard input" or an option.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Such as "input.en line 3: control character U+0000 at character 1 (only tab is allowed; is this a
        binary file?)".

    Notes
    -----
    Control characters (Unicode category Cc: NUL, escape, DEL, ...) are not text: a line of them is a binary
    file or a broken export, and the tokenizer would still turn it into a confident "translation". Refusing
    names the line to fix; stripping them would change the text silently.
    """
    for number, line in enumerate(lines, start=1):
        for position, character in enumerate(line, start=1):
            if character != "\t" and unicodedata.category(character) == "Cc":
                raise ValueError(
                    f"{source} line {number}: control character U+{ord(character):04X} at character "
                    f"{position} (only tab is allowed; is this a binary file?)"
                )


def check_output_directory(path: Path, option: str) -> None:
    """Refuse an output directory that is an existing file, naming the option.

    Parameters
    ----------
    path : Path
        The directory the command will create or write into.
    option : str
        The flag that gave it (or whose default it is), e.g. ``"--output-dir"``.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Such as "--output-dir runs/x: is a file; expected a directory".

    Notes
    -----
    Without this check the first ``mkdir`` fails with "[Errno 17] File exists", which names neither the
    option nor the problem.
    """
    if path.is_file():
        raise ValueError(f"{option} {path}: is a file; expected a directory")


def check_output_file(path: Path, option: str) -> None:
    """Refuse an output file that is an existing directory or a loop of symbolic links, naming the option.

    Parameters
    ----------
    path : Path
        The file the command will write.
    option : str
        The flag that gave it, e.g. ``"--output"``.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Such as "--output out: is a directory; expected a file", or "--output loop.de: a symbolic link that
        leads back to itself".

    Notes
    -----
    Without this check the final rename fails with "[Errno 21] Is a directory" and names the temporary file,
    and a link loop was renamed over, becoming a regular file. Other links, devices and FIFOs are fine: the
    writer follows a link to its target and writes a device or FIFO straight
    (:func:`transformer.atomic_files.write_destination`).
    """
    try:
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError(
                f"{option} {path}: a symbolic link that leads back to itself ({error.strerror}); point it at a "
                "file or remove it"
            ) from None
    if path.is_dir():
        raise ValueError(f"{option} {path}: is a directory; expected a file")


def _same_file(first: Path, second: Path) -> bool:
    """Whether two existing paths name one file or directory (symlinks followed, hard links caught)."""
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet): it cannot be the other
        return False


def _files_of(path: Path) -> list[Path]:
    """List a path, and for a directory the files directly in it (a checkpoint's files)."""
    if not path.is_dir():
        return [path]
    return [path, *(entry for entry in sorted(path.iterdir()) if entry.is_file())]


def refuse_outputs_among_inputs(
    inputs: Sequence[tuple[str, Path]],
    output_files: Sequence[tuple[str, Path]] = (),
    replaced_directories: Sequence[tuple[str, Path]] = (),
    written_directories: Sequence[tuple[str, Path]] = (),
) -> None:
    """Refuse any output that is, holds or would overwrite one of a command's inputs.

    Parameters
    ----------
    inputs : sequence of (str, Path)
        Each input with the option that named it, e.g. ``("--reference", Path("test.de"))``; a directory
        (a checkpoint) stands for itself and the files directly in it. Inputs that do not exist are skipped.
    output_files : sequence of (str, Path)
        Files the command will replace, e.g. ``("--output", Path("hyp.de"))``.
    replaced_directories : sequence of (str, Path)
        Directories the command will replace as a whole (an average, a conversion).
    written_directories : sequence of (str, Path)
        Directories the command writes new files into (attention maps).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming both options, e.g. "--output ref.de: is --reference ref.de; writing it would destroy it (choose
        another --output)"; and for an output file that cannot be one (:func:`check_output_file`).

    Notes
    -----
    Files are compared by device and inode (``os.path.samefile``), so a symbolic or hard link to an input is
    caught as well as the same path; an output that is a device or a pipe is written straight, destroying
    nothing, so it may also be an input (one terminal is both ``/dev/stdin`` and ``/dev/stdout``); a replaced
    directory is refused when it is an input or any folder above one, since replacing it deletes the input; a
    directory written into is refused when it is an input directory (its new files would join the
    checkpoint). Call it after the inputs are known and before anything is read or written.
    """
    for output_option, output in output_files:
        check_output_file(output, output_option)
        if write_destination(output)[1]:
            continue  # written straight, never replaced: --input /dev/stdin --output /dev/stdout on one terminal
        for input_option, input_path in inputs:
            for input_file in _files_of(input_path):
                if _same_file(output, input_file):
                    _refuse(
                        (output_option, output), (input_option, input_file), "writing it would destroy it"
                    )
    for output_option, output in replaced_directories:
        for input_option, input_path in inputs:
            if input_path.exists() and any(
                _same_file(output, folder) for folder in [input_path, *input_path.resolve().parents]
            ):
                _refuse((output_option, output), (input_option, input_path), "replacing it would delete it")
    for output_option, output in written_directories:
        for input_option, input_path in inputs:
            if input_path.is_dir() and _same_file(output, input_path):
                _refuse((output_option, output), (input_option, input_path), "the new files would join it")


def _refuse(output: tuple[str, Path], input_path: tuple[str, Path], consequence: str) -> None:
    """Raise the one-line error of an output that is, or holds, an input."""
    relation = "is" if _same_file(output[1], input_path[1]) else "holds"
    raise ValueError(
        f"{output[0]} {output[1]}: {relation} {input_path[0]} {input_path[1]}; {consequence} "
        f"(choose another {output[0]})"
    )
