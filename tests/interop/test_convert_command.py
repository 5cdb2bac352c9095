from pathlib import Path

import pytest

from transformer.cli import main


def test_export_import_round_trip_translates_the_same(trained_run: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("transformers")
    marian_dir, imported = tmp_path / "marian", tmp_path / "imported"
    assert main(["convert", "--to", "hf-marian", str(trained_run), str(marian_dir)]) == 0
    assert (marian_dir / "config.json").exists() and (marian_dir / "vocab.json").exists()
    assert main(["convert", "--from", "hf-marian", str(marian_dir), "--to", str(imported)]) == 0
    source = trained_run / "data" / "valid.en"
    common = ["--input", str(source), "--beam", "2", "--max-length-offset", "5"]
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(trained_run), *common]) == 0
    original = capsys.readouterr().out
    assert main(["translate", "--checkpoint", str(imported), *common]) == 0
    assert capsys.readouterr().out == original


def test_ctranslate2_engine_matches_pytorch_greedy(trained_run: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("ctranslate2")
    ct2_dir = tmp_path / "ct2"
    assert main(["convert", "--to", "ctranslate2", str(trained_run), str(ct2_dir)]) == 0
    source = trained_run / "data" / "valid.en"
    common = [
        "--input",
        str(source),
        "--beam",
        "1",
        "--max-length-offset",
        "5",
        "--length-penalty-form",
        "power",
    ]
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(trained_run), *common]) == 0
    pytorch = capsys.readouterr().out
    assert main(["translate", "--engine", "ctranslate2", "--checkpoint", str(ct2_dir), *common]) == 0
    assert capsys.readouterr().out == pytorch
    assert (
        main(["translate", "--engine", "ctranslate2", "--checkpoint", str(ct2_dir), "--input", str(source)])
        == 2
    )
    assert "power" in capsys.readouterr().err


def test_convert_usage_errors(trained_run: Path, tmp_path: Path, capsys) -> None:
    assert main(["convert", "--to", "onnx", str(trained_run), str(tmp_path / "x")]) == 2
    assert "export with" in capsys.readouterr().err
    assert (
        main(["convert", "--from", "hf-marian", str(tmp_path / "missing"), "--to", str(tmp_path / "y")]) == 2
    )
    assert "missing" in capsys.readouterr().err
