"""The quality-speed benchmark of issue #49 (benchmarks/pareto.py): rows, scores, targets, report, resuming."""

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks import pareto, pareto_report
from benchmarks.bench_common import describe_import_failure
from benchmarks.pareto_record import ParetoRecord
from benchmarks.pareto_report import pareto_front, render_markdown
from benchmarks.pareto_systems import SystemSet
from transformer.cli import main as cli_main
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_files import read_lines, read_parallel_files
from transformer.decoding.translator import Translator
from transformer.device import cpu_has_native_bf16
from transformer.evaluation.bleu import score_translations


def _expected_systems() -> set[str]:
    """The systems this machine can build for a post-norm checkpoint with a shortlist."""
    precisions = ["fp32", "int8"] + (["bf16"] if cpu_has_native_bf16() else [])
    systems = {f"ours {p}" for p in precisions} | {f"ours {p} + shortlist" for p in precisions}
    if describe_import_failure("ctranslate2") is None:
        systems |= {"CTranslate2 int8", "CTranslate2 int8 + vmap", "CTranslate2 fp32"}
    if all(describe_import_failure(name) is None for name in ("onnx", "onnxscript", "onnxruntime")):
        systems |= {"onnxruntime fp32", "onnxruntime int8"}
    if describe_import_failure("transformers") is None:
        systems.add("HF generate() fp32")
    return systems


def test_the_benchmark_measures_every_system_scores_what_it_translated_and_resumes(
    trained_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    assert cli_main(["shortlist", "--checkpoint", str(run)]) == 0
    output = tmp_path / "front.json"
    source, reference = run / "data" / "valid.en", run / "data" / "valid.de"
    arguments = ["--checkpoint", str(run), "--source", str(source), "--reference", str(reference), "--limit", "6",
                 "--latency-sentences", "3", "--threads", "1", "--searches", "greedy", "--output", str(output),
                 "--no-tcmalloc"]  # fmt: skip
    pareto.main(arguments)
    record = json.loads(output.read_text())
    expected = _expected_systems()
    assert {row["system"] for row in record["rows"]} == expected
    assert not expected & set(record["skipped"])
    assert sorted((row["system"], row["mode"]) for row in record["rows"]) == sorted(
        (system, mode) for system in expected for mode in ("throughput", "latency")
    )
    rows = {(row["system"], row["mode"]): row for row in record["rows"]}
    # The BLEU on record is that of the translations the system gives: ours fp32, greedy, power penalty.
    pairs = read_parallel_files(source, reference)[:6]
    search = DecodeConfig(beam_size=1, length_penalty=1.0, length_penalty_form="power")
    translations = Translator.from_checkpoint(run, decode_config=search).translate([p[0] for p in pairs])
    scores = score_translations(translations, [p[1] for p in pairs], lowercase=True)
    fp32 = rows[("ours fp32", "throughput")]
    assert fp32["bleu"] == pytest.approx(scores.bleu)
    tokenizer = Translator.from_checkpoint(run).tokenizer
    assert fp32["target_tokens"] == sum(len(tokenizer.encode_target(text)) for text in translations if text)
    assert fp32["tokens_per_second"] == pytest.approx(fp32["target_tokens"] / fp32["seconds"])
    assert fp32["sentences_per_second"] == pytest.approx(6 / fp32["seconds"])
    latency = rows[("ours int8", "latency")]
    assert latency["sentences"] == 3 and 0 < latency["p50_ms"] <= latency["p90_ms"]
    coverage = record["coverage"]
    assert (
        coverage["steps"] > 0 and 0 < coverage["fraction"] <= 1 and coverage["covered"] <= coverage["steps"]
    )
    markdown = output.with_suffix(".md").read_text()
    assert "## Targets (issue #49)" in markdown and "| shortlist step coverage |" in markdown
    assert output.with_suffix(".png").read_bytes().startswith(b"\x89PNG")

    def must_not_run(*args: object) -> None:
        pytest.fail("a finished row was measured again")

    monkeypatch.setattr(pareto, "measure_throughput", must_not_run)
    monkeypatch.setattr(pareto, "measure_latency", must_not_run)
    pareto.main(arguments)
    again = json.loads(output.read_text())
    assert again["rows"] == record["rows"] and len(again["runs"]) == 2
    with pytest.raises(
        SystemExit, match=r"front\.json: recorded with other settings \(latency_sentences, sentences\)"
    ):
        pareto.main([*arguments, "--limit", "5", "--latency-sentences", "2"])  # the last of a flag wins


def _row(system: str, engine: str, precision: str, search: str, mode: str, **values: float) -> dict[str, Any]:
    """A stored row with the given figures."""
    shortlist = "shortlist" in system or "vmap" in system
    row = {
        "system": system,
        "engine": engine,
        "precision": precision,
        "shortlist": shortlist,
        "search": search,
    }
    return row | {"threads": 1, "mode": mode, "repeat": 0, "run": 0, **values}


def _throughput(speed: float, bleu: float) -> dict[str, float]:
    """The throughput figures of a row running at ``speed`` sentences/s."""
    return {"seconds": 10 / speed, "sentences_per_second": speed, "target_tokens": 100, "tokens_per_second": 10 * speed,
            "bleu": bleu, "bleu_cased": bleu - 1, "chrf": 60.0}  # fmt: skip


def test_the_targets_table_compares_each_system_with_its_peer_in_its_condition(tmp_path: Path) -> None:
    environment = {"cpu": {"summary": "a CPU", "isa_flags": ["avx2"]}, "torch": "2", "allocator": "malloc"}
    settings = {
        "checkpoint": "ckpt",
        "source": "val.en",
        "sentences": 10,
        "batch_size": 32,
        "latency_sentences": 4,
    }
    record = ParetoRecord(tmp_path / "r.json", {"environment": environment, "settings": settings, "runs": [],
                                                "rows": [], "skipped": {"HF generate() fp32": "no"}, "coverage": None})  # fmt: skip
    record.rows.extend([
        _row("ours int8", "ours", "int8", "greedy", "throughput", **_throughput(26.0, 30.0)),
        _row("CTranslate2 int8", "ctranslate2", "int8", "greedy", "throughput", **_throughput(20.0, 30.1)),
        _row("ours fp32", "ours", "fp32", "greedy", "throughput", **_throughput(10.0, 31.0)),
        _row("ours fp32 + shortlist", "ours", "fp32", "greedy", "throughput", **_throughput(13.0, 30.8)),
        _row("CTranslate2 fp32", "ctranslate2", "fp32", "greedy", "throughput", **_throughput(12.0, 31.0)),
        _row("ours int8", "ours", "int8", "greedy", "latency", p50_ms=9.0, p90_ms=12.0, mean_ms=10.0),
        _row("CTranslate2 int8", "ctranslate2", "int8", "greedy", "latency", p50_ms=10.0, p90_ms=11.0, mean_ms=10.0),
    ])  # fmt: skip
    record.data["coverage"] = {"steps": 200, "covered": 197, "fraction": 0.985, "mean_shortlist_size": 300.0,
                               "vocabulary": 10000}  # fmt: skip
    markdown = render_markdown(record)
    assert (
        "| ours int8 / CTranslate2 int8, sentences/s | greedy, 1 thr | 1.30x (goal 1.3x) | met |" in markdown
    )
    assert (
        "| ours fp32 / CTranslate2 fp32, sentences/s | greedy, 1 thr | 0.83x (goal 1x) | **not met** |"
        in markdown
    )
    assert "| shortlist speed-up, fp32 greedy | greedy, 1 thr | 1.30x (goal 1.4x) | **not met** |" in markdown
    assert "| shortlist BLEU - full BLEU, fp32 | greedy | -0.20 (goal within 0.1) | **not met** |" in markdown
    assert "| shortlist step coverage | greedy, fp32 | 98.50% (goal 99%) | **not met** |" in markdown
    assert "| batch-1 p50, CTranslate2 int8 / ours int8 | greedy, 1 thr | 1.11x (goal 1x) | met |" in markdown
    assert "| 1 | greedy | ours int8 | 30.00 | 29.00 | 60.0 | 26.0 | 260 | 1.30x | 1 |" in markdown
    assert "- HF generate() fp32: no" in markdown
    assert "held the chosen token on 197 of 200 steps (98.50%), scoring 300 of 10,000 pieces" in markdown


def test_the_front_keeps_the_points_no_faster_point_beats_in_quality() -> None:
    points = [(1.0, 5.0), (2.0, 4.0), (3.0, 6.0), (0.5, 7.0), (3.0, 5.5)]
    assert pareto_front(points) == [(3.0, 6.0), (0.5, 7.0)]
    assert pareto_front([]) == []


def test_latency_sentences_are_spread_over_the_set() -> None:
    assert pareto.evenly_spaced(10, 3) == [0, 3, 6]
    assert pareto.evenly_spaced(2, 5) == [0, 1]


def test_each_system_at_its_fastest_thread_count_and_the_report_rebuilt_from_its_record(
    tmp_path: Path,
) -> None:
    environment = {"cpu": {"summary": "a CPU", "isa_flags": ["avx2"]}, "torch": "2", "allocator": "malloc"}
    settings = {"checkpoint": "c", "source": "s", "sentences": 10, "batch_size": 32, "latency_sentences": 4}
    rows = []
    for threads, ours, theirs in ((1, 10.0, 30.0), (2, 18.0, 12.0)):  # the peer is fastest at 1 thread
        for name, engine, speed in (("ours int8", "ours", ours), ("CTranslate2 int8", "ctranslate2", theirs)):
            row = _row(name, engine, "int8", "greedy", "throughput", **_throughput(speed, 30.0))
            rows.append(row | {"threads": threads})
    for name, engine, speed in (("ours int8 (2 workers)", "ours", 25.0), ("CTranslate2 int8 (2 workers)",
                                                                        "ctranslate2", 50.0)):  # fmt: skip
        rows.append(
            _row(name, engine, "int8", "greedy", "throughput", **_throughput(speed, 30.0)) | {"threads": 2}
        )
    path = tmp_path / "record.json"
    data = {
        "environment": environment,
        "settings": settings,
        "runs": [],
        "rows": rows,
        "skipped": {},
        "coverage": None,
    }
    path.write_text(json.dumps(data))
    pareto_report.main([str(path)])
    markdown = path.with_suffix(".md").read_text()
    assert (
        "| ours int8 / CTranslate2 int8, sentences/s | greedy, 2 thr | 1.50x (goal 1.3x) | met |" in markdown
    )
    best = "| ours int8 / CTranslate2 int8, sentences/s | greedy, best thread count (2 / 1 thr) | 0.60x"
    assert best + " (goal 1.3x) | **not met** |" in markdown
    fastest = "| ours int8 / CTranslate2 int8, sentences/s | greedy, each at its fastest (2 thr as 2 workers / 2 thr"
    assert fastest + " as 2 workers) | 0.50x (goal 1.3x) | **not met** |" in markdown
    assert path.with_suffix(".png").read_bytes().startswith(b"\x89PNG")
    assert json.loads(path.read_text())["runs"] == []  # rebuilt, not rerun


def test_the_student_is_judged_greedy_against_its_teacher_at_beam_4(tmp_path: Path) -> None:
    environment = {"cpu": {"summary": "a CPU", "isa_flags": ["avx2"]}, "torch": "2", "allocator": "malloc"}
    settings = {"checkpoint": "teacher", "student": "student", "source": "val.en", "sentences": 10, "batch_size": 32,
                "latency_sentences": 4}  # fmt: skip
    record = ParetoRecord(tmp_path / "r.json", {"environment": environment, "settings": settings, "runs": [],
                                                "rows": [], "skipped": {}, "coverage": None})  # fmt: skip
    record.rows.extend([
        _row("ours int8", "ours", "int8", "beam 4", "throughput", **_throughput(10.0, 35.0)),
        _row("ours fp32", "ours", "fp32", "beam 4", "throughput", **_throughput(6.0, 35.2)),
        _row("CTranslate2 int8", "ctranslate2", "int8", "beam 4", "throughput", **_throughput(25.0, 35.0)),
        _row("student int8 + shortlist", "student", "int8", "greedy", "throughput", **_throughput(45.0, 34.0)),
        _row("student int8 + shortlist", "student", "int8", "beam 4", "throughput", **_throughput(20.0, 34.5)),
        _row("ours int8 (2 workers)", "ours", "int8", "beam 4", "throughput", **_throughput(12.0, 35.0)),
        _row("student int8 + shortlist (2 workers)", "student", "int8", "greedy", "throughput",
             **_throughput(60.0, 34.0)),
    ])  # fmt: skip
    record.data["student_coverage"] = {"steps": 100, "covered": 99, "fraction": 0.99, "mean_shortlist_size": 250.0,
                                       "vocabulary": 10000}  # fmt: skip
    markdown = render_markdown(record)
    assert (
        "the student's shortlist held the chosen token on 99 of 100 steps (99.00%), scoring 250" in markdown
    )
    assert (
        "| student int8 + shortlist greedy / teacher ours int8 beam 4, sentences/s | 1 thr | 4.50x (goal 4x) | met |"
        in markdown
    )
    assert (
        "| student int8 + shortlist greedy / teacher CTranslate2 int8 beam 4, sentences/s | 1 thr | 1.80x (goal 2x) "
        "| **not met** |" in markdown
    )
    assert (
        "| student BLEU - teacher fp32 beam 4 BLEU | 1 thr | -1.20 (goal within 1) | **not met** |"
        in markdown
    )
    # With workers, the student is read against the teacher run the same way, and not against CTranslate2.
    assert (
        "| student int8 + shortlist (2 workers) greedy / teacher ours int8 (2 workers) beam 4, sentences/s | 1 thr "
        "| 5.00x (goal 4x) | met |" in markdown
    )
    assert "shortlist (2 workers) greedy / teacher CTranslate2" not in markdown


def test_workers_rows_translate_what_one_batch_at_a_time_does(trained_run: Path, tmp_path: Path) -> None:
    sentences = read_lines(trained_run / "data" / "valid.en")[:20]
    batches = [list(range(start, min(start + 4, 20))) for start in range(0, 20, 4)]
    before = torch.get_num_threads()
    try:
        with SystemSet(trained_run, sentences, tmp_path, {"ours"}, ["fp32"], workers=2) as systems:
            names = [system.name for system in systems.systems]
            assert names == ["ours fp32", "ours fp32 (2 workers)"]  # no shortlist file: none shortlisted
            alone, together = systems.systems
            assert alone.translate_batches is None and together.workers == 2
            systems.set_threads(1)
            expected = [alone.translate(batch, 4)[0] for batch in batches]
            systems.set_threads(2)  # two workers on one thread each: the arithmetic of one thread
            found, seconds = together.translate_batches(batches, 4)
            assert torch.get_num_threads() == 2  # given back
    finally:
        torch.set_num_threads(before)
    assert found == expected and seconds > 0


@pytest.mark.skipif(
    describe_import_failure("ctranslate2") is not None, reason="ctranslate2 (the interop extra)"
)
def test_ctranslate2_workers_rows_translate_what_one_batch_at_a_time_does(
    trained_run: Path, tmp_path: Path
) -> None:
    sentences = read_lines(trained_run / "data" / "valid.en")[:20]
    batches = [list(range(start, min(start + 4, 20))) for start in range(0, 20, 4)]
    before = torch.get_num_threads()
    try:
        with SystemSet(trained_run, sentences, tmp_path, {"ctranslate2"}, ["fp32"], workers=2) as systems:
            by_name = {system.name: system for system in systems.systems}
            assert sorted(by_name) == ["CTranslate2 fp32", "CTranslate2 fp32 (2 workers)", "CTranslate2 int8",
                                       "CTranslate2 int8 (2 workers)"]  # fmt: skip
            alone, together = by_name["CTranslate2 int8"], by_name["CTranslate2 int8 (2 workers)"]
            assert alone.translate_batches is None and together.workers == 2
            systems.set_threads(1)
            expected = [alone.translate(batch, 4)[0] for batch in batches]
            systems.set_threads(2)  # two inter_threads of one intra-op thread each
            found, seconds = together.translate_batches(batches, 4)
    finally:
        torch.set_num_threads(before)
    assert found == expected and seconds > 0
    assert (tmp_path / "ct2-worker-1x2.stderr").exists()  # a worker of its own: intra 1, inter 2


@pytest.mark.skipif(
    any(describe_import_failure(name) is not None for name in ("onnx", "onnxscript", "onnxruntime")),
    reason="onnx, onnxscript and onnxruntime (the onnx extra)",
)
def test_onnxruntime_rows_translate_what_our_fp32_row_does(trained_run: Path, tmp_path: Path) -> None:
    sentences = read_lines(trained_run / "data" / "valid.en")[:12]
    before = torch.get_num_threads()
    try:
        with SystemSet(trained_run, sentences, tmp_path, {"ours", "onnxruntime"}, ["fp32"]) as systems:
            by_name = {system.name: system for system in systems.systems}
            assert {"onnxruntime fp32", "onnxruntime int8"} <= set(by_name)
            systems.set_threads(1)
            for beam in (1, 4):
                expected = by_name["ours fp32"].translate(list(range(12)), beam)[0]
                found, seconds = by_name["onnxruntime fp32"].translate(list(range(12)), beam)
                assert found == expected and seconds > 0
            systems.set_threads(2)  # a session of its own per thread count, the same translations
            assert (
                by_name["onnxruntime fp32"].translate(list(range(12)), 1)[0]
                == by_name["ours fp32"].translate(list(range(12)), 1)[0]
            )
    finally:
        torch.set_num_threads(before)
