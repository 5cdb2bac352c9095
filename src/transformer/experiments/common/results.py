"""``results.jsonl``: one line per finished run, the only record an experiment's tables are built from.

Each line holds the run's identity (experiment, variant, seed), its resolved configuration, where and when it
ran (commit, CPU or GPU, date) and its metrics. Lines are appended by the runner alone, one at a time, and
flushed to disk; a line cut short by a crash is ignored when read (the run is then scored again from its
checkpoint), never taken for a result.
"""

import gzip
import hashlib
import json
import math
import os
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from transformer.atomic_files import write_bytes_atomically

RESULTS_FILE = "results.jsonl"
#: Folder of an experiment directory holding the sentences records point to (hypotheses and references).
SENTENCES_DIR = "sentences"
#: The scored translations of a run's validation split and their references (one per line, in the run
#: directory), written by the worker for the paired tests.
HYPOTHESES_FILE = "dev_hypotheses.txt"
REFERENCES_FILE = "dev_references.txt"
#: Folder of a run directory where a measure hook leaves ``NAME.hypotheses.txt`` and ``NAME.references.txt``
#: of a test set of its own; the runner keeps them and records their paths under ``sentences``.
RUN_SENTENCES_DIR = "sentences"


def read_results(path: Path) -> list[dict[str, Any]]:
    """Read every complete line of a results file.

    Parameters
    ----------
    path : Path
        ``results.jsonl``; a missing file reads as no results.

    Returns
    -------
    list of dict
        The records in file order; for a run recorded twice, only its last line is kept.

    Raises
    ------
    ValueError
        Naming the file and line for a line that is not valid JSON, unless it is the last one.

    Notes
    -----
    A line that is not valid JSON is skipped when it is the last one (a write cut short); anywhere else it is
    an error, because the file was edited by hand and cannot be trusted.
    """
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    records: dict[tuple[str, int], dict[str, Any]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not a JSON record; fix or delete the line") from None
        records[(record["variant"], int(record["seed"]))] = record
    return list(records.values())


def append_result(path: Path, record: dict[str, Any]) -> None:
    """Append one record as a line and flush it to disk.

    Parameters
    ----------
    path : Path
        ``results.jsonl`` (created if missing).
    record : dict of str to Any
        A JSON-serialisable record.

    Returns
    -------
    None

    Notes
    -----
    The line is serialised first and written with a single ``write`` of the whole line, then fsynced: a
    crash leaves at most one torn last line, which :func:`read_results` ignores. Before the next append that
    torn line is removed (the file is rewritten atomically without it), so it never ends up in the middle.
    """
    line = json.dumps(record, sort_keys=True, allow_nan=True) + "\n"
    if path.exists():
        contents = path.read_bytes()
        if contents and not contents.endswith(b"\n"):
            write_bytes_atomically(path, contents[: contents.rfind(b"\n") + 1])
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def summarise(values: Iterable[float | None]) -> tuple[float | None, float | None, int]:
    """Mean and spread of a metric over seeds.

    Parameters
    ----------
    values : iterable of float or None
        One value per seed; None and NaN are left out.

    Returns
    -------
    mean : float or None
        The mean, None without values.
    spread : float or None
        The sample standard deviation, None with fewer than two values.
    count : int
        The number of values used.

    Notes
    -----
    The sample (n - 1) standard deviation: with two or three seeds it is a rough spread, which the tables say
    by printing the seed count beside it.
    """
    finite = [float(value) for value in values if value is not None and not math.isnan(float(value))]
    if not finite:
        return None, None, 0
    spread = statistics.stdev(finite) if len(finite) > 1 else None
    return statistics.fmean(finite), spread, len(finite)


def format_metric(values: Sequence[float | None], digits: int) -> str:
    """Format a metric over seeds as ``mean ± spread`` (or the single value, or ``-``).

    Parameters
    ----------
    values : sequence of float or None
        One value per seed.
    digits : int
        Decimals.

    Returns
    -------
    str
        E.g. ``"4.92 ± 0.03"``, ``"4.92"`` for one seed, ``"-"`` for none.

    Notes
    -----
    The spread is the standard deviation over seeds, not a confidence interval.
    """
    mean, spread, _ = summarise(values)
    if mean is None:
        return "-"
    return f"{mean:.{digits}f}" + (f" ± {spread:.{digits}f}" if spread is not None else "")


def format_mean_and_count(values: Iterable[float | None], digits: int) -> str:
    """Format a figure over seeds as its mean and the number of seeds it has, e.g. ``44.7 (3)``.

    Parameters
    ----------
    values : iterable of float or None
        One value per seed; None and NaN (a figure a run did not record) are left out.
    digits : int
        Decimals of the mean.

    Returns
    -------
    str
        ``"MEAN (COUNT)"``, or ``"-"`` without values.

    Notes
    -----
    For figures whose spread the tables do not show (bucket BLEU, probe shares, attention statistics): the
    count says how many seeds the mean rests on, which a bare mean would hide.
    """
    mean, _, count = summarise(values)
    return "-" if mean is None else f"{mean:.{digits}f} ({count})"


def seed_summary_cells(found: Sequence[dict[str, Any]], reported: Mapping[str, Any]) -> list[Any]:
    """Build the cells a table shows for a variant's seeds beside the paper's figures.

    Parameters
    ----------
    found : sequence of dict
        The variant's ``results.jsonl`` records (one per seed; empty before any run finished).
    reported : mapping of str to Any
        The paper's figures for the variant (``dev_perplexity`` and ``dev_bleu`` are read when present).

    Returns
    -------
    list
        Seven cells, in this order: dev PPL, dev BLEU, params x10^6, seeds (an ``int``), minutes per run,
        the paper's PPL and the paper's BLEU; a missing figure reads as ``"-"``.

    Notes
    -----
    The paper's figures are passed through unformatted (as the plan states them), so the tables show them
    exactly as written in the plan rather than rounded to our figures' decimals.
    """
    return [
        format_metric([record["dev_perplexity"] for record in found], 2),
        format_metric([record["dev_bleu"] for record in found], 1),
        format_metric([record["params"] / 1e6 for record in found], 2),
        len(found),
        format_metric([record["train_seconds"] / 60 for record in found], 1),
        reported.get("dev_perplexity", "-"),
        reported.get("dev_bleu", "-"),
    ]


def records_by_variant(records: Iterable[dict[str, Any]]) -> defaultdict[str, list[dict[str, Any]]]:
    """Group result records by variant name, each variant's seeds in increasing order.

    Parameters
    ----------
    records : iterable of dict
        ``results.jsonl`` records (each with ``variant`` and ``seed``).

    Returns
    -------
    collections.defaultdict of str to list of dict
        Variant name -> its records; a variant without records reads as an empty list.

    Notes
    -----
    The sort is stable and by seed only, so a table or plot lists a variant's runs in seed order whatever
    order they finished in (runs may finish out of order with ``--parallel``).
    """
    grouped: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in sorted(records, key=lambda record: int(record["seed"])):
        grouped[record["variant"]].append(record)
    return grouped


def store_sentences(output_dir: Path, lines: Sequence[str]) -> str:
    """Keep a list of sentences beside the results, named by its content, and give its relative path.

    Parameters
    ----------
    output_dir : Path
        The experiment directory.
    lines : sequence of str
        One sentence per item (a run's dev hypotheses, or the references), without line ends.

    Returns
    -------
    str
        ``sentences/SHA256[:16].txt.gz``, relative to ``output_dir``, for the record.

    Raises
    ------
    ValueError
        For a sentence holding a line break.

    Notes
    -----
    Paired tests compare two runs sentence by sentence (:mod:`transformer.experiments.common.statistics`), so
    a record must point to its hypotheses, and they must stay as they were: the name is the hash of the text,
    the file is gzipped with no timestamp (the same text gives the same bytes) and written atomically, and an
    existing file is kept. A sentence holding a line break is refused: it would shift every later one.
    """
    if any("\n" in line or "\r" in line for line in lines):
        raise ValueError("a sentence holds a line break; it cannot be stored one per line")
    text = "".join(f"{line}\n" for line in lines).encode("utf-8")
    relative = f"{SENTENCES_DIR}/{hashlib.sha256(text).hexdigest()[:16]}.txt.gz"
    path = output_dir / relative
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomically(path, gzip.compress(text, mtime=0))
    return relative


def load_sentences(output_dir: Path, relative: str) -> list[str]:
    """Read sentences kept by :func:`store_sentences`, checking them against their name.

    Parameters
    ----------
    output_dir : Path
        The experiment directory.
    relative : str
        The path a record gives.

    Returns
    -------
    list of str
        The sentences.

    Raises
    ------
    ValueError
        Naming the file when its text no longer hashes to its name (edited or damaged).

    Notes
    -----
    The text is checked against the hash in its name, so a paired test never runs on sentences other than the
    ones the run produced.
    """
    path = output_dir / relative
    text = gzip.decompress(path.read_bytes())
    if not path.name.startswith(hashlib.sha256(text).hexdigest()[:16]):
        raise ValueError(f"{path}: its sentences do not match its name (edited or damaged)")
    return text.decode("utf-8").splitlines()


def keep_run_sentences(run_dir: Path, experiment_dir: Path) -> dict[str, Any]:
    """Keep a finished run's translations beside the results and give the record's keys pointing to them.

    Parameters
    ----------
    run_dir : Path
        The run directory (``runs/`` is not committed; the experiment directory is).
    experiment_dir : Path
        The experiment directory.

    Returns
    -------
    dict of str to Any
        ``dev_hypotheses`` and ``dev_references`` (when the worker wrote them) and ``sentences``: a measure
        hook's own sets, ``{"NAME.hypotheses": path, "NAME.references": path}`` (when it wrote any to
        :data:`RUN_SENTENCES_DIR`).

    Notes
    -----
    Called when the runner records a run, so every record made since issue #29 can be tested against its
    baseline sentence by sentence (:mod:`transformer.experiments.common.comparisons`).
    """
    kept: dict[str, Any] = {}
    for key, name in (("dev_hypotheses", HYPOTHESES_FILE), ("dev_references", REFERENCES_FILE)):
        if (run_dir / name).exists():
            kept[key] = store_sentences(
                experiment_dir, (run_dir / name).read_text(encoding="utf-8").splitlines()
            )
    files = sorted((run_dir / RUN_SENTENCES_DIR).glob("*.txt"))
    if files:
        kept["sentences"] = {
            path.stem: store_sentences(experiment_dir, path.read_text(encoding="utf-8").splitlines())
            for path in files
        }
    return kept
