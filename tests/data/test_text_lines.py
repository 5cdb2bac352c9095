import gzip
import io
import os
import threading
import time
from pathlib import Path

import pytest

from transformer.data.pipeline.text_files import MAX_LINE_BYTES, CorpusError
from transformer.data.text_lines import decode_input_line, read_input_lines, write_output_lines


def test_standard_input_lines_keep_their_spaces_and_lose_their_line_ends(monkeypatch) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbf one \r\n\n two\n last"), "utf-8", "surrogateescape")
    monkeypatch.setattr("sys.stdin", stdin)
    assert read_input_lines("-") == [" one ", "", " two", " last"]


def test_a_line_that_is_not_utf8_is_named_with_the_byte() -> None:
    assert decode_input_line(b"caf\xc3\xa9\r\n", 1) == "café"
    with pytest.raises(CorpusError) as error:
        decode_input_line(b"caf\xe9\n", 4)
    assert str(error.value) == "standard input line 4: not valid UTF-8 (byte 3 of the line)"


def test_output_lines_go_to_a_file_or_standard_output(tmp_path: Path, capsys) -> None:
    write_output_lines(["ein Hund", ""], "-")
    assert capsys.readouterr().out == "ein Hund\n\n"
    write_output_lines(["ein Hund", ""], str(tmp_path / "out.de"))
    assert (tmp_path / "out.de").read_text(encoding="utf-8") == "ein Hund\n\n"
    with pytest.raises(ValueError) as error:
        write_output_lines(["x"], str(tmp_path))
    assert str(error.value) == f"--output {tmp_path}: is a directory; expected a file"


# --- #48 item 1: pipes, FIFOs and devices are read once, whole ---

SENTENCES = [
    f"Sentence {number} of the piped test set, long enough to fill buffers." for number in range(500)
]


def feed_fifo(path: Path, chunks: list[bytes]) -> threading.Thread:
    """Make a FIFO at ``path`` and write ``chunks`` into it from a thread once a reader opens it."""
    os.mkfifo(path)

    def write() -> None:
        with path.open("wb", buffering=0) as fifo:
            for chunk in chunks:
                fifo.write(chunk)
                time.sleep(0.01)  # each chunk its own read: the gzip check sees one byte first

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def piped(data: bytes) -> int:
    """A pipe already written and closed at its write end, as ``cat file |`` leaves it; returns the read end."""
    read_end, write_end = os.pipe()
    os.write(write_end, data)  # under the 64 KiB a pipe holds
    os.close(write_end)
    return read_end


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_pipe_of_more_than_8_kib_is_read_whole(compress: bool) -> None:
    """``cat test.en | transformer translate --input /dev/stdin``: the path is a pipe's, /dev/fd/N."""
    data = "".join(f"{sentence}\n" for sentence in SENTENCES).encode("utf-8")
    assert len(data) > 8192
    read_end = piped(gzip.compress(data, mtime=0) if compress else data)
    try:
        assert read_input_lines(f"/dev/fd/{read_end}") == SENTENCES  # was the lines after the first 8 KiB
    finally:
        os.close(read_end)


def test_a_pipe_of_one_line_gives_it() -> None:
    """``--input <(echo 'The dog sleeps.')``: the gzip check read the whole pipe, then opened it again."""
    read_end = piped(b"The dog sleeps.\n")
    try:
        assert read_input_lines(f"/dev/fd/{read_end}") == ["The dog sleeps."]  # was []
    finally:
        os.close(read_end)


def test_a_fifo_written_a_byte_at_a_time_is_read_whole_and_unzipped(tmp_path: Path) -> None:
    data = gzip.compress("".join(f"{sentence}\n" for sentence in SENTENCES).encode("utf-8"), mtime=0)
    writer = feed_fifo(tmp_path / "input.en.gz", [data[:1], data[1:2], data[2:]])
    assert read_input_lines(str(tmp_path / "input.en.gz")) == SENTENCES
    writer.join(timeout=10)
    assert not writer.is_alive()


def test_devices_as_input_are_read_or_named() -> None:
    assert read_input_lines("/dev/null") == []
    with pytest.raises(CorpusError) as error:
        read_input_lines("/dev/zero")  # no line end ever: was read into memory until it ran out
    assert str(error.value) == (
        f"/dev/zero line 1: more than {MAX_LINE_BYTES:,} bytes without a line end (is this a binary file "
        "or a device such as /dev/zero?)"
    )


def test_a_regular_file_with_a_line_over_the_pipe_limit_is_read_whole(tmp_path: Path) -> None:
    # The cap is for streams that may never end a line; a web corpus's long line must reach the length filter.
    long_line = "a " * (MAX_LINE_BYTES // 2 + 10)
    (tmp_path / "train.en").write_text(f"first\n{long_line}\nlast\n", encoding="utf-8")
    assert read_input_lines(str(tmp_path / "train.en")) == ["first", long_line.strip(), "last"]


def test_a_pipe_line_of_exactly_the_limit_is_read(tmp_path: Path) -> None:
    line = "b" * MAX_LINE_BYTES
    writer = feed_fifo(tmp_path / "exact.en", [f"{line}\n".encode()])
    assert read_input_lines(str(tmp_path / "exact.en")) == [line]
    writer.join(timeout=10)


# --- #48 item 2: an --output that is a link or a FIFO ---


def test_output_through_a_link_writes_its_target_and_a_loop_is_named(tmp_path: Path) -> None:
    (tmp_path / "kept.de").write_text("old\n", encoding="utf-8")
    (tmp_path / "out.de").symlink_to("kept.de")
    write_output_lines(["ein Hund"], str(tmp_path / "out.de"))
    assert (tmp_path / "out.de").is_symlink()  # was replaced by a regular file, kept.de left as it was
    assert (tmp_path / "kept.de").read_text(encoding="utf-8") == "ein Hund\n"
    (tmp_path / "loop.de").symlink_to("loop.de")
    with pytest.raises(ValueError) as error:
        write_output_lines(["x"], str(tmp_path / "loop.de"))
    assert str(error.value) == (
        f"--output {tmp_path / 'loop.de'}: a symbolic link that leads back to itself (Too many levels of "
        "symbolic links); point it at a file or remove it"
    )
    assert (tmp_path / "loop.de").is_symlink()


def test_output_to_a_fifo_reaches_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_output_lines(["ein Hund", "eine Katze"], str(fifo))
    reader.join(timeout=10)
    assert received == [b"ein Hund\neine Katze\n"] and not fifo.is_file()
