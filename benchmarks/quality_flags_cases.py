"""The flags' test of known faults: built from a validation set, written and read as gzipped TSV.

See :mod:`benchmarks.quality_flags` for what each kind of case is and how the flags are judged on them.
"""

import csv
import gzip
import io
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from transformer.atomic_files import write_bytes_atomically
from transformer.data.pipeline.text_files import CorpusError
from transformer.decoding.quality_flags import FLAG_KINDS

#: The kinds of case in a test, negatives first.
CASE_KINDS = ("real", "reference", *FLAG_KINDS)
#: The test file's columns.
COLUMNS = ("half", "index", "kind", "source", "target")


@dataclass(frozen=True)
class FlagCase:
    """One case of the flags' test.

    Parameters
    ----------
    half : str
        ``"a"`` (thresholds are chosen here) or ``"b"`` (they are judged here).
    index : int
        The sentence's line in the validation set, from 0.
    kind : str
        One of :data:`CASE_KINDS`.
    source : str
        The source sentence.
    target : str
        The forced output; empty for ``real`` (the model's own translation, made at run time).

    Notes
    -----
    Halves go by sentence, so one source's cases never straddle the two.
    """

    half: str
    index: int
    kind: str
    source: str
    target: str


def build_test(sources: Sequence[str], references: Sequence[str], seed: int = 51) -> list[FlagCase]:
    """Make the flags' test from a parallel set (see the module docstring).

    Parameters
    ----------
    sources, references : sequence of str
        The validation set, line by line.
    seed : int
        Seed of the cut points and repeated spans.

    Returns
    -------
    list of FlagCase
        Per sentence of four reference words or more: real, reference, omission, hallucination, repetition.

    Notes
    -----
    Deterministic for a seed and a set; the other sentence of a hallucination is the one half the set away,
    so no sentence is paired with itself. Halves are a seeded shuffle of the sentences, each sentence's five
    cases in the same half.
    """
    generator = random.Random(seed)
    order = list(range(len(sources)))
    random.Random(seed + 1).shuffle(order)
    in_half_a = set(order[: len(order) // 2])
    cases = []
    for index, (source, reference) in enumerate(zip(sources, references, strict=True)):
        words = reference.split()
        if len(words) < 4:
            continue
        kept = max(1, min(len(words) - 2, round(len(words) * generator.uniform(0.4, 0.7))))
        omitted = " ".join(words[:kept]) + ("." if words[-1].endswith(".") and kept < len(words) else "")
        width = generator.randint(1, min(3, len(words) - 1))
        start = generator.randrange(len(words) - width)
        span = words[start : start + width]
        looped = " ".join([*words[: start + width], *span * generator.randint(2, 3), *words[start + width :]])
        other = references[(index + len(references) // 2) % len(references)]
        half = "a" if index in in_half_a else "b"
        for kind, target in zip(CASE_KINDS, ("", reference, omitted, other, looped), strict=True):
            cases.append(FlagCase(half, index, kind, source, target))
    return cases


def write_test(path: Path, cases: Sequence[FlagCase]) -> None:
    """Write a test as gzipped tab-separated lines with a header, atomically.

    Parameters
    ----------
    path : Path
        The ``.tsv.gz`` file.
    cases : sequence of FlagCase
        The test.

    Returns
    -------
    None

    Notes
    -----
    The gzip header's time is zero, so the same test gives the same bytes (and no spurious diff).
    """
    text = io.StringIO()
    writer = csv.writer(text, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(COLUMNS)
    for case in cases:
        writer.writerow([case.half, case.index, case.kind, case.source, case.target])
    write_bytes_atomically(path, gzip.compress(text.getvalue().encode("utf-8"), mtime=0))


def read_test(path: Path) -> list[FlagCase]:
    """Read a test written by :func:`write_test`.

    Parameters
    ----------
    path : Path
        The ``.tsv.gz`` file.

    Returns
    -------
    list of FlagCase
        The test.

    Raises
    ------
    CorpusError
        Naming the file (and the line) when it is missing, not gzip, or a line does not parse.

    Notes
    -----
    The header must be :data:`COLUMNS`, so a file of another layout is refused rather than misread.
    """
    try:
        lines = gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise CorpusError(f"cannot read {path}: {error}") from None
    rows = list(csv.reader(lines, delimiter="\t"))
    if not rows or tuple(rows[0]) != COLUMNS:
        raise CorpusError(f"{path}: line 1: expected the header {' '.join(COLUMNS)}")
    cases = []
    for line, row in enumerate(rows[1:], start=2):
        if (
            len(row) != len(COLUMNS)
            or row[0] not in ("a", "b")
            or row[2] not in CASE_KINDS
            or not row[1].isdigit()
        ):
            raise CorpusError(f"{path}: line {line}: expected {len(COLUMNS)} fields: {' '.join(COLUMNS)}")
        cases.append(FlagCase(row[0], int(row[1]), row[2], row[3], row[4]))
    return cases
