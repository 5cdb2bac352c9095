"""The recipe ladder: the rung that the measured training speed pays for, logged, overridable, kept on resume."""

import json
from pathlib import Path

import pytest
import torch

from transformer.autotune import cache as cache_module
from transformer.autotune.cache import ProbeCache
from transformer.autotune.throughput_probe import (
    decide_training_throughput,
    measure_training_tokens_per_second,
)
from transformer.config.experiment import ExperimentConfig, experiment_from_dict
from transformer.config.files import load_config
from transformer.config.ladder import LadderConfig, LadderRung
from transformer.model.config import TransformerConfig
from transformer.training.recipe_ladder import TRAINING_SHARE, apply_rung, recorded_rung, resolve_ladder

CPU = torch.device("cpu")
MULTI30K = Path(__file__).resolve().parents[2] / "configs" / "multi30k.yaml"
QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"


def ladder_experiment(choose: str = "auto", minutes: float | None = 10.0) -> ExperimentConfig:
    rungs = (
        LadderRung("big", 6_000_000),
        LadderRung("middle", 2_000_000, ("model.num_encoder_layers=1", "train.max_tokens=512")),
        LadderRung(
            "small", 0, ("model.num_encoder_layers=1", "model.num_decoder_layers=1", "model.dropout=0.0")
        ),
    )
    model = TransformerConfig(
        vocab_size=40, d_model=32, d_ff=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2
    )
    experiment = ExperimentConfig(model=model, ladder=LadderConfig(choose, rungs))
    values = experiment.to_dict()
    values["train"]["max_minutes"] = minutes
    return experiment_from_dict(values)


def speeds(by_layers: dict[int, float]):
    """A fake speedometer: tokens/s by the number of encoder layers, recording what it measured."""
    measured: list[str] = []

    def speedometer(experiment: ExperimentConfig, device: torch.device) -> float:
        measured.append(experiment.ladder.choose)
        return by_layers[(experiment.model.num_encoder_layers, experiment.model.num_decoder_layers)]

    return speedometer, measured


@pytest.mark.parametrize(
    ("speed_of", "expected", "measured_rungs"),
    [
        # 10 minutes x 0.95: 6M tokens need 10,527 tokens/s from the big rung.
        ({(2, 2): 11_000.0, (1, 2): 1.0, (1, 1): 1.0}, "big", ["big"]),
        ({(2, 2): 10_000.0, (1, 2): 3_600.0, (1, 1): 1.0}, "middle", ["big", "middle"]),
        ({(2, 2): 1_000.0, (1, 2): 3_000.0, (1, 1): 4_000.0}, "small", ["big", "middle", "small"]),
    ],
)
def test_auto_takes_the_first_rung_the_budget_pays_for(speed_of, expected, measured_rungs) -> None:
    speedometer, measured = speeds(speed_of)
    resolved, note = resolve_ladder(ladder_experiment(), CPU, speedometer=speedometer)
    assert resolved.ladder.choose == expected and measured == measured_rungs
    assert note is not None and note.startswith(
        f"recipe ladder: {expected!r} for max_minutes=10: measured 'big' "
    )
    assert note.endswith("override with --set ladder.choose=NAME (or none)")
    big_tokens = speed_of[(2, 2)] * 600 * TRAINING_SHARE / 1e6
    assert f"'big' {speed_of[(2, 2)]:,.0f} tokens/s -> {big_tokens:.1f}M (needs 6.0M)" in note
    if expected == "small":
        assert (resolved.model.num_encoder_layers, resolved.model.num_decoder_layers) == (1, 1)
        assert resolved.model.dropout == 0.0
    if expected == "middle":
        assert resolved.train.max_tokens == 512 and resolved.model.num_decoder_layers == 2


def test_a_named_rung_none_and_a_recorded_rung_are_taken_unmeasured() -> None:
    def refuse(experiment: ExperimentConfig, device: torch.device) -> float:
        raise AssertionError("measured although the rung was fixed")

    resolved, note = resolve_ladder(ladder_experiment("small"), CPU, speedometer=refuse)
    assert resolved.ladder.choose == "small" and resolved.model.num_decoder_layers == 1
    assert note == "recipe ladder: 'small', as chosen"
    unchanged, note = resolve_ladder(ladder_experiment("none"), CPU, speedometer=refuse)
    assert unchanged == ladder_experiment("none") and note is None
    resumed, note = resolve_ladder(ladder_experiment(), CPU, recorded="middle", speedometer=refuse)
    assert resumed.ladder.choose == "middle" and note == "recipe ladder: 'middle', as the run was started"
    unbounded, note = resolve_ladder(ladder_experiment(minutes=None), CPU, speedometer=refuse)
    assert unbounded.ladder.choose == "big" and note == "recipe ladder: 'big': no train.max_minutes to fit"


def test_the_shipped_multi30k_ladder_resolves_to_its_three_recipes() -> None:
    experiment = load_config(MULTI30K)
    assert [rung.name for rung in experiment.ladder.rungs] == ["4x256-4k", "3x256-2k", "2x256-2k"]
    top = apply_rung(experiment, experiment.ladder.rungs[0])
    assert top.model == experiment.model and top.train == experiment.train  # the file's recipe unchanged
    for rung, layers, dropout in ((experiment.ladder.rungs[1], 3, 0.2), (experiment.ladder.rungs[2], 2, 0.1)):
        recipe = apply_rung(experiment, rung)
        assert (recipe.model.num_encoder_layers, recipe.model.num_decoder_layers) == (layers, layers)
        assert recipe.model.dropout == dropout and recipe.train.max_tokens == 2048
        # Half the batch, twice the steps: the same shares of warm-up, cool-down and checkpoint spacing.
        assert recipe.train.max_steps == 2 * experiment.train.max_steps
        assert (
            recipe.train.warmup_steps / recipe.train.max_steps
            == experiment.train.warmup_steps / experiment.train.max_steps
        )
        assert (
            recipe.train.cooldown_steps / recipe.train.max_steps
            == experiment.train.cooldown_steps / experiment.train.max_steps
        )
        assert recipe.train.checkpoint_every == 2 * experiment.train.checkpoint_every
        assert recipe.model.vocab_size == experiment.model.vocab_size and recipe.data == experiment.data


@pytest.mark.parametrize(
    ("top_speed", "expected"),
    [
        # 1.2M tokens in 4.4 minutes x 0.95 need 4,785 tokens/s from the top rung.
        (11_000.0, "2x256-1k"),  # the AVX-512 BF16 EPYC in bf16 trained all 1,600 steps in 2 min 20 s
        (3_442.0, "2x128-1k"),  # what the probe measured on the AVX2-only EPYC (0.9M tokens in the budget)
    ],
)
def test_the_shipped_quickstart_ladder_keeps_its_recipe_where_the_budget_pays_for_it(
    top_speed: float, expected: str
) -> None:
    experiment = load_config(QUICKSTART)
    assert [rung.name for rung in experiment.ladder.rungs] == ["2x256-1k", "2x128-1k"]

    def speedometer(recipe: ExperimentConfig, device: torch.device) -> float:
        return top_speed if recipe.model.d_model == 256 else 2.9 * top_speed

    resolved, note = resolve_ladder(experiment, CPU, speedometer=speedometer)
    assert resolved.ladder.choose == expected and note is not None and "max_minutes=4.4" in note
    if expected == "2x256-1k":
        assert resolved.model == experiment.model and resolved.train == experiment.train
    else:  # narrower, twice the steps: warm-up, cool-down and checkpoints keep their shares of the schedule
        assert (resolved.model.d_model, resolved.model.d_ff, resolved.model.num_heads) == (128, 512, 4)
        assert resolved.train.max_steps == 2 * experiment.train.max_steps
        assert resolved.train.warmup_steps == 2 * experiment.train.warmup_steps
        assert resolved.train.cooldown_steps == 2 * experiment.train.cooldown_steps
        assert resolved.train.checkpoint_every == 2 * experiment.train.checkpoint_every
        assert resolved.train.max_tokens == experiment.train.max_tokens


def test_a_resumed_run_reads_its_rung_from_the_latest_checkpoint(tmp_path: Path) -> None:
    assert recorded_rung(tmp_path) is None
    states = {250: {"ladder": {"choose": "2x256-2k"}}, 500: {"ladder": {"choose": "3x256-2k"}}, 750: {}}
    for step, experiment in states.items():
        state = tmp_path / "checkpoints" / f"step-{step:08d}" / "trainer_state.json"
        state.parent.mkdir(parents=True)
        state.write_text(json.dumps({"experiment": experiment}), encoding="utf-8")
    index = tmp_path / "checkpoints" / "index.json"
    index.write_text(
        json.dumps({"latest": "step-00000500", "best": None, "checkpoints": []}), encoding="utf-8"
    )
    assert recorded_rung(tmp_path) == "3x256-2k"  # the index's latest, not the newest directory name
    # A checkpoint from before ladders trained the file's values: resume keeps them, unmeasured.
    index.write_text(
        json.dumps({"latest": "step-00000750", "best": None, "checkpoints": []}), encoding="utf-8"
    )
    assert recorded_rung(tmp_path) == "none"
    resumed, note = resolve_ladder(ladder_experiment(), CPU, recorded="none")
    assert resumed == ladder_experiment() and note.startswith("recipe ladder: none, as the run was started")


def test_the_throughput_probe_times_real_steps_and_caches_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cache_module.os, "getloadavg", lambda: (0.1, 0.1, 0.1))  # a quiet machine
    model = TransformerConfig(
        vocab_size=60, d_model=32, d_ff=64, num_heads=4, num_encoder_layers=1, num_decoder_layers=1
    )
    speed = measure_training_tokens_per_second(model, 256, "fp32", CPU)
    assert 100 < speed < 10_000_000
    cache = ProbeCache(tmp_path / "autotune.json")
    calls = []

    def fake(config, batch_tokens, precision, device):
        calls.append((batch_tokens, precision))
        return 1234.0

    assert decide_training_throughput(model, 256, "fp32", CPU, cache, fake)[0] == 1234.0
    assert decide_training_throughput(model, 256, "fp32", CPU, cache, fake) == (1234.0, " (cached)")
    assert decide_training_throughput(model, 512, "fp32", CPU, cache, fake)[0] == 1234.0
    assert calls == [(256, "fp32"), (512, "fp32")]  # another batch is another measurement
