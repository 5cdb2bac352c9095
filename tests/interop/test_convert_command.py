import json
from pathlib import Path

import pytest

from transformer.checkpoint.layout import resolve_checkpoint
from transformer.cli import main
from transformer.interop.output_directory import CONVERSION_RECORD, holds_earlier_import


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
    # #48 item 12: the form follows the engine (it was refused unless --length-penalty-form power was given).
    default_form = [arg for arg in common if arg not in ("--length-penalty-form", "power")]
    assert main(["translate", "--engine", "ctranslate2", "--checkpoint", str(ct2_dir), *default_form]) == 0
    assert capsys.readouterr().out == pytorch
    engine = ["translate", "--engine", "ctranslate2", "--checkpoint", str(ct2_dir), "--input", str(source)]
    assert main([*engine, "--beam", "3"]) == 0  # alpha 0.6, the power form
    assert capsys.readouterr().out.count("\n") == len(source.read_text(encoding="utf-8").splitlines())
    assert main([*engine, "--length-penalty-form", "gnmt"]) == 2
    assert capsys.readouterr().err == (
        "transformer translate: error: --engine ctranslate2 supports only --length-penalty-form power, its default "
        "(or --alpha 0); CTranslate2 divides scores by |Y|^alpha\n"
    )
    assert (
        main([*engine, "--confidence", "--scores", "--flags"]) == 2
    )  # columns this project's translator writes
    assert capsys.readouterr().err == (
        "transformer translate: error: --engine ctranslate2 does not take --scores, --confidence, --flags "
        "(use --engine pytorch)\n"
    )


def test_convert_usage_errors(trained_run: Path, tmp_path: Path, capsys) -> None:
    assert main(["convert", "--to", "tflite", str(trained_run), str(tmp_path / "x")]) == 2
    assert "export with" in capsys.readouterr().err
    assert (
        main(["convert", "--from", "hf-marian", str(tmp_path / "missing"), "--to", str(tmp_path / "y")]) == 2
    )
    assert "missing" in capsys.readouterr().err


# --- #48 item 3: convert replaces only what it wrote ---


def listing(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes."""
    return {
        str(path.relative_to(directory)): path.read_bytes() for path in directory.rglob("*") if path.is_file()
    }


def test_convert_refuses_folders_that_merely_hold_its_file_names(
    trained_run: Path, tmp_path: Path, capsys
) -> None:
    checkpoint = resolve_checkpoint(trained_run)  # a training checkpoint: weights, optimizer, trainer state
    assert {"optimizer.safetensors", "trainer_state.json"} <= {path.name for path in checkpoint.iterdir()}
    ct2_like, hf_like = tmp_path / "ct2", tmp_path / "hf"
    for folder, name in ((ct2_like, "model.bin"), (hf_like, "config.json")):
        folder.mkdir()
        (folder / name).write_text("mine")
        (folder / "notes.txt").write_text("mine too")
    before = {folder: listing(folder) for folder in (checkpoint, ct2_like, hf_like)}
    refusals = [
        (
            ["convert", "--from", "hf-marian", str(tmp_path / "any"), "--to", str(checkpoint)],
            f"--to {checkpoint}: not an earlier imported checkpoint; replacing it would delete model.safetensors, "
            "optimizer.safetensors, tokenizer.model and 1 more (choose a new or empty directory)",
        ),
        (
            ["convert", "--to", "ctranslate2", str(trained_run), str(ct2_like)],
            f"OUTPUT_DIR {ct2_like}: not an earlier CTranslate2 export; replacing it would delete model.bin, "
            "notes.txt (choose a new or empty directory)",
        ),
        (
            ["convert", "--to", "hf-marian", str(trained_run), str(hf_like)],
            f"OUTPUT_DIR {hf_like}: not an earlier HuggingFace Marian export; replacing it would delete "
            "config.json, notes.txt (choose a new or empty directory)",
        ),
    ]
    for arguments, message in refusals:
        assert main(arguments) == 2
        assert capsys.readouterr().err == f"transformer convert: error: {message}\n"
    assert {folder: listing(folder) for folder in before} == before  # each was replaced before


def test_an_earlier_export_is_replaced_only_while_it_holds_only_its_files(
    trained_run: Path, tmp_path: Path, capsys
) -> None:
    pytest.importorskip("ctranslate2")
    exported = tmp_path / "ct2"
    assert main(["convert", "--to", "ctranslate2", str(trained_run), str(exported)]) == 0
    record = json.loads((exported / CONVERSION_RECORD).read_text(encoding="utf-8"))
    assert record["format"] == "ctranslate2" and record["checkpoint"] == str(resolve_checkpoint(trained_run))
    assert sorted([*record["files"], CONVERSION_RECORD]) == sorted(path.name for path in exported.iterdir())
    assert "model.bin" in record["files"]
    assert main(["convert", "--to", "ctranslate2", str(trained_run), str(exported)]) == 0  # its own: replaced
    assert main(["convert", "--to", "hf-marian", str(trained_run), str(exported)]) == 2  # another kind's
    assert (
        "not an earlier HuggingFace Marian export; replacing it would delete config.json"
        in capsys.readouterr().err
    )
    (exported / "notes.txt").write_text("mine")
    assert main(["convert", "--to", "ctranslate2", str(trained_run), str(exported)]) == 2
    assert "replacing it would delete notes.txt (choose" in capsys.readouterr().err
    assert (exported / "notes.txt").read_text() == "mine"


def test_an_earlier_import_is_replaced_and_a_link_to_it_kept(
    trained_run: Path, tmp_path: Path, capsys
) -> None:
    marian_dir, imported = tmp_path / "marian", tmp_path / "imported"
    assert main(["convert", "--to", "hf-marian", str(trained_run), str(marian_dir)]) == 0
    assert main(["convert", "--from", "hf-marian", str(marian_dir), "--to", str(imported)]) == 0
    assert holds_earlier_import(imported)
    (tmp_path / "link").symlink_to("imported")
    assert main(["convert", "--from", "hf-marian", str(marian_dir), "--to", str(tmp_path / "link")]) == 0
    assert (tmp_path / "link").is_symlink() and holds_earlier_import(imported)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["imported", "link", "marian"]
