"""``python -m benchmarks.serve`` end to end at minuscule sizes: both modes, the targets and the report."""

import json
from pathlib import Path

import pytest

from benchmarks import serve as serve_benchmark


def test_the_benchmark_runs_both_modes_and_writes_its_report(served_run: Path, tmp_path: Path) -> None:
    sentences = served_run / "data" / "valid.en"
    arguments = [
        "--checkpoint", str(served_run), "--sentences", str(sentences), "--clients", "1,4", "--seconds", "2",
        "--max-sentences", "12", "--output-dir", str(tmp_path), "--note", "test run", "--soak-minutes", "0.05",
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
        "1 client: p50 within 5 ms of alone offline",
        "0.05-minute soak at 64 clients: no error, memory growth < 5% after minute 1",
    ]
    soak = record["soak"]
    assert soak["errors"] == 0 and soak["sentences"] > 0 and soak["rss_growth_after_first_minute"] is None
    assert soak["rss_samples"] and all(rss > 50.0 for _, rss in soak["rss_samples"])  # a real process's MiB
    report = (tmp_path / "serve-latest.md").read_text(encoding="utf-8")
    assert (
        "## continuous batching" in report
        and "## request batching" in report
        and "- note: test run" in report
    )
    assert record["environment"]["cpu"]["summary"] in report
    assert "## Soak" in report and "too short a soak to judge growth" in report


def test_memory_growth_compares_peaks_so_a_leak_counts_and_a_swing_does_not() -> None:
    # glibc-like: 500 MiB with a 620 MiB sample every 85 s, so some whole minutes (the last one too) lack it
    swinging = [(5.0 * tick, 620.0 if tick % 17 == 3 else 500.0) for tick in range(121)]
    assert max(rss for elapsed, rss in swinging if elapsed >= 540.0) == 500.0  # the last minute alone: -19%
    flat = serve_benchmark.resident_memory_growth(swinging)
    assert flat["rss_mib_after_first_minute"] == 620.0 and flat["rss_mib_at_end"] == 620.0
    assert flat["rss_growth_after_first_minute"] == 0.0
    assert len(flat["rss_peak_mib_by_minute"]) == 10  # minutes 1-10; the sample at 600 s joins the tenth
    # a leak of 1 MiB per sample under the same swing: +100 MiB or more between minute 2 and the later half
    leaking = [(elapsed, rss + index) for index, (elapsed, rss) in enumerate(swinging)]
    grown = serve_benchmark.resident_memory_growth(leaking)
    assert grown["rss_growth_after_first_minute"] > 0.10
    target = serve_benchmark.soak_target({"minutes": 10.0, "errors": 0, **grown})
    assert not target["met"] and target["value"].startswith("0 errors, +")
    assert serve_benchmark.soak_target({"minutes": 10.0, "errors": 0, **flat})["met"]
    assert not serve_benchmark.soak_target({"minutes": 10.0, "errors": 1, **flat})["met"]
    # tcmalloc-like: a rise in minutes 2-3, then a plateau: growth after the first minute, not hidden
    plateau = [(5.0 * tick, min(670.0 + 2.0 * max(0, tick - 12), 775.0)) for tick in range(121)]
    assert serve_benchmark.resident_memory_growth(plateau)["rss_growth_after_first_minute"] > 0.10


def test_a_soak_too_short_to_judge_does_not_meet_the_target() -> None:
    short = serve_benchmark.resident_memory_growth([(0.0, 300.0), (5.0, 310.0), (65.0, 305.0)])
    assert short["rss_growth_after_first_minute"] is None and short["rss_peak_mib_by_minute"] == [310.0]
    target = serve_benchmark.soak_target({"minutes": 1.1, "errors": 0, **short})
    assert not target["met"] and "too short" in target["value"]


def test_the_servers_allocator_is_named_as_it_will_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/opt/lib/libtcmalloc.so.4")
    assert serve_benchmark.server_allocator(no_tcmalloc=False) == "tcmalloc"
    assert "preloaded by the caller" in serve_benchmark.server_allocator(no_tcmalloc=True)
    monkeypatch.delenv("LD_PRELOAD")
    assert serve_benchmark.server_allocator(no_tcmalloc=True) == "glibc malloc"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--clients", "1,x", "argument --clients: expected an integer of at least 1, got 'x'"),
        ("--clients", "8,0", "argument --clients: expected an integer of at least 1, got '0'"),
        ("--batching", "continuous,fast", "argument --batching: expected continuous or request"),
        ("--max-sentences", "-3", "argument --max-sentences: expected an integer of at least 1, got '-3'"),
        ("--admit-every", "0", "argument --admit-every: expected an integer of at least 1, got '0'"),
    ],
)
def test_a_bad_count_or_mode_is_refused_in_one_line_before_any_timing(
    option: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        serve_benchmark.parse_arguments(["--checkpoint", "run", "--sentences", "s.txt", option, value])
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_counts_and_modes_parse_in_the_order_given() -> None:
    args = serve_benchmark.parse_arguments(
        ["--checkpoint", "run", "--sentences", "s.txt", "--clients", "64, 1", "--batching", "request"]
    )
    assert args.clients == (64, 1) and args.batching == ("request",)
    defaults = serve_benchmark.parse_arguments(["--checkpoint", "run", "--sentences", "s.txt"])
    assert defaults.clients == (1, 8, 64, 256) and defaults.batching == ("continuous", "request")
