import json
import os
import socket
from pathlib import Path

import pytest

from tests.conftest import write_tiny_config
from transformer.cli import main
from transformer.training.run_directory import claim_run_directory, create_missing_directories
from transformer.training.run_lock import LOCK_FILE, RunDirectoryInUseError


def write_live_lock(run_dir: Path) -> bytes:
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": "2025-01-31T09:00:00+00:00"}
    contents = json.dumps(holder).encode()
    (run_dir / LOCK_FILE).write_bytes(contents)
    return contents


def test_create_missing_directories_reports_only_what_it_created(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "new"
    assert create_missing_directories(run_dir) == [run_dir, tmp_path / "runs"]
    assert run_dir.is_dir()
    assert create_missing_directories(run_dir) == []


def fail_after_writing(run_dir: Path) -> None:
    with claim_run_directory(run_dir):
        (run_dir / "data").mkdir(exist_ok=True)
        (run_dir / "data" / "train.en").write_text("a\n", encoding="utf-8")
        (run_dir / "metrics.jsonl").write_text("{}\n", encoding="utf-8")
        raise ValueError("training failed")


def test_a_failed_start_removes_the_directories_it_created(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="training failed"):
        fail_after_writing(tmp_path / "runs" / "new")
    assert not list(tmp_path.iterdir())


def test_a_failed_start_in_a_directory_that_existed_removes_only_what_it_created(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n", encoding="utf-8")
    with pytest.raises(ValueError, match="training failed"):
        fail_after_writing(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine\n"


def test_a_failed_start_keeps_entries_that_existed_before_whole(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()  # e.g. written by an earlier `transformer prepare`
    (tmp_path / "data" / "valid.en").write_text("b\n", encoding="utf-8")
    with pytest.raises(ValueError, match="training failed"):
        fail_after_writing(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data"]
    assert sorted(path.name for path in (tmp_path / "data").iterdir()) == ["train.en", "valid.en"]


def test_a_failure_after_a_checkpoint_keeps_the_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(ValueError, match="after a checkpoint"), claim_run_directory(run_dir):
        (run_dir / "checkpoints").mkdir()
        (run_dir / "checkpoints" / "index.json").write_text(
            json.dumps({"latest": "step-00000004", "best": None, "checkpoints": ["step-00000004"]})
        )
        raise ValueError("after a checkpoint")
    assert sorted(path.name for path in run_dir.iterdir()) == ["checkpoints"]


def test_a_refused_claim_removes_nothing(tmp_path: Path) -> None:
    contents = write_live_lock(tmp_path)  # this test's own process: certainly running
    with pytest.raises(RunDirectoryInUseError), claim_run_directory(tmp_path):
        pytest.fail("the block must not run")
    assert [path.name for path in tmp_path.iterdir()] == [LOCK_FILE]
    assert (tmp_path / LOCK_FILE).read_bytes() == contents


def test_resume_with_nothing_to_resume_is_refused_before_anything_is_created(tmp_path: Path, capsys) -> None:
    config = write_tiny_config(tmp_path, train={"max_steps": 2})
    missing = tmp_path / "typo-run"
    assert main(["train", "--config", str(config), "--output-dir", str(missing), "--resume"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [
        f"transformer train: error: --resume: {missing} holds no checkpoint to resume (no "
        f"{missing / 'checkpoints' / 'index.json'}); drop --resume to start a new run there"
    ]
    assert not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["train", "--config", str(config), "--output-dir", str(empty), "--resume"]) == 2
    assert list(empty.iterdir()) == []
