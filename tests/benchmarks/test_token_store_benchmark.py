"""The token-store benchmark's parts: sizes, child processes, the corpus command and the report; not speed."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bench_token_store import run_child
from benchmarks.token_store import (
    RUN_MARKER,
    existing_corpus,
    parse_sizes,
    prepared_run_dir,
    store_not_reused_as_is,
)
from benchmarks.token_store_report import render_markdown
from transformer.data.corpora.large_corpus import write_large_corpus

REPOSITORY = Path(__file__).resolve().parents[2]


def test_sizes_are_a_sorted_comma_list_of_positive_integers() -> None:
    assert parse_sizes("4500000,1000000,36000000,1000000") == [1_000_000, 4_500_000, 36_000_000]
    for bad in ("", "0,5", "1e6", "a,b"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_sizes(bad)


def test_a_child_is_timed_to_its_milestones_with_its_own_peak_memory(tmp_path: Path) -> None:
    # Allocates and touches 200 MB after printing "ready", then writes a file: two milestones, one peak.
    marker = tmp_path / "done"
    script = (
        "import time, pathlib; print('ready'); time.sleep(0.2); block = bytearray(200 * 2**20); "
        f"pathlib.Path({str(marker)!r}).write_text('x'); time.sleep(0.2)"
    )
    run = run_child(
        [sys.executable, "-c", script],
        tmp_path / "child.log",
        timeout=60,
        milestones={"ready": lambda output: "ready" in output, "written": lambda output: marker.exists()},
    )
    assert run.check("the child") is run and run.output_tail == "ready\n"
    assert run.milestones["ready"] < run.milestones["written"] <= run.seconds
    assert run.milestones["written"] - run.milestones["ready"] >= 0.15
    assert 200 * 2**20 < run.peak_rss_bytes < 400 * 2**20
    failed = run_child([sys.executable, "-c", "import sys; sys.exit('broken')"], tmp_path / "failed.log", 60)
    with pytest.raises(RuntimeError, match=r"the failing child failed \(exit 1\):\nbroken"):
        failed.check("the failing child")


def test_a_childs_peak_is_its_own_even_when_its_parent_is_large(tmp_path: Path) -> None:
    """Linux carries ``ru_maxrss`` over fork and exec: a child of a 600 MB process must not report 600 MB."""
    parent_block = bytearray(600 * 2**20)
    parent_block[::4096] = b"x" * len(parent_block[::4096])  # touch every page: the parent is really large
    script = "import time; block = bytearray(100 * 2**20); time.sleep(0.3)"
    run = run_child([sys.executable, "-c", script], tmp_path / "child.log", timeout=60)
    assert 100 * 2**20 < run.peak_rss_bytes < 300 * 2**20
    del parent_block


def test_the_corpus_command_writes_then_reuses_and_refuses_bad_input(tmp_path: Path) -> None:
    sources = tmp_path / "train.en", tmp_path / "train.de"
    sources[0].write_text("a dog runs .\nthe man walks home .\n", encoding="utf-8")
    sources[1].write_text("ein Hund rennt .\nder Mann geht heim .\n", encoding="utf-8")
    command = [sys.executable, "-m", "benchmarks.large_corpus", "--source-files", *map(str, sources)]
    command += ["--output-dir", str(tmp_path / "out")]
    records = []
    for _ in range(2):
        completed = subprocess.run(
            [*command, "--pairs", "500"], capture_output=True, text=True, cwd=REPOSITORY, check=True
        )
        records.append(json.loads(completed.stdout))
    assert not records[0]["reused"] and records[0]["pairs_per_second"] > 0
    assert records[1]["reused"] and records[1]["files"] == records[0]["files"]
    assert len(Path(records[0]["files"][1]).read_text(encoding="utf-8").splitlines()) == 500
    refused = subprocess.run([*command, "--pairs", "0"], capture_output=True, text=True, cwd=REPOSITORY)
    assert refused.returncode == 2
    assert refused.stderr == "error: write_large_corpus: pairs=0 must be positive\n"


def test_the_report_states_the_machine_the_goals_and_the_failures() -> None:
    corpus = {
        "reused": False,
        "seconds": 2.0,
        "pairs_per_second": 10_000.0,
        "bytes": 5 * 2**20,
        "statistics": {"source": {"mean_words": 24.3, "p99_words": 81}},
    }
    process = {"seconds": 10.0, "peak_rss_bytes": 2**30}
    store = {**process, "build_seconds": 4.0, "input_pairs": 20_000, "pairs": 19_990, "bytes": 3 * 2**20}
    timing = {"pairs_per_second": 1000.0}
    record = {
        "environment": {
            "date_utc": "2026-11-23T20:00:00+00:00",
            "cpu": {"summary": "Some CPU (avx2, no AMX)", "logical_cpus": 2},
            "memory_gib": 24.0,
            "command": "python -m benchmarks.token_store --pairs 20000",
            "git_commit": "abc",
            "python": "3.11",
            "torch": "2",
            "allocator": "glibc",
        },
        "settings": {"threads": 1, "prepare_threads": 2},
        "sizes": [
            {
                "pairs": 20_000,
                "corpus": corpus,
                "prepare": {"vocabulary": process, "store": store},
                "encoding": {
                    "pairs": 20_000,
                    "threads": 1,
                    "store": timing,
                    "sentencepiece": timing,
                    "store_over_sentencepiece": 0.75,
                    "microseconds_per_pair": {"sentencepiece_one_thread": 100.0, "store_serial": 5.0},
                    "projected_store_over_sentencepiece": {1: 0.95, 16: 0.56},
                },
                "startup": {"store": {"error": "RuntimeError: transformer train failed\nTraceback"}},
            }
        ],
    }
    report = render_markdown(record)
    assert "**CPU: Some CPU (avx2, no AMX)**" in report and "`python -m benchmarks.token_store" in report
    assert "| 20,000 | 5.0 MiB | 2.0 s (10,000/s) | 24.3 / 81 | 10.0 s, 1.00 GiB |" in report
    assert "4.0 s (5,000 pairs/s)" in report
    assert "**0.75** (not met)" in report
    assert "100.0 µs per pair on one thread" in report and "by thread count, 1: 0.95, 16: 0.56" in report
    assert "- 20,000 pairs, store: `RuntimeError: transformer train failed`" in report
    assert "Not run: no size is at most `--in-memory-max-pairs`." in report


def test_startup_only_needs_a_store_this_benchmark_prepared(tmp_path: Path) -> None:
    """``--startup-only`` reuses a prepared run directory and refuses one the benchmark did not make or finish."""
    foreign = tmp_path / "run-20000"
    foreign.mkdir()
    with pytest.raises(SystemExit, match=r"run-20000 was not made by this benchmark"):
        prepared_run_dir(foreign)
    (foreign / RUN_MARKER).touch()
    with pytest.raises(SystemExit, match=r"run-20000 holds no finished token store"):
        prepared_run_dir(foreign)
    corpus = {"reused": True, "bytes": 2**20, "statistics": {"source": {"mean_words": 24.3, "p99_words": 81}}}
    startup = {
        "median_data_ready_seconds": 1.5,
        "median_first_step_seconds": 4.0,
        "median_first_step_own_seconds": 2.0,
    }
    record = {
        "environment": {
            "date_utc": "2026-11-24T00:00:00+00:00",
            "cpu": {"summary": "Some CPU", "logical_cpus": 2},
            "memory_gib": None,
            "command": "python -m benchmarks.token_store --startup-only",
            "git_commit": None,
            "python": "3.11",
            "torch": "2",
            "allocator": "glibc",
        },
        "settings": {"threads": 2, "prepare_threads": 2},
        "sizes": [{"pairs": 20_000, "corpus": corpus, "startup": {"store": startup}}],
    }
    report = render_markdown(record)
    assert "| 20,000 | 1.0 MiB | reused | 24.3 / 81 | not run (store reused) |" in report
    assert "| 20,000 | 1.5 s | 4.0 s (step itself 2.0 s) |" in report


def test_startup_only_describes_the_corpus_that_is_there_without_regenerating_it(tmp_path: Path) -> None:
    """Touching the corpus's sources would make the generator rewrite it; ``--startup-only`` must not care."""
    sources = tmp_path / "train.en", tmp_path / "train.de"
    sources[0].write_text("a dog runs .\nthe man walks home .\n", encoding="utf-8")
    sources[1].write_text("ein Hund rennt .\nder Mann geht heim .\n", encoding="utf-8")
    files = write_large_corpus(sources, tmp_path / "corpus-300", 300)
    written = [path.stat().st_mtime_ns for path in files]
    os.utime(
        sources[0], ns=(1, 1)
    )  # the sources look changed: generate_or_reuse would write the corpus again
    record = existing_corpus(tmp_path / "corpus-300", 300)
    assert record["reused"] and record["files"] == [str(path) for path in files]
    assert record["bytes"] == sum(path.stat().st_size for path in files)
    assert record["statistics"]["source"]["lines"] == 300
    assert [path.stat().st_mtime_ns for path in files] == written
    with pytest.raises(SystemExit, match=r"corpus-300 holds no generated corpus of 400 pairs"):
        existing_corpus(tmp_path / "corpus-300", 400)


def test_startup_timings_refuse_a_rebuilt_or_re_hashed_store() -> None:
    assert (
        store_not_reused_as_is("token store: reusing runs/a/token_store/train (10 pairs, sizes checked)\n")
        is None
    )
    rebuilt = "token store: encoding a.en and a.de into runs/a/token_store/train (none yet)\n"
    assert store_not_reused_as_is(rebuilt).startswith("rebuilt the token store")
    hashed = (
        "token store: reusing runs/a/token_store/train (10 pairs, sizes checked; the corpus files' modification "
        "times changed, their SHA-256 did not)\n"
    )
    assert store_not_reused_as_is(hashed).startswith("re-hashed the corpus")
