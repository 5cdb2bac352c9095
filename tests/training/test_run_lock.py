import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from transformer.training.run_lock import (
    LOCK_FILE,
    LockHolder,
    RunDirectoryInUseError,
    acquire_run_lock,
    hold_run_lock,
    release_run_lock,
)

HOST = socket.gethostname()


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped), so no process has it."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return int(finished.stdout)


def write_lock(run_dir: Path, pid: int, host: str = HOST) -> bytes:
    contents = json.dumps({"pid": pid, "host": host, "started": "2025-01-31T09:00:00+00:00"}).encode()
    (run_dir / LOCK_FILE).write_bytes(contents)
    return contents


def read_lock(run_dir: Path) -> dict:
    return json.loads((run_dir / LOCK_FILE).read_text(encoding="utf-8"))


def test_the_lock_names_this_process_while_held_and_is_removed_after(tmp_path: Path) -> None:
    with hold_run_lock(tmp_path) as replaced:
        assert replaced is None
        lock = read_lock(tmp_path)
        assert (lock["pid"], lock["host"]) == (os.getpid(), HOST)
        assert sorted(path.name for path in tmp_path.iterdir()) == [LOCK_FILE]  # no temporary file left
    assert not list(tmp_path.iterdir())


def test_the_lock_is_released_when_the_block_raises(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), hold_run_lock(tmp_path):
        raise KeyboardInterrupt
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_live_holder_is_refused_by_pid_and_its_lock_kept(tmp_path: Path) -> None:
    contents = write_lock(tmp_path, os.getpid())  # this test's own process: certainly running
    with pytest.raises(RunDirectoryInUseError) as refusal:
        acquire_run_lock(tmp_path)
    assert str(refusal.value) == (
        f"{tmp_path} is in use by process {os.getpid()} on host {HOST} (since 2025-01-31T09:00:00+00:00); "
        f"wait for it to finish or use another run directory (if that process is gone, delete "
        f"{tmp_path / LOCK_FILE})"
    )
    assert (tmp_path / LOCK_FILE).read_bytes() == contents


def test_a_dead_holders_lock_is_taken_over(tmp_path: Path) -> None:
    pid = dead_pid()
    write_lock(tmp_path, pid)
    with hold_run_lock(tmp_path) as replaced:
        assert replaced == LockHolder(pid, HOST, "2025-01-31T09:00:00+00:00")
        assert read_lock(tmp_path)["pid"] == os.getpid()
    assert not list(tmp_path.iterdir())


def test_a_holder_on_another_machine_counts_as_running(tmp_path: Path) -> None:
    contents = write_lock(tmp_path, dead_pid(), host=f"not-{HOST}")
    with pytest.raises(RunDirectoryInUseError, match=f"in use by process [0-9]+ on host not-{HOST}"):
        acquire_run_lock(tmp_path)
    assert (tmp_path / LOCK_FILE).read_bytes() == contents


@pytest.mark.parametrize(
    "contents", [b"", b"not json", b'{"pid": "x"}', b'{"pid": 0, "host": "h", "started": ""}']
)
def test_a_lock_file_this_program_did_not_write_is_left_alone(tmp_path: Path, contents: bytes) -> None:
    (tmp_path / LOCK_FILE).write_bytes(contents)
    with pytest.raises(RunDirectoryInUseError, match=f"{tmp_path / LOCK_FILE}: .*delete"):
        acquire_run_lock(tmp_path)
    assert (tmp_path / LOCK_FILE).read_bytes() == contents


def test_release_leaves_a_lock_that_is_not_ours(tmp_path: Path) -> None:
    ours, _ = acquire_run_lock(tmp_path)
    contents = write_lock(tmp_path, os.getpid() + 1)  # someone replaced it (by hand, say)
    release_run_lock(tmp_path, ours)
    assert (tmp_path / LOCK_FILE).read_bytes() == contents


def test_a_second_process_is_refused_until_the_first_ends(tmp_path: Path) -> None:
    holder_code = (
        "import sys; from pathlib import Path; "
        "from transformer.training.run_lock import hold_run_lock\n"
        "with hold_run_lock(Path(sys.argv[1])):\n"
        "    print('locked', flush=True); sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", holder_code, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(RunDirectoryInUseError, match=f"in use by process {holder.pid} on host"):
            acquire_run_lock(tmp_path)
    finally:
        holder.communicate("")  # closes its standard input: it releases the lock and exits
    assert holder.returncode == 0 and not (tmp_path / LOCK_FILE).exists()
    with hold_run_lock(tmp_path) as replaced:
        assert replaced is None
