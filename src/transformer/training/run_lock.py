"""A lock file that gives a run directory to one training process at a time.

Two ``transformer train`` processes writing one run directory would mix their checkpoints in one index. The
first takes ``run.lock`` inside it (its pid, host and start time, as JSON); a second process refuses, naming
the holder. A lock whose holder process no longer runs (killed, machine rebooted) is taken over. The lock is
created by hard-linking a completely written temporary file into place, so a reader never sees it half
written and only one of two racing processes gets it.
"""

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

LOCK_FILE = "run.lock"
#: Attempts to create the lock; each failed one removed a dead holder's lock, which a racing process may
#: have replaced with its own in between.
LOCK_ATTEMPTS = 5


class RunDirectoryInUseError(ValueError):
    """Another process holds the run directory (or its lock file is not one this program wrote).

    Notes
    -----
    A ValueError, so the CLI reports it as a one-line error like any bad argument rather than a traceback.
    The message names the holder and says which file to delete if that process is really gone.
    """


@dataclass(frozen=True)
class LockHolder:
    """The process a run lock belongs to.

    Parameters
    ----------
    pid : int
        Its process id (positive).
    host : str
        The machine it runs on (``socket.gethostname()``).
    started : str
        When it took the lock (ISO 8601, UTC), for the message a second process prints.

    Notes
    -----
    Stored as JSON in ``run.lock``; equality tells one holder from another, even after a pid is reused.
    """

    pid: int
    host: str
    started: str

    @classmethod
    def this_process(cls) -> "LockHolder":
        """Describe the calling process.

        Returns
        -------
        LockHolder
            Its pid, host name and the current time.

        Notes
        -----
        Seconds resolution is enough: the pid and host already tell live processes apart.
        """
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return cls(os.getpid(), socket.gethostname(), started)

    def describe(self) -> str:
        """Say who holds the lock, for messages.

        Returns
        -------
        str
            E.g. "process 4242 on host gpu-1 (since 2025-01-31T09:00:00+00:00)".

        Notes
        -----
        Names the pid, so a user can look the process up (``ps -p PID``).
        """
        return f"process {self.pid} on host {self.host} (since {self.started})"

    def is_running(self) -> bool:
        """Whether the holder may still run.

        Returns
        -------
        bool
            False only when it is on this machine and no process has its pid.

        Notes
        -----
        ``os.kill(pid, 0)`` sends no signal; it only checks that the process exists (PermissionError means
        it exists under another user). A holder on another machine cannot be checked and counts as running.
        """
        if self.host != socket.gethostname():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def read_lock_file(lock_path: Path) -> LockHolder | None:
    """Read the holder a lock file names.

    Parameters
    ----------
    lock_path : Path
        ``RUN_DIR/run.lock``.

    Returns
    -------
    LockHolder or None
        The holder; None when there is no lock file.

    Raises
    ------
    RunDirectoryInUseError
        Naming the file when it is not a lock this program wrote.

    Notes
    -----
    A file that is not a lock this program wrote is left alone, since removing it could break whatever wrote
    it.
    """
    try:
        values = json.loads(lock_path.read_text(encoding="utf-8"))
        holder = LockHolder(int(values["pid"]), str(values["host"]), str(values["started"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise RunDirectoryInUseError(
            f"{lock_path}: not a run lock ({error}); delete it if no run is using {lock_path.parent}"
        ) from None
    if holder.pid <= 0:  # os.kill(0 or -N) would address process groups, not one process
        raise RunDirectoryInUseError(f"{lock_path}: pid {holder.pid} is not a process id; delete the file")
    return holder


def create_lock_file(lock_path: Path, holder: LockHolder) -> bool:
    """Create the lock file unless one exists, atomically.

    Parameters
    ----------
    lock_path : Path
        ``RUN_DIR/run.lock``; its directory exists.
    holder : LockHolder
        This process.

    Returns
    -------
    bool
        True when this call created the lock; False when a lock file already existed.

    Notes
    -----
    The content is written to a temporary file first and then hard-linked to ``lock_path``: ``os.link``
    fails if the name exists, so of two racing processes exactly one succeeds, and a reader never sees an
    empty lock.
    """
    temporary = lock_path.with_name(f".{lock_path.name}.tmp-{holder.pid}")
    temporary.write_text(json.dumps(asdict(holder)) + "\n", encoding="utf-8")
    try:
        os.link(temporary, lock_path)
    except FileExistsError:
        return False
    finally:
        temporary.unlink()
    return True


def remove_dead_lock(lock_path: Path, dead_holder: LockHolder) -> None:
    """Remove the lock of a holder that no longer runs, and only that lock.

    Parameters
    ----------
    lock_path : Path
        ``RUN_DIR/run.lock``.
    dead_holder : LockHolder
        The holder read from it and found not running.

    Returns
    -------
    None

    Notes
    -----
    Another process may take the dead lock over at the same moment. The lock is therefore first renamed
    aside (one rename wins) and checked: if what was moved is a fresh lock written in between, it is linked
    back in place.
    """
    aside = lock_path.with_name(f".{lock_path.name}.dead-{os.getpid()}")
    try:
        os.replace(lock_path, aside)
    except FileNotFoundError:
        return  # another process removed it first
    try:
        if read_lock_file(aside) != dead_holder:
            os.link(aside, lock_path)  # FileExistsError: a third process locked it meanwhile; it stands
    except (RunDirectoryInUseError, FileExistsError):
        pass
    finally:
        aside.unlink()


def acquire_run_lock(run_dir: Path) -> tuple[LockHolder, LockHolder | None]:
    """Lock a run directory for this process.

    Parameters
    ----------
    run_dir : Path
        An existing run directory.

    Returns
    -------
    LockHolder
        This process, as written into the lock (needed to release it).
    LockHolder or None
        The holder whose stale lock was taken over, if any (so the caller can say so).

    Raises
    ------
    RunDirectoryInUseError
        Naming the holder's pid when a running process holds the directory.

    Notes
    -----
    A dead holder's lock is removed and creation retried, up to :data:`LOCK_ATTEMPTS` times, since a racing
    process may take the lock in between.
    """
    lock_path = run_dir / LOCK_FILE
    ours, replaced = LockHolder.this_process(), None
    for _ in range(LOCK_ATTEMPTS):
        if create_lock_file(lock_path, ours):
            return ours, replaced
        holder = read_lock_file(lock_path)
        if holder is None:
            continue  # released between the two calls
        if holder.is_running():
            raise RunDirectoryInUseError(
                f"{run_dir} is in use by {holder.describe()}; wait for it to finish or use another run "
                f"directory (if that process is gone, delete {lock_path})"
            )
        remove_dead_lock(lock_path, holder)
        replaced = holder
    raise RunDirectoryInUseError(f"{lock_path}: could not take the lock in {LOCK_ATTEMPTS} attempts")


def release_run_lock(run_dir: Path, holder: LockHolder) -> None:
    """Remove this process's lock from a run directory.

    Parameters
    ----------
    run_dir : Path
        The locked run directory.
    holder : LockHolder
        This process, as returned by :func:`acquire_run_lock`.

    Returns
    -------
    None

    Notes
    -----
    A lock that is missing or now belongs to someone else is left as it is: never remove what we did not
    write. Never raises, since it runs while an error may be on its way out.
    """
    lock_path = run_dir / LOCK_FILE
    with contextlib.suppress(RunDirectoryInUseError, OSError):
        if read_lock_file(lock_path) == holder:
            lock_path.unlink()


@contextlib.contextmanager
def hold_run_lock(run_dir: Path) -> Iterator[LockHolder | None]:
    """Hold the lock of a run directory for the duration of a ``with`` block.

    Parameters
    ----------
    run_dir : Path
        An existing run directory.

    Returns
    -------
    Iterator[LockHolder or None]
        A context manager yielding the dead holder whose lock was taken over, if any.

    Notes
    -----
    Released when the block ends, also on an exception or KeyboardInterrupt. A process killed outright
    (SIGKILL) leaves its lock behind; the next run finds its pid gone and takes the lock over.
    """
    ours, replaced = acquire_run_lock(run_dir)
    try:
        yield replaced
    finally:
        release_run_lock(run_dir, ours)
