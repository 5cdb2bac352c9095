"""Reading parallel text, plain or gzipped, with errors that name file and line."""

import gzip
from pathlib import Path

import pytest

from transformer.data.pipeline.text_files import CorpusError, read_parallel_files


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def test_reads_aligned_files_and_strips_whitespace(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "train.en", ["A dog runs.  ", "  Two men.", ""])
    target = tmp_path / "train.de"
    target.write_bytes("Ein Hund läuft.\r\nZwei Männer.\r\n\r\n".encode())
    pairs = read_parallel_files(source, target)
    assert pairs == [("A dog runs.", "Ein Hund läuft."), ("Two men.", "Zwei Männer."), ("", "")]


def test_reads_gzipped_files_whatever_their_name(tmp_path: Path) -> None:
    with gzip.open(tmp_path / "train.en.gz", "wt", encoding="utf-8") as file:
        file.write("A girl.\nA boy.\n")
    with gzip.open(tmp_path / "train.de", "wt", encoding="utf-8") as file:  # gzip without .gz
        file.write("Ein Mädchen.\nEin Junge.\n")
    pairs = read_parallel_files(tmp_path / "train.en.gz", tmp_path / "train.de")
    assert pairs == [("A girl.", "Ein Mädchen."), ("A boy.", "Ein Junge.")]


def test_unicode_line_separators_do_not_break_alignment(tmp_path: Path) -> None:
    # str.splitlines would split these lines in two and shift every later pair.
    source = write_lines(tmp_path / "a.en", ["one\u2028two", "three\x0bfour", "five"])
    target = write_lines(tmp_path / "a.de", ["eins", "drei", "fünf"])
    pairs = read_parallel_files(source, target)
    assert [target for _, target in pairs] == ["eins", "drei", "fünf"]
    assert pairs[0][0] == "one\u2028two"


def test_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    source = tmp_path / "bom.en"
    source.write_bytes("\ufeffHello\nWorld\n".encode())
    target = write_lines(tmp_path / "bom.de", ["Hallo", "Welt"])
    assert read_parallel_files(source, target)[0] == ("Hello", "Hallo")


def test_line_count_mismatch_names_both_files_and_counts(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "train.en", ["a", "b", "c"])
    target = write_lines(tmp_path / "train.de", ["a", "b"])
    with pytest.raises(CorpusError, match=r"train\.en has 3 lines but .*train\.de has 2"):
        read_parallel_files(source, target)


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "train.en", ["a", "b", "c"])
    target = tmp_path / "train.de"
    target.write_bytes(b"ok\nauch ok\nkaputt \xff\xfe hier\n")
    with pytest.raises(CorpusError, match=r"train\.de line 3: not valid UTF-8"):
        read_parallel_files(source, target)
    gzipped = tmp_path / "train.de.gz"
    gzipped.write_bytes(gzip.compress(b"ok\n\xc3(\nok\n"))
    with pytest.raises(CorpusError, match=r"train\.de\.gz line 2: not valid UTF-8"):
        read_parallel_files(source, gzipped)


def test_missing_empty_and_corrupt_files_are_errors(tmp_path: Path) -> None:
    present = write_lines(tmp_path / "train.en", ["a"])
    with pytest.raises(CorpusError, match=r"cannot read .*missing\.de"):
        read_parallel_files(present, tmp_path / "missing.de")
    empty_source, empty_target = tmp_path / "empty.en", tmp_path / "empty.de"
    empty_source.write_bytes(b"")
    empty_target.write_bytes(b"")
    with pytest.raises(CorpusError, match=r"empty\.en and .*empty\.de are empty"):
        read_parallel_files(empty_source, empty_target)
    truncated = tmp_path / "truncated.de.gz"
    truncated.write_bytes(gzip.compress(b"line\n" * 1000)[:40])
    with pytest.raises(
        CorpusError, match=r"truncated\.de\.gz: cannot read past line \d+ \(corrupt or truncated file\)"
    ):
        read_parallel_files(present, truncated)
