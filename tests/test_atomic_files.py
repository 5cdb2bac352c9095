"""The one writer every file and directory of the package goes through."""

import errno
import os
import stat
import threading
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
    folder = tmp_path / "out-folder"
    for destination, write in (
        (target, lambda: write_text_atomically(target, "new")),
        (folder, lambda: staged_directory(folder).__enter__()),
    ):
        with pytest.raises(FileNotFoundError) as refused:
            write()
        assert str(refused.value) == f"cannot write {destination}: No such file or directory"
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


# --- #48 item 2: what is not a regular file is written straight or through, never replaced ---


def test_a_symbolic_link_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "out.de").write_text("old\n")
    link = tmp_path / "out.de"
    link.symlink_to("real/out.de")
    write_text_atomically(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == "real/out.de"  # was replaced by a regular file
    assert (tmp_path / "real" / "out.de").read_text() == "new\n"
    assert sorted(os.listdir(tmp_path / "real")) == ["out.de"] and sorted(os.listdir(tmp_path)) == [
        "out.de",
        "real",
    ]
    dangling = tmp_path / "new.de"
    dangling.symlink_to("real/made.de")
    write_text_atomically(dangling, "made\n")
    assert dangling.is_symlink() and (tmp_path / "real" / "made.de").read_text() == "made\n"


def test_a_device_node_is_written_straight_and_stays_a_device(tmp_path: Path) -> None:
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers, in a folder of our own
    except PermissionError:
        pytest.skip("making a device node needs root")
    write_text_atomically(null, "discarded\n")
    assert stat.S_ISCHR(null.lstat().st_mode)  # as root, --output /dev/null became a regular file
    assert os.listdir(tmp_path) == ["null"]


def test_the_system_devices_are_written_straight_by_anyone() -> None:
    # Not only as root: write_destination must say "in place" for /dev/null whoever runs it.
    assert atomic_files.write_destination(Path("/dev/null")) == (Path("/dev/null"), True)
    write_text_atomically(Path("/dev/null"), "discarded\n")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_fifo_is_written_straight_to_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_text_atomically(fifo, "ein Hund\n")
    reader.join(timeout=10)
    assert received == [b"ein Hund\n"] and stat.S_ISFIFO(fifo.lstat().st_mode)
    assert os.listdir(tmp_path) == ["out.fifo"]


def test_a_process_file_through_proc_is_appended_to_not_replaced(tmp_path: Path) -> None:
    """``--output /dev/stdout`` with standard output appended to a log (``>> log``): the log keeps its text."""
    log = tmp_path / "log.txt"
    log.write_text("earlier\n")
    with log.open("a") as appended:
        write_text_atomically(Path(f"/proc/self/fd/{appended.fileno()}"), "translation\n")
        write_text_atomically(Path(f"/dev/fd/{appended.fileno()}"), "another\n")
    assert log.read_text() == "earlier\ntranslation\nanother\n"
    assert os.listdir(tmp_path) == ["log.txt"]
    read_end, write_end = os.pipe()  # ``| tee``: /dev/stdout is a pipe
    try:
        assert atomic_files.write_destination(Path(f"/dev/fd/{write_end}")) == (
            Path(f"/dev/fd/{write_end}"),
            True,
        )
        write_bytes_atomically(Path(f"/dev/fd/{write_end}"), b"piped\n")
        assert os.read(read_end, 100) == b"piped\n"
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_loop_of_links_is_named_and_left_alone(tmp_path: Path) -> None:
    loop = tmp_path / "loop.de"
    loop.symlink_to("loop.de")
    with pytest.raises(OSError) as refused:
        write_text_atomically(loop, "new")
    assert str(refused.value) == f"cannot write {loop}: Too many levels of symbolic links"
    assert refused.value.errno == errno.ELOOP
    assert loop.is_symlink() and os.listdir(tmp_path) == ["loop.de"]  # was renamed over: a regular file


def test_a_staged_directory_follows_a_link_and_refuses_what_is_no_folder(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "old.txt").write_text("old")
    (tmp_path / "model").symlink_to("real")
    with staged_directory(tmp_path / "model") as staging:
        (staging / "new.txt").write_text("new")
    assert (tmp_path / "model").is_symlink() and os.listdir(tmp_path / "real") == ["new.txt"]
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotADirectoryError) as refused, staged_directory(tmp_path / "fifo"):
        pass
    assert str(refused.value) == f"cannot write {tmp_path / 'fifo'}: Not a directory"
    assert stat.S_ISFIFO((tmp_path / "fifo").lstat().st_mode)  # was renamed aside to a hidden .old-* name
    assert sorted(os.listdir(tmp_path)) == ["fifo", "model", "real"]
