"""The benchmark suite runs end to end and writes its reports; nothing here is about speed."""

import importlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from benchmarks import (
    bench_ctranslate2,
    bench_data,
    bench_flops,
    bench_reference,
    bench_settings,
    bench_worker,
    evaluate_run,
)
from benchmarks import run as benchmark_run
from benchmarks.bench_settings import Settings
from tests.conftest import CPU_BF16_UNSUPPORTED
from transformer import Transformer, TransformerConfig

REPOSITORY = Path(__file__).resolve().parent.parent
# Packages run from the repository root with `python -m`: `python -m benchmarks.run --quick`.
PACKAGES = ("benchmarks", "experiments")
SECTIONS = ["matmul", "training", "translation", "attention", "memory", "quality"]
# What reaching a module by editing the import path looks like, in code or in a child process's environment.
IMPORT_PATH_EDIT = re.compile(r"\bsys\.path\b|\baddsitedir\b|[\"']PYTHONPATH[\"']")


def package_sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (REPOSITORY / package).rglob("*.py"))


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPOSITORY).with_suffix("").parts).removesuffix(".__init__")


def test_benchmarks_and_experiments_are_packages_that_edit_no_import_path() -> None:
    sources = package_sources()
    assert REPOSITORY / "benchmarks" / "run.py" in sources
    for directory in sorted({path.parent for path in sources}):
        assert (directory / "__init__.py").is_file(), f"{directory} holds modules but is not a package"
    edits = [
        f"{path.relative_to(REPOSITORY)}:{number}: {line.strip()}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if IMPORT_PATH_EDIT.search(line)
    ]
    assert not edits, "import the packages instead of editing the import path:\n" + "\n".join(edits)


@pytest.mark.parametrize("path", package_sources(), ids=lambda path: str(path.relative_to(REPOSITORY)))
def test_every_module_imports_as_part_of_its_package(path: Path) -> None:
    module = importlib.import_module(module_name(path))
    # This checkout's file under its dotted name (not an installed copy, not a script run by path).
    assert module.__name__ == module_name(path)
    assert Path(module.__file__ or "").resolve() == path.resolve()
    assert module.__doc__ and module.__doc__.strip(), (
        f"{path.relative_to(REPOSITORY)} has no module docstring"
    )


def test_suite_runs_as_a_module_and_by_path_says_how() -> None:
    as_module = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPOSITORY,
        check=False,
    )
    assert as_module.returncode == 0, as_module.stderr
    assert as_module.stdout.startswith("usage: python -m benchmarks.run")
    by_path = subprocess.run(
        [sys.executable, "benchmarks/run.py", "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPOSITORY,
        check=False,
    )
    assert by_path.returncode == 1
    assert by_path.stderr.strip() == "run from the repository root: python -m benchmarks.run --quick"


def test_workers_run_as_modules_with_absolute_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # workers start in the repository root, so relative paths are made absolute
    command = bench_worker.worker_command("benchmarks.bench_attention", {"length": 8, "model-dir": Path("m")})
    assert command == [
        *(sys.executable, "-m", "benchmarks.bench_attention"),
        *("--length", "8", "--model-dir", str(tmp_path / "m")),
    ]
    assert bench_worker.REPOSITORY == REPOSITORY


def assert_training_rows(record: dict, floats: set[str]) -> None:
    """The smoke suite's training rows: ours and the reference in each precision, fairseq where installed."""
    environment = record["environment"]
    training = record["sections"]["training"]["rows"]
    assert {row["system"] for row in training} >= {
        "ours",
        "nn.Transformer reference (dropout 0.1 everywhere)",
    }
    assert {row["precision"] for row in training} == floats
    assert record["settings"]["bf16_skipped"] == CPU_BF16_UNSUPPORTED
    assert all(row["tokens_per_s"] > 0 and row["mfu"] is not None for row in training)
    # fairseq, a peer installed by benchmarks/install_peers.sh (CI does): timed beside ours in every fp32 cell.
    fairseq_rows = [row for row in training if row["system"].startswith("fairseq")]
    skipped = {entry["system"] for entry in record["sections"]["training"]["skipped"]}
    if importlib.util.find_spec("fairseq") is not None:
        assert environment["optional_packages"]["fairseq-fixed"], "the report must name the fairseq it timed"
        fp32_cells = {row["model"] for row in training if row["precision"] == "fp32"}
        assert {row["model"] for row in fairseq_rows} == fp32_cells and "fairseq" not in skipped
        assert all(row["precision"] == "fp32" and row["ours_over_this"] > 0 for row in fairseq_rows)
    else:
        assert not fairseq_rows and "fairseq" in skipped


def assert_translation_rows(record: dict, floats: set[str]) -> None:
    """The smoke suite's translation rows: ours in each search and precision, the peers on the same work."""
    translation = record["sections"]["translation"]["rows"]
    ours = [row for row in translation if row["system"] == "ours"]
    assert {(row["beam_size"], row["use_cache"]) for row in ours} >= {(1, True), (4, True), (1, False)}
    assert all(row["forced_length_ok"] for row in ours)
    assert {row["precision"] for row in ours if row["use_cache"]} == floats | {"int8"}
    # The peers run the same forced work; CTranslate2 answers from its worker process (bench_ctranslate2).
    peers = [row for row in translation if row["system"] != "ours"]
    expected_peers = {"HF MarianMTModel.generate()"}
    if importlib.util.find_spec("ctranslate2") is not None:  # an interop extra, installed in CI
        expected_peers.add("CTranslate2")
        assert {row["precision"] for row in peers if row["system"] == "CTranslate2"} >= {"float32", "int8"}
        ct2_int8 = [row for row in peers if row["system"] == "CTranslate2" and row["precision"] == "int8"]
        assert all(row["compared_with"] == "ours int8 (cache)" for row in ct2_int8)
    assert {row["system"] for row in peers} == expected_peers
    assert all(row["forced_length_ok"] and row["ours_over_this"] > 0 for row in peers)


@pytest.mark.slow
def test_smoke_suite_writes_json_and_markdown_reports(tmp_path: Path, trained_run: Path) -> None:
    output_dir = tmp_path / "results"
    command = [
        sys.executable,
        *("-m", "benchmarks.run"),
        "--smoke",
        "--run",
        str(trained_run),
        "--output-dir",
        str(output_dir),
    ]
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=600, cwd=REPOSITORY, check=False
    )
    assert completed.returncode == 0, completed.stderr[-4000:]

    record = json.loads((output_dir / "latest.json").read_text(encoding="utf-8"))
    assert list(record["sections"]) == SECTIONS
    for name, section in record["sections"].items():
        assert section["status"] == "ok", f"{name}: {section['error']}"
        assert section["rows"], name
        assert section["method"], name
    environment = record["environment"]
    for key in ("cpu", "python", "torch", "allocator", "threads", "date_utc", "command"):
        assert environment[key], key
    assert environment["cpu"]["model"] in environment["cpu"]["summary"]  # model and flags label the figures
    # As typed, even after re-executing under tcmalloc: the module, not the path sys.argv[0] gives.
    assert environment["command"].startswith("python -m benchmarks.run --smoke")
    assert record["settings"]["mode"] == "smoke"

    floats = {"fp32"} if CPU_BF16_UNSUPPORTED else {"fp32", "bf16"}  # bf16 where the CPU runs it natively
    assert_training_rows(record, floats)
    assert_translation_rows(record, floats)
    attention = record["sections"]["attention"]["rows"]
    assert len(attention) == 2 * len(record["settings"]["attention_lengths"])
    longest = max(record["settings"]["attention_lengths"])
    explicit = next(
        row for row in attention if row["length"] == longest and "explicit" in row["implementation"]
    )
    assert explicit["peak_increase_mib"] > 0  # measured in the worker, not inherited from the parent process
    memory = record["sections"]["memory"]["rows"]
    assert [(row["accumulate"], row["tokens_per_step"]) for row in memory] == [(2, 128), (1, 64)]
    # Measured in a fresh worker: the peak covers at least the resident memory before the step.
    assert all(row["peak_rss_gib"] >= row["rss_before_step_gib"] > 0 for row in memory)
    quality = record["sections"]["quality"]["rows"]
    assert [row["step"] for row in quality] == sorted(row["step"] for row in quality)
    assert all(0.0 <= row["bleu"] <= 100.0 for row in quality)

    markdown = (output_dir / "latest.md").read_text(encoding="utf-8")
    for heading in (
        "## Peak matmul throughput",
        "## Training step throughput",
        "## Translation throughput",
        "## Attention time and peak memory",
        "## Training memory at the paper's batch size",
        "## Time to quality",
    ):
        assert heading in markdown
    for text in ("ours / this", "MFU", "allocator", environment["command"], environment["cpu"]["summary"]):
        assert text in markdown
    assert len(list(output_dir.glob("2*.json"))) == 1
    assert len(list(output_dir.glob("2*.md"))) == 1


def test_training_and_translation_select_matmul_and_quality_needs_a_run() -> None:
    select = benchmark_run.selected_sections
    assert select(None, None) == ["matmul", "training", "translation", "attention", "memory"]
    assert select(None, Path("some-run")) == SECTIONS
    assert select("training", None) == ["matmul", "training"]
    assert select("attention, translation", None) == ["matmul", "translation", "attention"]
    assert select("attention", None) == ["attention"]
    with pytest.raises(SystemExit, match="unknown sections"):
        select("training,speed", None)


def test_flop_count_is_six_times_matmul_parameters_plus_attention() -> None:
    config = TransformerConfig(
        vocab_size=100, d_model=32, d_ff=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=3
    )
    model = Transformer(config)
    linear_weights = sum(module.weight.numel() for module in model.modules() if isinstance(module, nn.Linear))
    matmul_parameters = linear_weights + config.vocab_size * config.d_model  # plus the tied output projection
    shape = bench_flops.ModelShape(
        d_model=32, d_ff=64, vocab_size=100, num_encoder_layers=2, num_decoder_layers=3
    )
    # One position per side: attention costs 4 d per encoder layer and 4 d + 4 d per decoder layer.
    attention = 4 * 32 * 2 + 8 * 32 * 3
    assert bench_flops.training_flops_per_target_token(shape, 1, 1) == 6 * matmul_parameters + 3 * attention


def test_decoding_flops_count_the_cache_the_beams_and_the_shared_source_once() -> None:
    shape = bench_flops.ModelShape(
        d_model=8, d_ff=16, vocab_size=10, num_encoder_layers=1, num_decoder_layers=2
    )
    d, f, vocab, source = 8, 16, 10, 3
    encoder = 2 * source * (4 * d * d + 2 * d * f) + 4 * source * source * d
    cross_keys_values = 2 * (2 * source * 2 * d * d)  # two decoder layers, once per sentence
    # Two steps attend to 1 then 2 cached positions: 4 d (1 + 2) per layer.
    step_products = 2 * (4 * d * d + 2 * d * f) + 2 * 2 * d * d + 4 * source * d
    hypothesis = 2 * (2 * step_products + 4 * d * 3) + 2 * 2 * d * vocab
    assert (
        bench_flops.decoding_flops_per_sentence(shape, source, 2, 1)
        == encoder + cross_keys_values + hypothesis
    )
    beam_of_four = bench_flops.decoding_flops_per_sentence(shape, source, 2, 4)
    assert beam_of_four == encoder + cross_keys_values + 4 * hypothesis  # the encoder is not run per beam


def test_reference_model_takes_a_training_step() -> None:
    model = bench_reference.ReferenceTransformer(
        vocab_size=50,
        d_model=16,
        num_heads=2,
        d_ff=32,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.1,
        residual_dropout_only=True,
        pad_id=0,
    )
    batch = bench_data.fixed_batches(bench_data.synthetic_corpus(4, 6, 50), 4)[0]
    assert batch.num_target_tokens == 24 and batch.padding_ratio == 0.0
    step = bench_reference.build_reference_step(
        model, [(batch.src_tokens, batch.tgt_input, batch.tgt_output)], "fp32"
    )
    before = model.embedding.weight.detach().clone()
    assert step() > 0.0
    assert not model.embedding.weight.detach().equal(before)


def test_ctranslate2_worker_failure_is_an_error_with_its_stderr(tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    missing = tmp_path / "no-such-model"
    with pytest.raises(RuntimeError, match="CTranslate2 worker exited") as raised:
        bench_ctranslate2.CTranslate2Worker(missing, [[["a"]]], ["int8"], 1, tmp_path)
    assert str(missing) in str(raised.value)  # the worker's own error names the directory


@pytest.mark.slow
def test_evaluate_run_scores_the_runs_own_search_beside_the_papers(tmp_path: Path, trained_run: Path) -> None:
    # The tiny run decodes with beam 2: its own search must be scored and labelled beside the paper's beam 4.
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)  # the script writes the averaged checkpoint into the run
    output = tmp_path / "evaluation.json"
    threads = torch.get_num_threads()
    try:
        status = evaluate_run.main(
            [
                *("--run", str(run_dir), "--source", str(run_dir / "data" / "valid.en")),
                *("--reference", str(run_dir / "data" / "valid.de"), "--average-last", "2"),
                *("--repeats", "1", "--uncached-sentences", "4", "--threads", "1"),
                *("--output", str(output)),
            ]
        )
    finally:
        torch.set_num_threads(threads)
    assert status == 0
    report = json.loads(output.read_text(encoding="utf-8"))
    assert report["command"].startswith("python -m benchmarks.evaluate_run --run ")  # runnable as recorded
    searches = [(row["search"], row["precision"]) for row in report["quality"]]
    assert searches.count(("beam 4, GNMT 0.6", "fp32")) == 3
    assert searches.count(("beam 2, GNMT 0.6", "fp32")) == 3
    assert searches.count(("greedy", "fp32")) == 3
    assert searches.count(("beam 4, GNMT 0.6", "int8")) == searches.count(("greedy", "int8")) == 1
    floats = {"fp32"} if CPU_BF16_UNSUPPORTED else {"fp32", "bf16"}
    assert {row["precision"] for row in report["speed"]} == floats | {"int8"}
    assert report["bf16_skipped"] == CPU_BF16_UNSUPPORTED
    assert report["cpu"] == evaluate_run.describe_cpu()  # the label of its speed figures
    assert all(0.0 <= row["bleu"] <= 100.0 for row in report["quality"])
    assert report["training"]["steps"] == 24
    for row in report["ctranslate2"]:
        if "skipped" not in row:
            assert row["search"] in ("greedy", "beam 4, power 0.6")


def test_settings_drop_every_bf16_row_where_the_cpu_only_emulates_it(monkeypatch) -> None:
    quick = Settings.for_mode("quick")
    emulated = quick.for_machine("faked: no native bf16 here")
    assert emulated.precisions == ("fp32",) and emulated.bf16_skipped == "faked: no native bf16 here"
    assert emulated.training_cells == (("small", "fp32"),)
    full = Settings.for_mode("full").for_machine("faked")
    assert all(
        "bf16" not in cell for cell in (*full.training_cells, *full.translation_uncached, *full.memory_cells)
    )
    # The memory comparison (accumulated against single micro-batches) is kept, measured in fp32, each once.
    assert full.memory_cells == (("base", "fp32", 6250, 4), ("base", "fp32", 6250, 1))
    smoke = Settings.for_mode("smoke").for_machine("faked")
    assert smoke.memory_cells == (("tiny", "fp32", 64, 2), ("tiny", "fp32", 64, 1))
    monkeypatch.setattr(bench_settings, "bf16_unsupported_reason", lambda device: None)  # a native-bf16 CPU
    native = quick.for_machine()
    assert native == quick and native.precisions == ("fp32", "bf16")
