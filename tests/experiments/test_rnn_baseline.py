"""``transformer experiment rnn-baseline``: end to end at tiny scale, the plan against the configs, FLOP
counts against hand counts, the quality curve's cache and the time-to-level reading."""

import copy
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.experiments.curve_points import CURVE_WITH_A_DIP
from transformer.config.files import load_config
from transformer.experiments.common.plan import run_config
from transformer.experiments.common.results import read_results
from transformer.experiments.common.runner import run_experiment
from transformer.experiments.rnn_baseline.quality_curve import checkpoint_curve
from transformer.experiments.rnn_baseline.report import render_table
from transformer.experiments.rnn_baseline.run import curve_metrics
from transformer.experiments.rnn_baseline.settings import BLEU_LEVELS, build_plan, multi30k_plan_parts
from transformer.experiments.rnn_baseline.verdicts import cost_lines

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Run the tiny experiment once for the module, on one CPU (so every worker trains with one thread)."""
    output_dir = tmp_path_factory.mktemp("rnn-baseline")
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(affinity)})  # the workers inherit it: the trainer's probe sees one CPU
    try:
        outcome = run_experiment(
            build_plan("tiny"), output_dir, report=lambda _: None, poll_seconds=0.05, allow_dirty=True
        )
    finally:
        os.sched_setaffinity(0, affinity)
    assert outcome.finished == ["transformer-s1", "rnn-s1"] and not outcome.failed
    yield output_dir


def test_tiny_experiment_end_to_end(tiny_run: Path) -> None:
    records = {record["variant"]: record for record in read_results(tiny_run / "results.jsonl")}
    assert set(records) == {"transformer", "rnn"}
    assert records["rnn"]["config"]["model"]["architecture"] == "rnn"
    assert "architecture" not in records["transformer"]["config"]["model"]
    # One shared vocabulary for both models.
    tokenizers = {
        (tiny_run / "runs" / name / "tokenizer.model").read_bytes() for name in ("transformer-s1", "rnn-s1")
    }
    assert len(tokenizers) == 1
    for name, record in records.items():
        assert record["train_steps"] == 8 and record["stop_reason"] == "max_steps", name
        assert record["train_threads"] == 1 and record["train_precision"] == "fp32"
        # A checkpoint every 2 steps, all kept: the curve has 4 points, in step and time order.
        curve = record["curve"]
        assert [point["step"] for point in curve] == [2, 4, 6, 8]
        times = [point["elapsed_seconds"] for point in curve]
        assert all(0 < earlier < later for earlier, later in itertools.pairwise(times))
        tokens = [point["tokens_seen"] for point in curve]
        assert all(0 < earlier < later for earlier, later in itertools.pairwise(tokens))
        assert all(0.0 <= point["greedy_bleu"] <= 100.0 for point in curve)
        assert record["train_tokens"] == tokens[-1]
        assert times[-1] == pytest.approx(record["train_seconds"])
        # FLOPs: positive, per token times tokens, of the order of 6 x parameters per token.
        per_token = record["train_flops_per_target_token"]
        assert record["flop_batches"] == 2
        assert record["train_flops"] == pytest.approx(per_token * record["train_tokens"])
        assert 0.3 < per_token / (6 * record["params"]) < 3, (name, per_token, record["params"])
        assert [point["train_flops"] for point in curve] == pytest.approx([per_token * t for t in tokens])
        assert set(record["time_to_bleu"]) == {f"{level:g}" for level in BLEU_LEVELS}
        # Decoding speed, greedy and beam 4, the same thread count for both models.
        assert record["decode_sentences"] == 12 and record["decode_threads"] == 1
        assert record["decode_beam_size"] == 4
        for search in ("greedy", "beam"):
            assert record[f"decode_{search}_sentences_per_second"] > 0
            assert record[f"decode_{search}_tokens_per_second"] > 0
    assert records["rnn"]["params"] != records["transformer"]["params"]

    table = (tiny_run / "table.md").read_text(encoding="utf-8")
    for heading in ("## Quality and training cost", "## Time to quality", "## Decoding speed", "## Curves"):
        assert heading in table
    transformer_row = next(line for line in table.splitlines() if line.startswith("| transformer | 0.0"))
    assert "| fp32, 1 | 8 (max_steps) |" in transformer_row
    assert f"{records['transformer']['train_flops']:.2e}" in transformer_row
    assert "| beam 4 sent/s |" in table and "not reached" in table
    assert (tiny_run / "rnn_baseline.png").stat().st_size > 1000


def test_a_resumed_scoring_reads_the_cached_curve(tiny_run: Path) -> None:
    run_dir = tiny_run / "runs" / "transformer-s1"
    recorded = next(r for r in read_results(tiny_run / "results.jsonl") if r["variant"] == "transformer")

    def refuse(_: Any) -> float:
        raise AssertionError("a cached checkpoint was scored again")

    cached = checkpoint_curve(run_dir, refuse)  # what a worker rerun after a kill during scoring reads
    assert [point.score for point in cached] == [point["greedy_bleu"] for point in recorded["curve"]]
    assert [point.elapsed_seconds for point in cached] == [p["elapsed_seconds"] for p in recorded["curve"]]


def test_a_rerun_skips_both_runs(tiny_run: Path) -> None:
    outcome = run_experiment(
        build_plan("tiny"), tiny_run, report=lambda _: None, poll_seconds=0.05, allow_dirty=True
    )
    assert outcome.skipped == ["transformer-s1", "rnn-s1"] and not outcome.finished


def test_table_summarises_seeds_and_marks_a_run_over_its_budget(tiny_run: Path) -> None:
    records = read_results(tiny_run / "results.jsonl")
    transformer = next(record for record in records if record["variant"] == "transformer")
    second = copy.deepcopy(transformer)
    second["seed"] = 2
    second["train_seconds"] = 2 * 60 * second["config"]["train"]["max_minutes"]  # resumed: twice the budget
    second["time_to_bleu"]["10"] = {"seconds": 90.0, "step": 6, "train_flops": 1.0}
    table = render_table(build_plan("tiny"), [transformer, second])
    row = next(line for line in table.splitlines() if line.startswith("| transformer * |"))
    assert row.endswith("| 2 |") and " ± " in row
    assert "trained more than 5% longer than its budget" in table
    times = next(line for line in table.splitlines() if line.startswith("| transformer | 1.5 (step 6)"))
    assert times.startswith("| transformer | 1.5 (step 6), 1 of 2 seeds | not reached |")
    assert next(line for line in table.splitlines() if line.startswith("| rnn |")).count(" - ") >= 4


def _cost_record(seed: int, flops: float, minutes: tuple[float | None, ...]) -> dict[str, Any]:
    """A record with only what the cost lines read: seed, training FLOPs and the time to each BLEU level."""
    times = {
        f"{level:g}": None if value is None else {"seconds": 60 * value, "step": 100, "train_flops": 1.0}
        for level, value in zip(BLEU_LEVELS, minutes, strict=True)
    }
    return {"seed": seed, "train_flops": flops, "time_to_bleu": times}


def test_cost_lines_give_the_flop_ratio_per_seed_and_the_minutes_to_each_level() -> None:
    by_variant = {
        "transformer": [
            _cost_record(1, 6e14, (4.0, 8.0, 12.0, 16.0)),
            _cost_record(2, 5e14, (6.0, 8.0, 14.0, None)),
        ],
        "rnn": [_cost_record(2, 4e14, (3.0, 5.0, None, None)), _cost_record(3, 1e14, (1.0, 1.0, 1.0, 1.0))],
    }
    lines = cost_lines(by_variant, ["transformer", "rnn"])
    # Only seed 2 has both runs; the ratio is of that seed's two runs, not of the means.
    assert lines[1] == "Training FLOPs of the Transformer over the LSTM's, per seed (same minutes): s2 1.25x."
    rows = {line.split(" | ")[0]: line.split(" | ")[1:] for line in lines if line.startswith("| ")}
    assert rows["| transformer"][0] == "5.0 [-7.7, 17.7] (2 seeds)"
    assert rows["| transformer"][1] == "8.0 [8.0, 8.0] (2 seeds)"
    assert rows["| transformer"][3] == "16.0 (1 seed); not reached at 1 |"
    assert rows["| rnn"][2] == "1.0 (1 seed); not reached at 1"
    alone = cost_lines(
        {"transformer": [_cost_record(1, 1.0, (None,) * len(BLEU_LEVELS))]}, ["transformer", "rnn"]
    )
    assert alone[1].endswith("per seed (same minutes): no seed has both runs.")
    assert alone[-2] == "| transformer | " + " | ".join(["not reached (1 seed)"] * len(BLEU_LEVELS)) + " |"
    assert alone[-1] == "| rnn | - | - | - | - |"


def test_curve_metrics_read_the_time_to_each_level() -> None:
    metrics = curve_metrics(CURVE_WITH_A_DIP, flops_per_token=2.0)
    assert metrics["time_to_bleu"] == {
        "10": {"seconds": 120.0, "step": 200, "train_flops": 4000.0},
        "20": {"seconds": 120.0, "step": 200, "train_flops": 4000.0},
        "30": {"seconds": 240.0, "step": 400, "train_flops": 8000.0},
        "35": None,
    }
    assert metrics["train_tokens"] == 4000 and metrics["train_flops"] == 8000.0
    assert [point["greedy_bleu"] for point in metrics["curve"]] == [8.0, 21.0, 19.5, 31.0]


@pytest.mark.parametrize(("variant", "config_file"), [("transformer", "multi30k"), ("rnn", "multi30k-rnn")])
@pytest.mark.parametrize("scale", ["cpu", "gpu"])
def test_variants_are_the_shipped_configs(scale: str, variant: str, config_file: str) -> None:
    plan = build_plan(scale)
    resolved = run_config(plan, plan.variant(variant), 1)
    shipped: dict[str, Any] = load_config(CONFIGS / f"{config_file}.yaml").to_dict()
    # Only the curve's checkpoints differ: more often, and all of them kept.
    assert shipped["train"]["checkpoint_every"] == 250 and resolved["train"]["checkpoint_every"] == 100
    assert resolved["train"]["keep_checkpoints"] * 100 > resolved["train"]["max_steps"]
    for key in ("checkpoint_every", "keep_checkpoints"):
        shipped["train"][key] = resolved["train"][key]
    # The experiment compares the architectures at the shipped recipe itself, whatever this machine's speed:
    # the recipe ladder's top rung, which changes nothing (tests/training/test_recipe_ladder.py).
    ladder = shipped.pop("ladder")
    assert not ladder["rungs"] or ladder["rungs"][0]["overrides"] == ()
    assert resolved.pop("ladder", {"rungs": ()})["rungs"] == ()
    assert resolved == shipped


def test_plan_shape_and_scales() -> None:
    plan = build_plan("tiny")
    assert [variant.name for variant in plan.variants] == ["transformer", "rnn"]
    assert plan.select(["rnn"]) == [plan.variant("rnn")] and plan.average_last == 3
    _, full = multi30k_plan_parts()
    # The tiny variants set every key the real ones set.
    assert all(set(full[name]) == set(plan.variant(name).overrides) for name in full)
    with pytest.raises(ValueError, match="--scale paper: rnn-baseline runs at scale tiny, cpu or gpu"):
        build_plan("paper")
