"""A JSON file of probe answers, keyed by machine, probe and shape, in the user's cache directory."""

import json
import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from transformer.atomic_files import write_text_atomically

CACHE_FILE = "autotune.json"
CACHE_FORMAT_VERSION = 1


class ProbeCache:
    """Remember what a probe measured so that it runs once per machine and shape.

    Parameters
    ----------
    path : Path
        The JSON file (created on the first :meth:`store`).

    Notes
    -----
    An unreadable or garbled file is treated as empty (and replaced on the next store): a cache must never
    stop a run. Entries keep the machine description and the measured times beside the decision, so the file
    explains itself; delete it to measure again (for example after a machine was measured while busy).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def _entries(self) -> dict[str, Any]:
        try:
            content = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(content, dict) or content.get("version") != CACHE_FORMAT_VERSION:
            return {}
        entries = content.get("entries")
        return entries if isinstance(entries, dict) else {}

    def lookup(self, key: str) -> dict[str, Any] | None:
        """Return the stored answer for a key.

        Parameters
        ----------
        key : str
            From :func:`transformer.autotune.machine.fingerprint_key`.

        Returns
        -------
        dict of str to Any or None
            The stored ``result`` record, or None if absent.

        Notes
        -----
        Reads the file on every call: probes run a few times per process at most.
        """
        entry = self._entries().get(key)
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), dict):
            return None
        result: dict[str, Any] = entry["result"]
        return result

    def store(self, key: str, machine: dict[str, object], result: dict[str, Any]) -> None:
        """Add or replace one answer.

        Parameters
        ----------
        key : str
            The entry's key.
        machine : dict of str to object
            The fingerprint the answer holds for (kept for people reading the file).
        result : dict of str to Any
            JSON-serialisable decision and measurements.

        Returns
        -------
        None

        Notes
        -----
        Read-modify-write through an atomic rename: a concurrent writer may drop another's fresh entry (it
        is measured again next time), but the file is never half-written. A read-only cache directory is
        silently skipped: the answer is still used for this run.
        """
        entries = self._entries()
        entries[key] = {
            "machine": machine,
            "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "result": result,
        }
        text = json.dumps({"version": CACHE_FORMAT_VERSION, "entries": entries}, indent=1, sort_keys=True)
        try:
            write_text_atomically(self.path, text + "\n")
        except OSError:
            return

    def lookup_or_measure(
        self, key: str, machine: dict[str, object], measure: Callable[[], dict[str, Any]]
    ) -> tuple[dict[str, Any], str]:
        """Return the stored answer, or measure, store and return a new one.

        Parameters
        ----------
        key : str
            The entry's key.
        machine : dict of str to object
            The fingerprint, stored beside a new answer.
        measure : callable
            Runs the probe and returns its JSON-serialisable result.

        Returns
        -------
        result : dict of str to Any
            The answer.
        provenance : str
            " (cached)", "" for a fresh measurement, or a note that a measurement taken on a busy machine
            was not stored.

        Notes
        -----
        A measurement taken while other work kept the CPUs busy (one-minute load average above the usable
        CPUs minus a half) is used for this run but not stored: a decision made under load, such as one
        thread, would otherwise stick to the machine after the load is gone.
        """
        stored = self.lookup(key)
        if stored is not None:
            return stored, " (cached)"
        result = measure()
        load, usable = busy_load()
        if load is not None:
            return result, f" (not cached: load {load:.1f} on {usable} CPUs while measuring)"
        self.store(key, machine, result)
        return result, ""


def busy_load(usable: int | None = None) -> tuple[float | None, int]:
    """Tell whether other work is keeping the CPUs busy.

    Parameters
    ----------
    usable : int or None
        CPUs available to this process (default: its affinity mask).

    Returns
    -------
    load : float or None
        The one-minute load average if it exceeds ``usable - 0.5``, else None.
    usable : int
        The CPU count compared against.

    Notes
    -----
    This process's own single-threaded work (data preparation before the probe) adds up to 1 to the load,
    hence the margin of half a CPU below the count rather than a low fixed threshold.
    """
    if usable is None:
        affinity = getattr(os, "sched_getaffinity", None)
        usable = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return None, usable
    return (load if load > usable - 0.5 else None), usable
