"""``python -m benchmarks.serve`` end to end at minuscule sizes: both modes, the targets and the report."""

import json
from pathlib import Path

from benchmarks import serve as serve_benchmark


def test_the_benchmark_runs_both_modes_and_writes_its_report(served_run: Path, tmp_path: Path) -> None:
    sentences = served_run / "data" / "valid.en"
    arguments = [
        "--checkpoint", str(served_run), "--sentences", str(sentences), "--clients", "1,4", "--seconds", "2",
        "--max-sentences", "12", "--output-dir", str(tmp_path), "--note", "test run",
    ]  # fmt: skip
    assert serve_benchmark.main(arguments) == 0
    record = json.loads((tmp_path / "serve-latest.json").read_text(encoding="utf-8"))
    assert record["offline"]["sentences"] == 12 and record["offline"]["sentences_per_s"] > 0
    assert set(record["cells"]) == {"continuous", "request"}
    for cells in record["cells"].values():
        assert [cell["clients"] for cell in cells.values()] == [1, 4]
        assert all(cell["errors"] == 0 and cell["sentences"] > 0 for cell in cells.values())
        assert all(cell["p50_ms"] <= cell["p95_ms"] <= cell["p99_ms"] for cell in cells.values())
    assert [target["target"] for target in record["targets"]] == [
        "1 client: p50 within 5 ms of alone offline"
    ]
    report = (tmp_path / "serve-latest.md").read_text(encoding="utf-8")
    assert (
        "## continuous batching" in report
        and "## request batching" in report
        and "- note: test run" in report
    )
    assert record["environment"]["cpu"]["summary"] in report
