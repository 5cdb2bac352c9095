"""The teacher's pass of sequence-level distillation: translate the training sources, sharded and resumable.

Each process of a ``torchrun`` job (or the only process) translates one contiguous slice of the sources and
appends them to its own part file, a fixed-size chunk at a time; a killed process resumes after the last
whole chunk its file holds. Chunks are cut from the input order, not from a process's slice, and a slice is a
run of whole chunks, so every chunk is batched the same way whatever the number of processes: one process and
several write the same lines (at the same threads per process, which the products' summation order can
depend on).
"""

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from transformer.config.distill import DistillConfig
from transformer.decoding.translator import Translator

#: A part file of the teacher's pass: the translations of one process's slice, in input order.
PART_FILE = "part-{rank:05d}-of-{world_size:05d}.txt"
#: Line breaks a translation must not carry into a one-sentence-per-line file (the readers split on "\\n").
LINE_BREAKS = re.compile(r"[\r\n]+")


@dataclass(frozen=True)
class TeacherSlice:
    """The source lines one process of the teacher's pass translates.

    Parameters
    ----------
    rank : int
        The process (0 to ``world_size - 1``).
    world_size : int
        Processes sharing the pass.
    start : int
        Index of the first source line of the slice.
    stop : int
        Index one past the last (``start == stop`` for a process with nothing to do).
    chunk_lines : int
        Lines translated and written as one unit; ``start`` is a multiple of it.

    Notes
    -----
    Made by :func:`teacher_slices`, which gives every process a contiguous run of whole chunks, so the
    chunks, and with them the batches and the translations, do not depend on ``world_size``.
    """

    rank: int
    world_size: int
    start: int
    stop: int
    chunk_lines: int

    @property
    def part_name(self) -> str:
        """The name of this slice's part file.

        Returns
        -------
        str
            ``part-RRRRR-of-WWWWW.txt``.

        Notes
        -----
        The world size is in the name, so a pass resumed by another number of processes cannot mistake
        another slicing's file for its own.
        """
        return PART_FILE.format(rank=self.rank, world_size=self.world_size)

    @property
    def line_count(self) -> int:
        """The number of source lines in the slice.

        Returns
        -------
        int
            ``stop - start``.

        Notes
        -----
        Zero when there are fewer chunks than processes; such a process writes an empty part file.
        """
        return self.stop - self.start


def teacher_slices(line_count: int, chunk_lines: int, world_size: int) -> list[TeacherSlice]:
    """Cut the training sources into one contiguous run of whole chunks per process.

    Parameters
    ----------
    line_count : int
        Source lines in all.
    chunk_lines : int
        Lines per chunk. Positive.
    world_size : int
        Processes. Positive.

    Returns
    -------
    list of TeacherSlice
        One per rank, in rank order; together they cover ``range(line_count)`` once, in order.

    Notes
    -----
    The chunks are shared out as evenly as whole chunks allow (a process gets ``floor`` or ``ceil`` of
    chunks / processes), so merging the part files in rank order restores the input order.
    """
    chunks = -(-line_count // chunk_lines)
    slices = []
    for rank in range(world_size):
        first, last = chunks * rank // world_size, chunks * (rank + 1) // world_size
        start, stop = min(first * chunk_lines, line_count), min(last * chunk_lines, line_count)
        slices.append(TeacherSlice(rank, world_size, start, stop, chunk_lines))
    return slices


def finished_lines(part_file: Path, teacher_slice: TeacherSlice) -> int:
    """Count the translations of whole chunks a part file holds, cutting off a chunk torn by a kill.

    Parameters
    ----------
    part_file : Path
        The slice's part file (missing: nothing done yet).
    teacher_slice : TeacherSlice
        Its slice.

    Returns
    -------
    int
        Lines of the slice already translated: a multiple of ``chunk_lines``, or the whole slice.

    Raises
    ------
    ValueError
        Naming the file when it holds more lines than its slice (it belongs to another pass).

    Notes
    -----
    A chunk is written with one ``write`` and then synced, so a process killed mid-write leaves at most
    the start of one chunk; the file is truncated back to the last whole chunk before more is appended,
    and the lost chunk is translated again.
    """
    if not part_file.exists():
        return 0
    data = part_file.read_bytes()
    complete = data.count(b"\n")
    if complete > teacher_slice.line_count:
        raise ValueError(
            f"{part_file}: {complete} lines, more than the {teacher_slice.line_count} source lines of its slice; "
            "it is not this teacher pass's file"
        )
    done = teacher_slice.line_count
    if complete < teacher_slice.line_count:
        done = complete - complete % teacher_slice.chunk_lines
    keep = _offset_after_lines(data, done)
    if keep < len(data):
        with part_file.open("r+b") as handle:
            handle.truncate(keep)
    return done


def _offset_after_lines(data: bytes, lines: int) -> int:
    """Return the byte offset just after the ``lines``-th newline of ``data`` (0 for no lines)."""
    offset = 0
    for _ in range(lines):
        offset = data.index(b"\n", offset) + 1
    return offset


def translate_slice(
    translator: Translator,
    sources: Sequence[str],
    teacher_slice: TeacherSlice,
    part_file: Path,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Translate a slice of the training sources into its part file, resuming after its last whole chunk.

    Parameters
    ----------
    translator : Translator
        The teacher (a model or an ensemble) with the pass's search; one output per line.
    sources : sequence of str
        All the training sources (the slice picks its own).
    teacher_slice : TeacherSlice
        This process's lines.
    part_file : Path
        Where its translations go, one per line in input order.
    progress : callable or None
        Called with the lines already done on start, then with each chunk's line count.

    Returns
    -------
    int
        Lines translated by this call (0 when the part was already complete).

    Raises
    ------
    ValueError
        When the translator's search returns several outputs per line, or the part file is another pass's.

    Notes
    -----
    Line breaks inside a translation become spaces, so line i of the merged file is always the translation
    of source line i. Each chunk is one ``write``, flushed and ``fsync``-ed before the next is translated:
    what a kill can lose is the chunk in flight.
    """
    if translator.decode_config.nbest != 1:
        raise ValueError(
            f"the teacher's pass writes one line per source, got nbest={translator.decode_config.nbest}"
        )
    part_file.parent.mkdir(parents=True, exist_ok=True)
    done = finished_lines(part_file, teacher_slice)
    if progress is not None and done:
        progress(done)
    translated = 0
    with part_file.open("a", encoding="utf-8", newline="\n") as output:
        for start in range(teacher_slice.start + done, teacher_slice.stop, teacher_slice.chunk_lines):
            chunk = list(sources[start : min(start + teacher_slice.chunk_lines, teacher_slice.stop)])
            outputs = translator.translate(chunk)
            output.write("".join(LINE_BREAKS.sub(" ", line).strip() + "\n" for line in outputs))
            output.flush()
            os.fsync(output.fileno())
            translated += len(chunk)
            if progress is not None:
                progress(len(chunk))
    return translated


def merge_parts(part_dir: Path, slices: Sequence[TeacherSlice]) -> list[str]:
    """Read the finished part files of a pass in rank order: the translation of every source line.

    Parameters
    ----------
    part_dir : Path
        The folder of the part files.
    slices : sequence of TeacherSlice
        The pass's slices, in rank order.

    Returns
    -------
    list of str
        One translation per source line, in input order.

    Raises
    ------
    ValueError
        Naming the part file that is missing or holds another number of lines than its slice.

    Notes
    -----
    Called after every process has finished (a barrier), so a short part means a process failed without
    saying so, never one still writing.
    """
    translations: list[str] = []
    for teacher_slice in slices:
        path = part_dir / teacher_slice.part_name
        lines = path.read_text(encoding="utf-8").split("\n")[:-1] if path.exists() else None
        if lines is None or len(lines) != teacher_slice.line_count:
            found = "missing" if lines is None else f"{len(lines)} lines"
            raise ValueError(
                f"{path}: {found}, expected {teacher_slice.line_count} (source lines "
                f"{teacher_slice.start + 1}-{teacher_slice.stop}); rerun distill to finish the teacher's pass"
            )
        translations.extend(lines)
    return translations


def teacher_translator(teachers: Sequence[Path], settings: DistillConfig, device: str) -> Translator:
    """Load the teacher (or ensemble) with the search of its pass over the training sources.

    Parameters
    ----------
    teachers : sequence of Path
        Checkpoint or run directories; several translate as an ensemble.
    settings : DistillConfig
        The ``distill`` section (``teacher_beam_size``, ``teacher_precision``).
    device : str
        Where it translates.

    Returns
    -------
    Translator
        The first teacher's search (its run's ``decode`` section), with ``teacher_beam_size`` if set, one
        output per sentence, no sampling and no MBR.

    Raises
    ------
    ValueError
        For a teacher that cannot be loaded, or a precision the device cannot run (naming
        ``distill.teacher_precision``: int8 on a GPU, bf16 on a CPU without it).

    Notes
    -----
    Kim and Rush's sequence-level distillation trains on the teacher's beam output, an approximation of its
    mode; sampling or MBR would give the student noisier targets, so they are off whatever the teacher's
    run used.
    """
    try:
        translator = Translator.from_checkpoints(
            [str(path) for path in teachers], None, device, settings.teacher_precision
        )
    except ValueError as error:
        if "precision=" not in str(error):
            raise
        raise ValueError(
            f"distill.teacher_precision={settings.teacher_precision!r} on {device}: {error}"
        ) from None
    search = translator.decode_config
    beam = settings.teacher_beam_size if settings.teacher_beam_size is not None else search.beam_size
    translator.decode_config = dataclasses.replace(search, beam_size=beam, nbest=1, sampling=False, mbr=0)
    return translator
