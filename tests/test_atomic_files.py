"""The one writer every file and directory of the package goes through."""

import errno
import os
import stat
from pathlib import Path

import pytest

from transformer import atomic_files
from transformer.atomic_files import (
    atomic_write,
    staged_directory,
    write_bytes_atomically,
    write_json_atomically,
    write_text_atomically,
)


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_replace_atomically_with_a_plain_mode_and_leave_nothing_behind(
    tmp_path: Path, umask_022
) -> None:
    target = tmp_path / "sub" / "out.txt"
    write_text_atomically(target, "first\r\n")
    write_bytes_atomically(target, b"second\n")
    assert target.read_bytes() == b"second\n"
    assert mode(target) == 0o644  # not tempfile.mkstemp's 0600, which would outlive the rename
    write_json_atomically(tmp_path / "values.json", {"a": [1, 2]})
    assert (tmp_path / "values.json").read_text(encoding="utf-8") == '{\n "a": [\n  1,\n  2\n ]\n}'
    with atomic_write(target, "w") as handle:
        handle.write("line\n")
    assert target.read_bytes() == b"line\n"  # newlines as given, on every platform
    assert sorted(os.listdir(tmp_path)) == ["sub", "values.json"] and os.listdir(target.parent) == ["out.txt"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write_text_atomically(target, "kept")
    with pytest.raises(RuntimeError, match="disk full"), atomic_write(target, "wb") as handle:
        handle.write(b"partial")
        raise RuntimeError("disk full")
    with pytest.raises(TypeError):
        write_json_atomically(target, {"not serialisable": object()})
    with pytest.raises(UnicodeEncodeError):
        write_text_atomically(target, "lone surrogate \ud800")
    assert target.read_text() == "kept" and os.listdir(tmp_path) == ["out.txt"]
    with pytest.raises(ValueError, match="mode must be 'wb' or 'w'"), atomic_write(target, "a"):
        pass


def test_a_staged_directory_replaces_the_old_one_whole(tmp_path: Path, umask_022) -> None:
    destination = tmp_path / "checkpoint"
    with staged_directory(destination) as staging:
        (staging / "model.bin").write_bytes(b"old")
        (staging / "stale.txt").write_text("only in the old one")
    with staged_directory(destination) as staging:
        assert staging.parent == tmp_path and staging.name.startswith(".checkpoint.")
        (staging / "model.bin").write_bytes(b"new")
        os.chmod(staging / "model.bin", 0o600)  # as safetensors leaves its files
    assert sorted(os.listdir(destination)) == ["model.bin"]
    assert (destination / "model.bin").read_bytes() == b"new" and mode(destination / "model.bin") == 0o644
    assert os.listdir(tmp_path) == ["checkpoint"]


def test_a_failed_staged_directory_leaves_the_old_one(tmp_path: Path) -> None:
    destination = tmp_path / "checkpoint"
    with staged_directory(destination) as staging:
        (staging / "model.bin").write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt), staged_directory(destination) as staging:
        (staging / "model.bin").write_bytes(b"half")
        raise KeyboardInterrupt
    assert (destination / "model.bin").read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["checkpoint"]


def test_an_unwritable_destination_is_named_not_its_temporary_file(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "out.txt"
    write_text_atomically(target, "kept")
    # An unwritable folder (chmod does not stop root, so the temporary file is made to fail directly).
    unwritable = tmp_path / "missing-folder" / ".out.tmp-0123456789ab.txt"
    monkeypatch.setattr(atomic_files, "temporary_sibling", lambda path, kind="tmp": unwritable)
    for write in (lambda: write_text_atomically(target, "new"), lambda: staged_directory(target).__enter__()):
        with pytest.raises(FileNotFoundError) as refused:
            write()
        assert str(refused.value) == f"cannot write {target}: No such file or directory"
        assert refused.value.errno == errno.ENOENT
    assert target.read_text() == "kept" and os.listdir(tmp_path) == ["out.txt"]


def test_a_folder_in_the_way_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("kept")
    with pytest.raises(OSError) as refused:
        write_text_atomically(tmp_path / "a-file" / "out.txt", "new")
    assert (
        str(refused.value)
        == f"cannot write {tmp_path / 'a-file' / 'out.txt'}: {tmp_path / 'a-file'} is a file, not a folder"
    )
    assert (tmp_path / "a-file").read_text() == "kept"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_named_with_the_file_asked_for(tmp_path: Path) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(PermissionError) as refused:
            write_text_atomically(folder / "out.txt", "new")
    finally:
        folder.chmod(0o755)
    assert str(refused.value) == f"cannot write {folder / 'out.txt'}: Permission denied"
