"""What every benchmark section shares: timing with medians, interleaved comparisons, section records.

Every figure the suite reports is the median of several timed repeats, and every comparison is measured in
the same process, in interleaved rounds (A, B, A, B, ...): slow drift of a shared machine then hits both
sides of a ratio alike instead of whichever happened to run last.
"""

import gc
import importlib
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Timing:
    """Wall-clock seconds of the repeats of one measurement.

    Parameters
    ----------
    samples : list of float
        Seconds per repeat, in the order they were taken (warm-up excluded).

    Notes
    -----
    ``spread`` is (max - min) / median: a quick read of how noisy the machine was.
    """

    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        return (max(self.samples) - min(self.samples)) / self.median if self.median > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "median_seconds": self.median,
            "spread": self.spread,
            "repeats": len(self.samples),
            "samples_seconds": self.samples,
        }


def time_interleaved(
    candidates: dict[str, Callable[[], object]], warmup: int, repeats: int
) -> dict[str, Timing]:
    """Time several callables in interleaved rounds after warming each one up.

    Parameters
    ----------
    candidates : dict of str to callable
        Name to a zero-argument callable doing one unit of work (one training step, one translation pass).
    warmup : int
        Untimed calls of each candidate first (allocator pools, oneDNN kernels, lazy initialisation).
    repeats : int
        Timed rounds; each round calls every candidate once, in insertion order.

    Returns
    -------
    dict of str to Timing
        One timing per candidate.

    Notes
    -----
    The garbage collector is run before, and disabled during, each timed call so that a collection of
    another candidate's garbage is not charged to this one.
    """
    for _ in range(warmup):
        for run in candidates.values():
            run()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, run in candidates.items():
            samples[name].append(time_once(run))
    return {name: Timing(values) for name, values in samples.items()}


def time_once(run: Callable[[], object]) -> float:
    """Time one call with the garbage collector out of the way; return seconds."""
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        run()
        return time.perf_counter() - started
    finally:
        gc.enable()


@dataclass
class Section:
    """The record of one benchmark section, as it goes into the JSON report.

    Parameters
    ----------
    name : str
        Section key ("matmul", "training", ...).
    title : str
        Heading in the Markdown report.
    method : str
        How the figures were measured, in one paragraph (it goes into both reports).
    status : str
        "ok", "skipped" (nothing to measure, e.g. no ``--run``) or "failed" (an exception; see ``error``).
    rows : list of dict
        One record per measurement.
    skipped : list of dict
        ``{"system": ..., "reason": ...}`` for each comparison that could not run here.
    notes : list of str
        Extra lines for the report (settings, verdicts).
    summary : dict
        Headline figures other sections or readers need (peaks, growth exponents).
    error : str or None
        The traceback when the section failed.

    Notes
    -----
    A failed section does not stop the suite; ``run.py`` exits non-zero at the end instead.
    """

    name: str
    title: str
    method: str = ""
    status: str = "ok"
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def skip(self, system: str, reason: str) -> None:
        self.skipped.append({"system": system, "reason": reason})

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "status": self.status,
            "method": self.method,
            "rows": self.rows,
            "skipped": self.skipped,
            "notes": self.notes,
            "summary": self.summary,
            "error": self.error,
        }


def run_section(section: Section, body: Callable[[Section], None]) -> Section:
    """Fill a section by calling ``body``; record an exception as a failed section instead of raising.

    Parameters
    ----------
    section : Section
        The empty record (name, title).
    body : callable
        Measures and appends rows, skips and notes to the section.

    Returns
    -------
    Section
        The same record, with status "failed" and the traceback if ``body`` raised.

    Notes
    -----
    KeyboardInterrupt is not caught: Ctrl-C stops the suite.
    """
    try:
        body(section)
    except Exception:
        section.status = "failed"
        section.error = traceback.format_exc()
    return section


def describe_import_failure(module: str) -> str | None:
    """Try to import an optional module; return why it failed, or None when it imports.

    Parameters
    ----------
    module : str
        Dotted module name.

    Returns
    -------
    str or None
        "module X is not importable: <error>" or None.

    Notes
    -----
    Used to skip optional comparisons (HF, CTranslate2, fairseq, OpenNMT-py) with a recorded reason.
    """
    try:
        importlib.import_module(module)
    except Exception as error:
        return f"`{module}` is not importable here ({type(error).__name__}: {error})"
    return None
