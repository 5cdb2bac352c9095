"""The quality-speed benchmark's JSON record: its machine, settings, runs, rows, skips and shortlist coverage.

A record is resumable: rows are keyed by (system, search, threads, mode, repeat), written atomically as each
finishes, and a rerun with the same file skips the rows it holds. It belongs to one machine: a rerun whose CPU
(model and vector flags) or settings differ is refused, naming what differs, since its seconds would not compare
with those already there.
"""

import json
from pathlib import Path
from typing import Any

from benchmarks.pareto_systems import System
from transformer.atomic_files import write_json_atomically

#: A row's key: system name, search label, thread count, mode and repeat index.
RowKey = tuple[str, str, int, str, int]


class ParetoRecord:
    """The record of one benchmark file, loaded or new.

    Parameters
    ----------
    path : pathlib.Path
        The JSON file.
    data : dict
        Its content: ``environment``, ``settings``, ``runs``, ``rows``, ``skipped``, ``coverage``.

    Notes
    -----
    Build it with :meth:`open`, which also appends this run to ``runs``.
    """

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def open(cls, path: Path, environment: dict[str, Any], settings: dict[str, Any]) -> "ParetoRecord":
        """Load the record at ``path`` (or start one) and add this run to it.

        Parameters
        ----------
        path : pathlib.Path
            The JSON file; its folder is created.
        environment : dict
            :func:`benchmarks.bench_environment.describe_environment` of this run.
        settings : dict
            The settings every run of the file shares.

        Returns
        -------
        ParetoRecord
            Ready to add rows to.

        Raises
        ------
        SystemExit
            One line naming the file, when it is not a record of this benchmark, or was measured on another CPU
            or with other settings.

        Notes
        -----
        The run (command, date, commit, CPU) is written at once, so even a run stopped before its first row
        is on record.
        """
        path = path.absolute()
        data: dict[str, Any] = {"environment": environment, "settings": settings, "runs": [], "rows": []}
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                stored_cpu = data["environment"]["cpu"]["summary"]
                stored_settings = data["settings"]
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise SystemExit(
                    f"{path}: not a record of benchmarks.pareto ({error}); choose another --output"
                ) from None
            if stored_cpu != environment["cpu"]["summary"]:
                raise SystemExit(
                    f"{path}: measured on {stored_cpu}, this machine is {environment['cpu']['summary']}; "
                    "use another --output for this machine"
                )
            if stored_settings != settings:
                differing = sorted(key for key in settings if stored_settings.get(key) != settings[key])
                raise SystemExit(
                    f"{path}: recorded with other settings ({', '.join(differing)}); use another --output"
                )
        data.setdefault("skipped", {})
        data.setdefault("coverage", None)
        data.setdefault("student_coverage", None)
        run = {key: environment[key] for key in ("command", "date_utc", "git_commit", "torch", "allocator")}
        data["runs"].append(run)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = cls(path, data)
        record.save()
        return record

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Every measured row.

        Returns
        -------
        list of dict
            Each with ``system``, ``engine``, ``precision``, ``shortlist``, ``search``, ``threads``, ``mode``,
            ``repeat``, ``run`` and its measurements.

        Notes
        -----
        The list is the record's own: appending to it changes the record.
        """
        rows: list[dict[str, Any]] = self.data["rows"]
        return rows

    @property
    def coverage(self) -> dict[str, Any] | None:
        """The shortlist's step coverage, once measured.

        Returns
        -------
        dict or None
            ``steps``, ``covered``, ``fraction``, ``mean_shortlist_size``, ``vocabulary``.

        Notes
        -----
        None before it was measured, and for a checkpoint without a shortlist.
        """
        coverage: dict[str, Any] | None = self.data["coverage"]
        return coverage

    @property
    def markdown_path(self) -> Path:
        """The Markdown report beside the record.

        Returns
        -------
        pathlib.Path
            ``<record>.md``.

        Notes
        -----
        Rewritten after every row.
        """
        return self.path.with_suffix(".md")

    @property
    def plot_path(self) -> Path:
        """The PNG of the front beside the record.

        Returns
        -------
        pathlib.Path
            ``<record>.png``.

        Notes
        -----
        Rewritten after every row.
        """
        return self.path.with_suffix(".png")

    def has(self, key: RowKey) -> bool:
        """Whether a row with this key is on record.

        Parameters
        ----------
        key : tuple
            (system, search, threads, mode, repeat).

        Returns
        -------
        bool
            True when a rerun should skip it.

        Notes
        -----
        A linear scan: a record holds a few hundred rows at most.
        """
        return any(_key_of(row) == key for row in self.rows)

    def add(self, key: RowKey, system: System, measured: dict[str, Any]) -> None:
        """Append a measured row and save the record.

        Parameters
        ----------
        key : tuple
            (system, search, threads, mode, repeat).
        system : System
            The system measured.
        measured : dict
            Its measurements.

        Returns
        -------
        None

        Notes
        -----
        The row names this run (the last of ``runs``).
        """
        name, search, threads, mode, repeat = key
        row: dict[str, Any] = {"system": name, "engine": system.engine, "precision": system.precision}
        row |= {"shortlist": system.shortlist, "search": search, "threads": threads, "mode": mode}
        row |= {"repeat": repeat, "run": len(self.data["runs"]) - 1, **measured}
        self.rows.append(row)
        self.save()

    def note_skipped(self, skipped: dict[str, str]) -> None:
        """Record the systems this run could not build, with the reason.

        Parameters
        ----------
        skipped : dict of str to str
            System name -> reason.

        Returns
        -------
        None

        Notes
        -----
        A system skipped by one run and measured by another keeps its rows; the report shows both.
        """
        self.data["skipped"].update(skipped)
        self.save()

    def set_coverage(self, coverage: dict[str, Any] | None, of_student: bool = False) -> None:
        """Record the shortlist's step coverage, of the checkpoint or of the student.

        Parameters
        ----------
        coverage : dict or None
            See :attr:`coverage`.
        of_student : bool
            The ``--student``'s own shortlist (kept as ``student_coverage``) rather than the checkpoint's.

        Returns
        -------
        None

        Notes
        -----
        Measured once per record.
        """
        self.data["student_coverage" if of_student else "coverage"] = coverage
        self.save()

    def describe(self, key: RowKey) -> str:
        """One line for the row with this key, as the run prints it.

        Parameters
        ----------
        key : tuple
            (system, search, threads, mode, repeat).

        Returns
        -------
        str
            E.g. ``ours int8 | beam 4 | 2 threads | throughput: 41.3 sentences/s, BLEU 38.2``.

        Notes
        -----
        The row must be on record.
        """
        row = next(row for row in self.rows if _key_of(row) == key)
        head = f"{row['system']} | {row['search']} | {row['threads']} threads | {row['mode']}"
        if row["mode"] == "throughput":
            return f"{head}: {row['sentences_per_second']:.1f} sentences/s, BLEU {row['bleu']:.2f}"
        return f"{head}: p50 {row['p50_ms']:.1f} ms, p90 {row['p90_ms']:.1f} ms"

    def save(self) -> None:
        """Write the record atomically.

        Parameters
        ----------
        None

        Returns
        -------
        None

        Notes
        -----
        A temporary sibling renamed over the file, so a stopped run never leaves half a record.
        """
        write_json_atomically(self.path, self.data)


def _key_of(row: dict[str, Any]) -> RowKey:
    """The key of a stored row."""
    return (row["system"], row["search"], int(row["threads"]), row["mode"], int(row["repeat"]))
