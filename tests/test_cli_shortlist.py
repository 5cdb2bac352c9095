"""``transformer shortlist`` and ``--shortlist`` end to end: build, translate, evaluate, export to CTranslate2."""

import shutil
from pathlib import Path

import pytest

from transformer.checkpoint.layout import resolve_checkpoint
from transformer.cli import main


@pytest.fixture
def run(trained_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    return copy


def test_build_translate_and_evaluate_with_the_shortlist(run: Path, tmp_path: Path, capsys) -> None:
    assert main(["shortlist", "--checkpoint", str(run), "--per-source", "8", "--frequent", "20"]) == 0
    line = capsys.readouterr().out
    shortlist_file = resolve_checkpoint(run) / "shortlist.safetensors"
    assert line.startswith("shortlist of 300 pairs") and f"written to {shortlist_file}" in line
    first = shortlist_file.read_bytes()
    assert main(["shortlist", "--checkpoint", str(run), "--per-source", "1", "--frequent", "0"]) == 0
    assert shortlist_file.read_bytes() != first  # its own file is replaced
    capsys.readouterr()
    sources = tmp_path / "src.en"
    sources.write_text((run / "data" / "valid.en").read_text(encoding="utf-8"), encoding="utf-8")
    arguments = ["translate", "--checkpoint", str(run), "--input", str(sources), "--beam", "1"]
    assert main([*arguments, "--shortlist"]) == 0
    restricted = capsys.readouterr().out
    assert main([*arguments, "--shortlist", str(shortlist_file)]) == 0
    assert capsys.readouterr().out == restricted
    assert main(arguments) == 0
    assert capsys.readouterr().out != restricted  # one candidate per source piece does restrict
    references = run / "data" / "valid.de"
    evaluate = [
        "evaluate",
        "--checkpoint",
        str(run),
        "--source",
        str(sources),
        "--reference",
        str(references),
    ]
    assert main([*evaluate, "--shortlist"]) == 0
    assert "BLEU" in capsys.readouterr().out


def test_the_ctranslate2_export_carries_the_shortlist(run: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("ctranslate2")
    assert main(["shortlist", "--checkpoint", str(run), "--per-source", "1", "--frequent", "0"]) == 0
    export = tmp_path / "ct2"
    assert main(["convert", "--to", "ctranslate2", str(run), str(export)]) == 0
    assert (export / "vmap.txt").is_file()
    capsys.readouterr()
    sources = run / "data" / "valid.en"
    arguments = ["translate", "--engine", "ctranslate2", "--checkpoint", str(export), "--input", str(sources)]
    assert main([*arguments, "--beam", "1", "--shortlist"]) == 0
    with_map = capsys.readouterr().out
    assert main([*arguments, "--beam", "1"]) == 0
    assert capsys.readouterr().out != with_map
    assert main([*arguments, "--shortlist", "other.safetensors"]) == 2
    assert "the export's own vmap.txt is used" in capsys.readouterr().err
