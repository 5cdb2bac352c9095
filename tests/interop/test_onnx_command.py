"""``translate`` and ``evaluate`` with ``--engine onnxruntime``: the PyTorch engine's output, and one-line refusals."""

import json
import shutil
from pathlib import Path

import pytest

from transformer.cli import main

for package in ("onnx", "onnxscript", "onnxruntime"):
    pytest.importorskip(package)


def translate(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str]:
    status = main(["translate", *arguments])
    return status, capsys.readouterr().err.strip()


def same_columns(found: str, expected: str) -> bool:
    """Whether two output lines agree: text columns exactly, score columns (printed to 4 decimals) within 2e-4."""
    pairs = list(zip(found.split("\t"), expected.split("\t"), strict=True))
    for got, want in pairs:
        try:
            if abs(float(got) - float(want)) > 2e-4:
                return False
        except ValueError:
            if got != want:
                return False
    return True


def test_translate_writes_the_pytorch_engines_file(
    served_run: Path, onnx_export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = served_run / "data" / "valid.en"
    for flags in (["--beam", "1"], ["--beam", "4"], ["--beam", "3", "--nbest", "2", "--confidence"]):
        ours, theirs = tmp_path / "ours.txt", tmp_path / "theirs.txt"
        assert (
            translate(
                capsys, "--checkpoint", str(served_run), "--input", str(source), "--output", str(ours), *flags
            )[0]
            == 0
        )
        assert (
            translate(
                capsys, "--engine", "onnxruntime", "--checkpoint", str(onnx_export), "--input", str(source),
                "--output", str(theirs), *flags,
            )[0]
            == 0
        )  # fmt: skip
        expected, found = (
            ours.read_text(encoding="utf-8").splitlines(),
            theirs.read_text(encoding="utf-8").splitlines(),
        )
        assert len(found) == len(expected) >= 20
        for want, got in zip(expected, found, strict=True):
            assert same_columns(got, want), (got, want)


def test_evaluate_gives_the_same_bleu_and_perplexity(
    served_run: Path, onnx_export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = served_run / "data"
    common = ["--source", str(data / "valid.en"), "--reference", str(data / "valid.de"), "--beam", "4"]
    assert main(["evaluate", "--checkpoint", str(served_run), *common]) == 0
    ours = capsys.readouterr().out.splitlines()
    assert main(["evaluate", "--engine", "onnxruntime", "--checkpoint", str(onnx_export), *common]) == 0
    theirs = capsys.readouterr().out.splitlines()
    assert theirs[1:] == ours[1:]  # BLEU and chrF with their signatures
    assert theirs[0].split()[1] == ours[0].split()[1]  # perplexity, to 3 decimals
    assert ours[0].startswith("perplexity ")
    assert (
        main(
            [
                "evaluate",
                "--engine",
                "onnxruntime",
                "--precision",
                "int8",
                "--checkpoint",
                str(onnx_export),
                *common,
            ]
        )
        == 0
    )
    assert "BLEU" in capsys.readouterr().out


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--shortlist"], "--engine onnxruntime does not take --shortlist (use --engine pytorch)"),
        (["--alignments"], "does not take --alignments"),
        (["--flags"], "does not take --flags"),
        (["--precision", "bf16"], "does not take --precision bf16"),
        (["--workers", "2", "--no-cache"], "does not take --no-cache, --workers"),
        (["--fp32-kernels", "mkl"], "does not take --fp32-kernels"),
        (["--device", "cuda"], "--device cuda"),
    ],
)
def test_options_only_pytorch_follows_are_refused_in_one_line(
    onnx_export: Path, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, error = translate(capsys, "--engine", "onnxruntime", "--checkpoint", str(onnx_export), *flags)
    assert status == 2 and message in error and "\n" not in error


def test_a_checkpoint_or_a_missing_precision_is_named(
    served_run: Path, onnx_export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, error = translate(capsys, "--engine", "onnxruntime", "--checkpoint", str(served_run))
    assert status == 2 and f"{served_run}: no onnx_export.json, so not an ONNX export" in error
    assert "convert --to onnx" in error
    fp32_only = tmp_path / "fp32"
    shutil.copytree(onnx_export, fp32_only)
    description = json.loads((fp32_only / "onnx_export.json").read_text(encoding="utf-8"))
    del description["precisions"]["int8"]  # as an export without --quantization describes itself
    (fp32_only / "onnx_export.json").write_text(json.dumps(description), encoding="utf-8")
    status, error = translate(
        capsys, "--engine", "onnxruntime", "--checkpoint", str(fp32_only), "--precision", "int8"
    )
    assert status == 2 and f"--precision int8: {fp32_only} holds no int8 graphs" in error
    assert "--quantization int8" in error
    (fp32_only / "decoder_step.onnx").unlink()
    status, error = translate(capsys, "--engine", "onnxruntime", "--checkpoint", str(fp32_only))
    assert status == 2 and "lists 'decoder_step.onnx', which the directory lacks" in error
    status, error = translate(
        capsys, "--engine", "onnxruntime", "--checkpoint", str(onnx_export), "--checkpoint", str(onnx_export)
    )
    assert status == 2 and "--engine onnxruntime decodes one export" in error


def test_an_output_over_the_export_is_refused(onnx_export: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = onnx_export / "decoder_step.onnx"
    before = target.read_bytes()
    status, error = translate(
        capsys, "--engine", "onnxruntime", "--checkpoint", str(onnx_export), "--output", str(target)
    )
    assert status == 2 and "--output" in error
    assert target.read_bytes() == before


def test_a_missing_onnx_extra_is_one_line(
    served_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformer.interop import onnx_export

    def missing() -> None:
        raise ImportError(
            "ONNX export and --engine onnxruntime need the onnx extra: pip install 'transformer[onnx]'"
        )

    monkeypatch.setattr(onnx_export, "import_onnx_packages", missing)
    assert main(["convert", "--to", "onnx", str(served_run), str(tmp_path / "onnx")]) == 2
    error = capsys.readouterr().err.strip()
    assert "pip install 'transformer[onnx]'" in error and "\n" not in error and "Traceback" not in error
    assert not (tmp_path / "onnx").exists()
