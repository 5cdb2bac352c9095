"""``transformer serve`` refuses bad options with one line and status 2, before serving anything."""

import shlex
import socket
from pathlib import Path

import pytest

from transformer.cli import main


@pytest.fixture
def workspace(served_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "run").symlink_to(served_run)
    (tmp_path / "no-keys.txt").write_text("# only a comment\n\n", encoding="utf-8")
    (tmp_path / "spaced-key.txt").write_text("good-key\nbad key\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("--checkpoint nowhere", "nowhere"),
        ("--checkpoint =run", "the model name must be letters, digits"),
        ("--checkpoint 'a b=run'", "the model name must be letters, digits"),
        ("--checkpoint a=", "no directory after '='"),
        ("--checkpoint a=run --checkpoint a=run", "model name 'a' is given twice"),
        ("--checkpoint run --port 70000", "--port"),
        ("--checkpoint run --max-queue 0", "--max-queue"),
        ("--checkpoint run --max-chars -5", "--max-chars"),
        ("--checkpoint run --max-batch-tokens many", "--max-batch-tokens"),
        ("--checkpoint run --batching step", "--batching"),
        ("--checkpoint run --engine tensorrt", "--engine"),
        ("--checkpoint run --device gpu", "--device"),
        ("--checkpoint run --api-keys missing.txt", "--api-keys missing.txt: cannot read it"),
        ("--checkpoint run --api-keys no-keys.txt", "--api-keys no-keys.txt: no key in the file"),
        ("--checkpoint run --api-keys spaced-key.txt", "--api-keys spaced-key.txt:2: a key may not contain"),
        ("--checkpoint run --host 203.0.113.9", "--host 203.0.113.9 --port 0: cannot listen there"),
    ],
)
def test_bad_options_give_one_line_and_status_2(
    workspace: Path, capsys, arguments: str, message: str
) -> None:
    status = main(["serve", "--port", "0", *shlex.split(arguments)])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("transformer serve: error: "), captured.err
    assert message in lines[0]


def test_a_port_in_use_is_named(workspace: Path, capsys) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--checkpoint", "run", "--port", str(port)]) == 2
    error = capsys.readouterr().err.strip()
    assert (
        error
        == f"transformer serve: error: --host 127.0.0.1 --port {port}: cannot listen there (Address already in use)"
    )
