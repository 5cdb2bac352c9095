"""The fairness benchmark of issue #48 (benchmarks/fairness.py), in seconds: a real server, tiny phases."""

import json
from pathlib import Path

import pytest

pytest.importorskip("fastapi")  # the serve extra: the benchmark starts `transformer serve`

from benchmarks import fairness


def test_the_fairness_benchmark_sizes_each_worst_case_and_writes_its_report(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["--checkpoint", str(trained_run), "--seconds", "1", "--clients", "2", "--max-chars", "400",
                 "--kinds", "many tiny sentences,longest prefix", "--output-dir", str(tmp_path)]  # fmt: skip
    assert fairness.main(arguments) in (0, 1)  # 1: a bound not met, which a loaded test machine may see
    record = json.loads((tmp_path / "fairness-latest.json").read_text(encoding="utf-8"))
    assert list(record["phases"]) == ["alone", "many tiny sentences", "longest prefix"]
    for phase in record["phases"].values():
        assert phase["small_requests"] > 0 and phase["small_errors"] == 0
        assert phase["p50_ms"] <= phase["p99_ms"]
    tiny = record["phases"]["many tiny sentences"]
    # 400 characters of budget: the server refused more one-character sentences than it takes (413).
    assert 1 < tiny["size"] < 400 and tiny["refused_above"]
    assert all(status == 200 for status in tiny["heavy_answered"])
    report = (tmp_path / "fairness-latest.md").read_text(encoding="utf-8")
    assert record["environment"]["cpu"]["summary"] in report and "| many tiny sentences |" in report
    assert [row["case"] for row in record["bound_rows"]] == ["many tiny sentences", "longest prefix"]
    assert "Bound: small requests' p99" in capsys.readouterr().out


def test_worst_case_bodies_stay_within_the_size_asked() -> None:
    text, prefix_text = "A dog sleeps. A cat runs far away. " * 20, "Ein Hund schläft. " * 40
    longest = fairness.worst_case_body("longest text", 100, text, prefix_text)
    assert len(longest["text"]) <= 100 and not longest["text"].endswith(" ") and longest["beam"] >= 1
    prefixed = fairness.worst_case_body("longest prefix", 100, text, prefix_text)
    assert prefixed["text"] == "A dog sleeps." and len(prefixed["text"]) + len(prefixed["prefix"]) <= 100
    assert fairness.worst_case_body("many tiny sentences", 7, text, prefix_text) == {"text": ["a"] * 7}
    with pytest.raises(ValueError, match="unknown worst case"):
        fairness.worst_case_body("everything", 1, text, prefix_text)
