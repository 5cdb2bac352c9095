"""The ONNX parity and the wait-k benchmarks, run on the tiny model's validation set."""

import gzip
import re
from pathlib import Path

import pytest

from benchmarks import onnx_parity, simultaneous


def corpus_of(run: Path, directory: Path) -> Path:
    """The run's validation set, gzipped under the names the benchmarks read (val.en.gz, val.de.gz)."""
    directory.mkdir()
    for side in ("en", "de"):
        (directory / f"val.{side}.gz").write_bytes(
            gzip.compress((run / "data" / f"valid.{side}").read_bytes())
        )
    return directory


def test_the_parity_record_finds_every_fp32_translation_identical(served_run: Path, tmp_path: Path) -> None:
    for package in ("onnx", "onnxscript", "onnxruntime"):
        pytest.importorskip(package)
    output = tmp_path / "parity.md"
    onnx_parity.main(["--checkpoint", str(served_run), "--corpus", str(corpus_of(served_run, tmp_path / "c")),
                      "--output", str(output)])  # fmt: skip
    record = output.read_text(encoding="utf-8")
    count = len((served_run / "data" / "valid.en").read_text(encoding="utf-8").splitlines())
    for search in ("greedy", "beam 4"):
        assert re.search(rf"\| {search} \| onnxruntime fp32 \| {count}/{count} \|", record), record
        assert re.search(rf"- {search}, onnxruntime: int8 against fp32, BLEU .* p = [0-9.]+", record)
    step = re.search(
        r"largest log-probability difference, onnxruntime fp32 against PyTorch fp32: (\S+)", record
    )
    assert step is not None and float(step.group(1)) < 1e-4


def test_the_wait_k_record_has_each_k_and_the_full_sentence_check(served_run: Path, tmp_path: Path) -> None:
    output = tmp_path / "simultaneous.md"
    simultaneous.main(["--checkpoint", str(served_run), "--corpus", str(corpus_of(served_run, tmp_path / "c")),
                       "--waits", "1", "3", "--output", str(output)])  # fmt: skip
    record = output.read_text(encoding="utf-8")
    count = len((served_run / "data" / "valid.en").read_text(encoding="utf-8").splitlines())
    assert f"full-sentence wait-k against the offline greedy search: {count}/{count} identical" in record
    laggings = [
        float(value)
        for value in re.findall(
            r"^\| (?:1|3|full sentence) \| [0-9.]+ \| [0-9.]+ \| ([0-9.]+) \|", record, re.M
        )
    ]
    assert len(laggings) == 3 and laggings[0] < laggings[1] < laggings[2]  # more waiting, more lag
