import io
from pathlib import Path

import pytest

from transformer.data.pipeline.text_files import CorpusError
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
