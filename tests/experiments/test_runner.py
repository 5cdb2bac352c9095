"""The experiment runner at tiny scale: end to end, skip on rerun, resume after a kill, failures, stale configs."""

import dataclasses
import gzip
import json
import os
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

from transformer.checkpoint.layout import read_index
from transformer.evaluation.bleu import score_translations
from transformer.experiments.common.curves import plot_curves, read_nll_curves
from transformer.experiments.common.plan import (
    Variant,
    config_differences,
    config_fingerprint,
    run_config,
    with_base_overrides,
)
from transformer.experiments.common.provenance import SourceState
from transformer.experiments.common.results import (
    append_result,
    format_mean_and_count,
    format_metric,
    load_sentences,
    read_results,
    store_sentences,
)
from transformer.experiments.common.runner import run_experiment
from transformer.experiments.table2.settings import build_plan, scaled_row


def test_tiny_table_runs_end_to_end_and_a_rerun_skips_it(tmp_path: Path) -> None:
    plan = build_plan("tiny")
    messages: list[str] = []
    outcome = run_experiment(
        plan, tmp_path, only=["base", "C4"], report=messages.append, poll_seconds=0.05, allow_dirty=True
    )
    assert outcome.finished == ["base-s1", "C4-s1"] and not outcome.failed and not outcome.skipped
    records = {record["variant"]: record for record in read_results(tmp_path / "results.jsonl")}
    assert set(records) == {"base", "C4"}
    for record in records.values():
        assert record["train_steps"] == 4 and record["stop_reason"] == "max_steps"
        assert 1.0 < record["dev_perplexity"] < 1000 and 0.0 <= record["dev_bleu"] <= 100.0
        assert record["config_sha256"] and record["seed"] == 1 and record["machine"]
    # C4 halves d_model (and d_k), so it has fewer parameters; both share one vocabulary.
    assert (
        records["C4"]["config"]["model"]["d_model"] == 16
        and records["base"]["config"]["model"]["d_model"] == 32
    )
    assert records["C4"]["params"] < records["base"]["params"]
    tokenizers = {
        (tmp_path / "runs" / name / "tokenizer.model").read_bytes() for name in ("base-s1", "C4-s1")
    }
    assert len(tokenizers) == 1
    table = (tmp_path / "table.md").read_text(encoding="utf-8")
    base_row = next(line for line in table.splitlines() if line.startswith("| base |"))
    assert base_row.startswith("| base | 1 | 32 | 128 | 8 | 4 | 4 | 0.1 | 0.1 | 4 |")
    assert f"{records['base']['dev_perplexity']:.2f}" in base_row
    assert next(line for line in table.splitlines() if line.startswith("| A1 |")).count(" - ") >= 4  # not run
    assert (tmp_path / "table2.png").stat().st_size > 1000
    assert (tmp_path / "table2-curves-D.png").stat().st_size > 1000  # base's curves (no D row run here)
    # Each record points to its dev translations and references, kept beside the results for paired tests.
    for record in records.values():
        hypotheses = load_sentences(tmp_path, record["dev_hypotheses"])
        references = load_sentences(tmp_path, record["dev_references"])
        assert len(hypotheses) == len(references) == 12
        assert score_translations(hypotheses, references).bleu == pytest.approx(record["dev_bleu"])
        assert record["commits"][-1] == record["commit"] and record["dirty"] == record["commit"].endswith(
            "+dirty"
        )
    assert records["base"]["dev_references"] == records["C4"]["dev_references"]
    # ... and its training and validation curves (#29: row D's claim is about overfitting).
    _, validation = read_nll_curves(tmp_path, records["base"]["curves"])
    steps, losses = [step for step, _ in validation], [nll for _, nll in validation]
    assert records["base"]["curves"] == "curves/base-s1.metrics.jsonl" and steps[-1] == 4 and len(losses) >= 2
    assert plot_curves(list(records.values()), tmp_path, ["base", "D1"], tmp_path / "curves.png") is not None
    assert plot_curves(list(records.values()), tmp_path, ["D1"], tmp_path / "none.png") is None

    again = run_experiment(
        plan, tmp_path, only=["base", "C4"], report=messages.append, poll_seconds=0.05, allow_dirty=True
    )
    assert again.skipped == ["base-s1", "C4-s1"] and not again.finished
    assert len(read_results(tmp_path / "results.jsonl")) == 2


def test_a_failing_variant_is_reported_with_its_log_and_the_others_go_on(tmp_path: Path) -> None:
    plan = build_plan("tiny")
    broken = Variant("broken", {"train.max_tokens": 4}, "broken")  # no sentence pair fits: training fails
    plan = dataclasses.replace(plan, variants=[broken, plan.variant("base")])
    messages: list[str] = []
    outcome = run_experiment(plan, tmp_path, report=messages.append, poll_seconds=0.05, allow_dirty=True)
    log = tmp_path / "runs" / "broken-s1" / "log.txt"
    assert outcome.failed == [f"broken-s1 ({log})"] and outcome.finished == ["base-s1"]
    failure = next(message for message in messages if "broken-s1 FAILED" in message)
    assert "max_tokens" in failure and str(log) in failure
    assert [record["variant"] for record in read_results(tmp_path / "results.jsonl")] == ["base"]


def test_the_command_resumes_a_killed_run_and_refuses_a_changed_configuration(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "transformer.cli", "experiment", "table2", "--scale", "tiny", "--only", "base",
        "--output-dir", str(tmp_path), "--set", "train.max_steps=30", "--set", "train.checkpoint_every=5",
        "--set", "train.validate_every=5", "--set", "train.log_every=5", "--allow-dirty",
    ]  # fmt: skip
    runner = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    checkpoints = tmp_path / "runs" / "base-s1" / "checkpoints"
    deadline = time.monotonic() + 120
    while not (checkpoints / "index.json").exists() or read_index(checkpoints)["latest"] < "step-00000010":
        assert runner.poll() is None and time.monotonic() < deadline, (
            runner.stdout.read() if runner.stdout else ""
        )
        time.sleep(0.05)
    runner.kill()  # SIGKILL: no cleanup in the runner; its worker is stopped by the kernel (PR_SET_PDEATHSIG)
    runner.wait()
    lock = json.loads((tmp_path / "runs" / "base-s1" / "run.lock").read_text(encoding="utf-8"))
    deadline = time.monotonic() + 30
    while _alive(lock["pid"]):
        assert time.monotonic() < deadline, "the worker outlived its runner"
        time.sleep(0.05)
    assert not read_results(tmp_path / "results.jsonl")

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming base-s1" in resumed.stdout
    assert "resumed from" in (tmp_path / "runs" / "base-s1" / "log.txt").read_text(encoding="utf-8")
    [record] = read_results(tmp_path / "results.jsonl")
    assert record["train_steps"] == 30

    changed = subprocess.run(
        [*command, "--set", "train.warmup_steps=2"], capture_output=True, text=True, timeout=120
    )
    assert changed.returncode == 2
    assert (
        # max_steps 30 brought a warm-up of 3 along (a tenth); the pinned 2 differs from it
        "run base-s1 was made with another configuration (train.warmup_steps: 3 (recorded) != 2 (now))"
        in (changed.stderr)
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_scale_rule_keeps_ratios_and_refuses_fractional_widths() -> None:
    row = {
        "d_model": 512,
        "d_ff": 2048,
        "d_k": 16,
        "d_v": 64,
        "num_encoder_layers": 8,
        "num_decoder_layers": 2,
    }
    scaled = scaled_row(row, Fraction(1, 4), Fraction(1, 2))
    assert scaled == {
        "d_model": 128,
        "d_ff": 512,
        "d_k": 4,
        "d_v": 16,
        "num_encoder_layers": 4,
        "num_decoder_layers": 1,
    }
    with pytest.raises(ValueError, match="d_k=16 times 1/32 is not a whole number"):
        scaled_row(row, Fraction(1, 32), Fraction(1))


def test_every_table2_row_at_every_scale_is_a_valid_configuration() -> None:
    for scale in ("tiny", "cpu", "gpu", "paper"):
        plan = build_plan(scale)
        names = [variant.name for variant in plan.variants]
        assert names[:2] == ["base", "A1"] and names[19] == "big"
        configs = {variant.name: run_config(plan, variant, 1) for variant in plan.variants}
        base, big = configs["base"]["model"], configs["big"]["model"]
        assert big["d_model"] == 2 * base["d_model"] and big["num_heads"] == 16 and big["dropout"] == 0.3
        assert configs["big"]["train"]["max_steps"] == 3 * configs["base"]["train"]["max_steps"]
        assert (
            configs["D3"]["train"]["label_smoothing"] == 0.0
            and configs["E1"]["model"]["positional_encoding"] == "learned"
        )
        for name in ("A1", "A2", "A3", "A4"):  # rows A keep h * d_k = d_model
            model = configs[name]["model"]
            assert model["num_heads"] * model["d_k"] == base["d_model"]
    with pytest.raises(ValueError, match="--scale huge"):
        build_plan("huge")


def test_only_names_variants_or_groups_and_refuses_typos() -> None:
    plan = build_plan("tiny")
    assert [variant.name for variant in plan.select(["A", "big"])] == ["A1", "A2", "A3", "A4", "big"]
    with pytest.raises(ValueError, match="--only Z9: table2 has no such variant or group"):
        plan.select(["A", "Z9"])


@pytest.mark.parametrize(
    ("only", "seeds", "overrides", "message"),
    [
        (["bogus"], 1, [], "--only bogus: table2 has no such variant or group"),
        (None, 0, [], "--seeds 0: at least one seed"),
        (["base"], 1, ["train.max_steps=many"], "max_steps='many'"),
    ],
)
def test_a_refused_selection_creates_no_experiment_directory(
    tmp_path: Path, only: list[str] | None, seeds: int, overrides: list[str], message: str
) -> None:
    plan = with_base_overrides(build_plan("tiny"), overrides)
    with pytest.raises(ValueError, match=message):
        run_experiment(
            plan, tmp_path / "runs" / "experiments" / "table2-tiny", seeds=seeds, only=only, allow_dirty=True
        )
    assert not list(tmp_path.iterdir())


def test_config_differences_name_keys_and_accept_options_added_with_their_default() -> None:
    plan = build_plan("tiny")
    current = run_config(plan, plan.variant("base"), 1)
    recorded = json.loads(json.dumps(current))
    del recorded["model"]["attention_scaling"]  # written before the option existed: its default reproduces it
    recorded["train"]["device"] = "cuda"  # the machine, not the experiment
    assert config_differences(recorded, current) == []
    recorded["model"]["d_ff"] = 64
    assert config_differences(recorded, current) == ["model.d_ff: 64 (recorded) != 128 (now)"]


def test_token_store_keys_leave_the_fingerprint_of_earlier_runs_unchanged() -> None:
    plan = build_plan("tiny")
    current = run_config(plan, plan.variant("base"), 1)
    recorded = json.loads(json.dumps(current))
    for key in ("token_store", "token_store_verify"):
        del recorded["data"][key]  # written before the options existed
    assert config_fingerprint(recorded) == config_fingerprint(current)
    current["data"]["token_store"] = True  # the same batches, held on disk
    assert config_fingerprint(recorded) == config_fingerprint(current)
    assert config_differences(recorded, current) == []
    # Where the machine keeps its checksummed copy of the corpus is not part of the run either.
    recorded["data"]["mirror"], current["data"]["mirror"] = (
        "/work/shared/data/multi30k",
        "../shared/data/multi30k",
    )
    assert config_fingerprint(recorded) == config_fingerprint(current)
    assert config_differences(recorded, current) == []
    current["data"]["corpus"] = "synthetic" if recorded["data"]["corpus"] != "synthetic" else "multi30k"
    assert [line.split(":")[0] for line in config_differences(recorded, current)] == ["data.corpus"]


def test_results_file_ignores_a_torn_last_line_and_refuses_a_broken_one(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    append_result(path, {"variant": "base", "seed": 1, "dev_bleu": 1.0})
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"variant": "A1", "se')  # a crash in the middle of a write
    assert [record["variant"] for record in read_results(path)] == ["base"]
    append_result(path, {"variant": "A1", "seed": 1, "dev_bleu": 2.0})
    assert [record["dev_bleu"] for record in read_results(path)] == [1.0, 2.0]
    path.write_text(
        '{"variant": "base", "seed": 1}\nnot json\n{"variant": "A1", "seed": 1}\n', encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"results.jsonl:2: not a JSON record"):
        read_results(path)


def test_metrics_print_mean_and_spread_over_seeds() -> None:
    assert format_metric([24.0, 26.0], 1) == "25.0 ± 1.4"
    assert format_metric([5.0], 2) == "5.00"
    assert format_metric([None, float("nan")], 2) == "-"
    # Figures shown without their spread carry the number of seeds their mean rests on; missing ones drop out.
    assert format_mean_and_count([44.0, 45.0, None, float("nan")], 1) == "44.5 (2)"
    assert format_mean_and_count([], 3) == "-"


def test_a_dirty_source_tree_is_refused_before_anything_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirty = SourceState("0123abcd", ("src/transformer/model/encoder.py",))
    monkeypatch.setattr("transformer.experiments.common.runner.source_state", lambda: dirty)
    with pytest.raises(
        ValueError, match=r"uncommitted changes \(1 file\(s\): src/transformer/model/encoder.py\)"
    ):
        run_experiment(build_plan("tiny"), tmp_path / "experiment", only=["base"])
    assert not list(tmp_path.iterdir())
    assert dirty.label == "0123abcd+dirty" and SourceState("0123abcd").label == "0123abcd"
    assert SourceState(None).label is None


def test_sentences_are_kept_by_content_and_checked_when_read(tmp_path: Path) -> None:
    relative = store_sentences(tmp_path, ["ein Hund .", "zwei Katzen ."])
    assert relative.startswith("sentences/") and relative.endswith(".txt.gz")
    assert store_sentences(tmp_path, ["ein Hund .", "zwei Katzen ."]) == relative  # same text, same file
    assert load_sentences(tmp_path, relative) == ["ein Hund .", "zwei Katzen ."]
    (tmp_path / relative).write_bytes(gzip.compress(b"ein Hund .\n"))
    with pytest.raises(ValueError, match="do not match its name"):
        load_sentences(tmp_path, relative)
    with pytest.raises(ValueError, match="line break"):
        store_sentences(tmp_path, ["two\nlines"])
