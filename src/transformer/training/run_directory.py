"""Claim a run directory for a training run: lock it, and leave no debris if the run fails at the start.

A run that fails before its first checkpoint leaves nothing worth resuming; if it also created the run
directory, the directory is removed again, so a retry starts clean and ``ls runs/`` shows only real runs.
The lock itself is :mod:`transformer.training.run_lock`.
"""

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from transformer.checkpoint.layout import CheckpointError, read_index
from transformer.training.run_lock import LOCK_FILE, LockHolder, hold_run_lock


def create_missing_directories(path: Path) -> list[Path]:
    """Create a directory and its missing parents, telling which ones this call created.

    Parameters
    ----------
    path : Path
        The directory to create.

    Returns
    -------
    list of Path
        The directories created here, deepest first (empty when ``path`` existed).

    Notes
    -----
    A directory that another process creates at the same moment is not counted: only a successful
    ``mkdir`` of this call is.
    """
    created: list[Path] = []
    for directory in [*reversed(path.parents), path]:
        if directory.is_dir():
            continue
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        created.insert(0, directory)
    return created


def holds_checkpoint(run_dir: Path) -> bool:
    """Whether a run directory holds a training checkpoint.

    Parameters
    ----------
    run_dir : Path
        A run directory.

    Returns
    -------
    bool
        True when ``checkpoints/index.json`` names a latest checkpoint, or cannot be read.

    Notes
    -----
    An unreadable index counts as holding one, so the caller keeps the directory for a person to look at.
    """
    try:
        return read_index(run_dir / "checkpoints").get("latest") is not None
    except CheckpointError:
        return True


def remove_failed_start(run_dir: Path, existing: set[str]) -> None:
    """Remove what a run that failed before its first checkpoint created, keeping its lock file.

    Parameters
    ----------
    run_dir : Path
        The run directory, locked by this process.
    existing : set of str
        Names of the entries ``run_dir`` held before the run started (empty when the run created it).

    Returns
    -------
    None

    Notes
    -----
    Only when no checkpoint exists, and only the entries that were not there before: the data and
    vocabulary a failed run generated inside a folder the user made go, the user's own files stay (a run
    being resumed has a checkpoint and is never touched). The comparison is by top-level name, so files a
    failed run added inside a folder that existed before (a ``data/`` made by ``prepare``) stay too. The
    lock file stays until released. Runs while the run's own error is on its way out, so a file that cannot
    be removed is left rather than raising over that error.
    """
    if holds_checkpoint(run_dir):
        return
    for entry in run_dir.iterdir():
        if entry.name == LOCK_FILE or entry.name in existing:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()


def remove_empty_directories(directories: list[Path]) -> None:
    """Remove the given directories that are empty, deepest first.

    Parameters
    ----------
    directories : list of Path
        Directories this process created, deepest first.

    Returns
    -------
    None

    Notes
    -----
    ``os.rmdir`` removes only empty directories, so whatever another process put there meanwhile stays.
    """
    for directory in directories:
        try:
            directory.rmdir()
        except OSError:
            return  # not empty (or gone): its parents are not empty either


@contextlib.contextmanager
def claim_run_directory(run_dir: Path) -> Iterator[LockHolder | None]:
    """Create and lock a run directory for a training run; undo the creation if the run fails early.

    Parameters
    ----------
    run_dir : Path
        The run directory; it and its parents are created if missing.

    Returns
    -------
    Iterator[LockHolder or None]
        A context manager yielding the dead holder whose stale lock was taken over, if any.

    Raises
    ------
    RunDirectoryInUseError
        When a running process holds the directory.

    Notes
    -----
    When the block raises (KeyboardInterrupt included) before any checkpoint exists, what the run created is
    removed again: the directories this call created, and inside a directory that existed only the entries it
    did not hold before; see :func:`remove_failed_start`.
    """
    created = create_missing_directories(run_dir)
    try:
        with hold_run_lock(run_dir) as replaced:
            # Listed once the lock is held, so no other run of this directory is adding to it meanwhile.
            existing = {entry.name for entry in run_dir.iterdir()} - {LOCK_FILE}
            try:
                yield replaced
            except BaseException:
                remove_failed_start(run_dir, existing)
                raise
    except BaseException:
        remove_empty_directories(created)
        raise
