"""The record of a distillation run: what it distils (its identity) and which stages have finished.

``distill.json`` in the run's folder is written by rank 0 only, atomically, after each stage. A rerun of the
same command reads it and skips what finished; a rerun with another teacher, other training sources or another
student config is refused, naming the first value that differs, because mixing two runs' outputs in one folder
would train a student on translations of a teacher it does not name.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformer.atomic_files import write_json_atomically

#: The record's name inside the run's folder.
STATE_FILE = "distill.json"
#: Settings of the ``distill`` section that only the stages after training read: changing them reruns those
#: stages instead of refusing the folder.
JUDGING_SETTINGS = ("average_last", "student_beam_size", "student_precision", "student_shortlist")


@dataclass
class DistillState:
    """The record of one distillation run, as read from and written to its ``distill.json``.

    Parameters
    ----------
    path : Path
        The record file.
    identity : dict of str to Any
        What the run distils: teachers (paths and weight digests), training sources, the student's config.
    stages : dict of str to dict
        Each finished stage's record (its seconds, counts, scores), by stage name.

    Notes
    -----
    Built by :func:`open_distill_state`. Every :meth:`finish` rewrites the whole file through a temporary
    file and a rename, so a kill leaves the previous record or the new one.
    """

    path: Path
    identity: dict[str, Any]
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)

    def finished(self, stage: str, settings: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Return the record of a finished stage, or None when it has to run (again).

        Parameters
        ----------
        stage : str
            The stage's name.
        settings : dict of str to Any or None
            The settings the stage would run with now; a record made with other settings counts as
            unfinished.

        Returns
        -------
        dict of str to Any or None
            The stage's record.

        Notes
        -----
        The judging stages (average, shortlist, evaluation) pass their settings, so changing, say, the
        student's beam reruns the evaluation and keeps the trained student.
        """
        record = self.stages.get(stage)
        if record is None or (settings is not None and record.get("settings") != settings):
            return None
        return record

    def finish(self, stage: str, record: dict[str, Any]) -> None:
        """Record a stage as finished and write the file.

        Parameters
        ----------
        stage : str
            The stage's name.
        record : dict of str to Any
            What it did (JSON values).

        Returns
        -------
        None

        Notes
        -----
        A stage that reruns replaces its own record; the stages after it are forgotten, since they were
        made from what it replaced.
        """
        names = list(self.stages)
        if stage in names:
            for later in names[names.index(stage) :]:
                del self.stages[later]
        self.stages[stage] = record
        write_json_atomically(self.path, {"identity": self.identity, "stages": self.stages})


def open_distill_state(output_dir: Path, identity: dict[str, Any]) -> DistillState:
    """Start the record of a new run, or read the record of the same run to resume it.

    Parameters
    ----------
    output_dir : Path
        The run's folder (``--output-dir``): missing, empty, or an earlier run of the same distillation.
    identity : dict of str to Any
        What this run distils (:func:`distill_identity`).

    Returns
    -------
    DistillState
        The record (written at once for a new run).

    Raises
    ------
    ValueError
        Naming ``--output-dir`` when it holds an earlier run whose identity differs (naming the first
        differing value, old and new), or an unreadable record.

    Notes
    -----
    Call :func:`check_distill_output` first, before anything is written into the folder (the lock, the
    built-in corpus): a folder holding anything but a record must be refused rather than filled, since the
    run writes and replaces files in it.
    """
    path = output_dir / STATE_FILE
    if path.is_file():
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
            recorded_identity, stages = recorded["identity"], dict(recorded["stages"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"{path}: not a readable distill record ({error})") from None
        if recorded_identity is None:  # a run that stopped before it knew what it distils: start it afresh
            state = DistillState(path, identity)
            write_json_atomically(path, {"identity": identity, "stages": {}})
            return state
        difference = first_difference(recorded_identity, identity)
        if difference is not None:
            raise ValueError(
                f"--output-dir {output_dir}: holds a distill run of another {difference}; choose a new "
                "directory, or rerun with what it was started with"
            )
        return DistillState(path, identity, stages)
    output_dir.mkdir(parents=True, exist_ok=True)
    state = DistillState(path, identity)
    write_json_atomically(path, {"identity": identity, "stages": {}})
    return state


def check_distill_output(output_dir: Path) -> None:
    """Refuse an ``--output-dir`` that is neither new, empty, nor an earlier distill run.

    Parameters
    ----------
    output_dir : Path
        The run's folder.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming ``--output-dir`` when it is a file, or a folder with files but no :data:`STATE_FILE`.

    Notes
    -----
    Called before anything is written there (the built-in corpus is generated into the folder), so a typo
    naming a user's own directory costs nothing.
    """
    if output_dir.exists() and not output_dir.is_dir():
        raise ValueError(f"--output-dir {output_dir}: is a file; expected a directory")
    if output_dir.is_dir() and any(output_dir.iterdir()) and not (output_dir / STATE_FILE).is_file():
        raise ValueError(
            f"--output-dir {output_dir}: exists and holds no {STATE_FILE} of an earlier distill run; "
            "choose a new directory"
        )


def claim_distill_output(output_dir: Path) -> None:
    """Mark a new run's folder as a distill run's before anything else is written there.

    Parameters
    ----------
    output_dir : Path
        The run's folder, already checked by :func:`check_distill_output` and existing.

    Returns
    -------
    None

    Notes
    -----
    Writes a record with no identity yet (``null``) when there is none. The identity needs the teachers
    and the corpus, and fetching the corpus writes into the folder; a run that fails or is killed before
    its identity is known would otherwise leave a folder that the next run refuses as not its own.
    :func:`open_distill_state` fills the identity in.
    """
    path = output_dir / STATE_FILE
    if not path.exists():
        write_json_atomically(path, {"identity": None, "stages": {}})


def read_distill_state(output_dir: Path, option: str) -> DistillState:
    """Read a run's record without changing it.

    Parameters
    ----------
    output_dir : Path
        A distill run's folder.
    option : str
        The option that named it, for the error.

    Returns
    -------
    DistillState
        Its record.

    Raises
    ------
    ValueError
        Naming the option and folder when it holds no readable :data:`STATE_FILE`.

    Notes
    -----
    Used for another run's folder (``--reuse-teacher-pass``): the state returned must not be finished
    into, since the file is that run's.
    """
    path = output_dir / STATE_FILE
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        return DistillState(path, dict(recorded["identity"] or {}), dict(recorded["stages"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise ValueError(f"{option} {output_dir}: no readable {STATE_FILE} of a distill run") from None


def first_difference(old: Any, new: Any, where: str = "") -> str | None:
    """Describe the first value that differs between two JSON-like records.

    Parameters
    ----------
    old, new : Any
        The recorded and the current values (dicts, lists, scalars).
    where : str
        The dotted key path of ``old`` and ``new`` (empty at the top).

    Returns
    -------
    str or None
        ``"KEY (was OLD, now NEW)"``, or None when they are equal.

    Notes
    -----
    Keys are visited in the new record's order, then keys only the old one has, so the message names the
    setting a user is most likely to have changed rather than a digest derived from it.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*new, *(key for key in old if key not in new)]:
            found = first_difference(old.get(key), new.get(key), f"{where}.{key}" if where else str(key))
            if found is not None:
                return found
        return None
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (old_item, new_item) in enumerate(zip(old, new, strict=True)):
            found = first_difference(old_item, new_item, f"{where}[{index}]")
            if found is not None:
                return found
        return None
    if old == new:
        return None
    return f"{where or 'record'} (was {json.dumps(old)}, now {json.dumps(new)})"
