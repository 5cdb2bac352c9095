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


def test_memory_growth_compares_window_peaks_so_a_leak_counts_and_a_swing_does_not() -> None:
    # glibc-like: every minute swings between 500 and 620 MiB, the last sample low: no growth
    swinging = [(5.0 * tick, 620.0 if tick % 7 == 3 else 500.0) for tick in range(121)]
    flat = serve_benchmark.resident_memory_growth(swinging)
    assert flat["rss_mib_after_first_minute"] == 620.0 and flat["rss_mib_at_end"] == 620.0
    assert flat["rss_growth_after_first_minute"] == 0.0
    assert len(flat["rss_peak_mib_by_minute"]) == 11  # minutes 0-9 and the sample at 600 s
    # a leak of 1 MiB per sample under the same swing: +120 MiB over the 9 judged minutes
    leaking = [(elapsed, rss + index) for index, (elapsed, rss) in enumerate(swinging)]
    grown = serve_benchmark.resident_memory_growth(leaking)
    assert grown["rss_growth_after_first_minute"] > 0.10
    target = serve_benchmark.soak_target({"minutes": 10.0, "errors": 0, **grown})
    assert not target["met"] and target["value"].startswith("0 errors, +")
    assert serve_benchmark.soak_target({"minutes": 10.0, "errors": 0, **flat})["met"]
    assert not serve_benchmark.soak_target({"minutes": 10.0, "errors": 1, **flat})["met"]
    # a soak shorter than the warm-up: the last sample stands for both windows
    assert (
        serve_benchmark.resident_memory_growth([(0.0, 300.0), (5.0, 310.0)])["rss_growth_after_first_minute"]
        == 0
    )
