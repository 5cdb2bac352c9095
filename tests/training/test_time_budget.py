"""The wall-clock budget: a run stopped by ``max_minutes`` still ends its cool-down, and resumes."""

import json
import time
from pathlib import Path

import pytest
import torch

from transformer.config.files import load_config
from transformer.data.prepare import prepare_data
from transformer.training.checkpoint import load_training_checkpoint
from transformer.training.reporting import SilentReporter
from transformer.training.schedule import (
    TimeBudget,
    build_scheduler,
    crossed_multiple,
    inverse_sqrt_learning_rate,
)
from transformer.training.trainer import Trainer


class RecordingReporter(SilentReporter):
    def __init__(self) -> None:
        self.messages: list[str] = []

    def message(self, text: str) -> None:
        self.messages.append(text)


def test_budget_position_is_the_share_of_time_after_the_first_step() -> None:
    budget = TimeBudget(seconds=100.0, max_steps=1000)
    assert budget.schedule_step(0.0) == 0.0 and budget.schedule_step(25.0) == 250.0
    assert budget.schedule_step(100.0) == budget.schedule_step(130.0) == 1000.0
    # The clock starts after a 10-second first step and still reaches max_steps at the limit.
    assert budget.schedule_step(5.0, start_seconds=10.0) == 0.0
    assert budget.schedule_step(55.0, start_seconds=10.0) == 500.0
    assert budget.schedule_step(100.0, start_seconds=10.0) == 1000.0
    assert budget.schedule_step(1.0, start_seconds=120.0) == 1000.0  # a first step longer than the budget
    with pytest.raises(ValueError, match="max_steps at least 1"):
        TimeBudget(seconds=10.0, max_steps=0)
    with pytest.raises(ValueError, match="positive and finite"):
        TimeBudget(seconds=float("nan"), max_steps=10)


def test_crossed_multiple_is_the_modulo_rule_for_whole_steps() -> None:
    assert [step for step in range(1, 13) if crossed_multiple(step - 1, step, 5)] == [5, 10]
    assert crossed_multiple(248.0, 260.5, 250) and not crossed_multiple(250.0, 260.5, 250)
    assert crossed_multiple(100.0, 800.0, 250)  # several multiples in one slow step: one save
    assert not crossed_multiple(0.0, 1000.0, 0)


def eq3(
    position: float, d_model: int = 16, warmup: int = 100, total: int = 1000, cooldown: int = 250
) -> float:
    return inverse_sqrt_learning_rate(position, d_model, warmup, 1.0, total, cooldown)


def test_a_leading_clock_fits_warmup_and_cooldown_into_the_budget() -> None:
    # Fake clock: 100 s for 1,000 steps, warm-up 100 (10% of the budget), cool-down 250 (the last 25%).
    clock = {"now": 0.0}
    budget = TimeBudget(seconds=100.0, max_steps=1000)
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=1.0)
    scheduler = build_scheduler(
        optimizer, 16, 100, 1.0, 1000, 250, lambda: budget.schedule_step(clock["now"])
    )
    rates = {}
    for now in (2.0, 5.0, 10.0, 40.0, 87.5, 100.0):  # a slow machine: 6 steps in the budget
        clock["now"] = now
        optimizer.step()
        scheduler.step()
        rates[now] = scheduler.get_last_lr()[0]
    peak = 16**-0.5 * 100**-0.5
    assert rates[2.0] == pytest.approx(0.2 * peak)  # the clock leads step 1: position 20 of the warm-up
    assert rates[5.0] == pytest.approx(0.5 * peak)
    assert rates[10.0] == pytest.approx(peak)  # warm-up ends at 10% of the time, at step 4 of 1,000
    assert rates[40.0] == pytest.approx(16**-0.5 * 400**-0.5)  # inverse square root of the position
    assert rates[87.5] == pytest.approx(0.5 * 16**-0.5 * 875**-0.5)  # half-way through the cool-down
    assert rates[100.0] == 0.0


def test_a_lagging_clock_leaves_the_step_schedule_exact() -> None:
    # A fast machine: the clock is always behind the steps, so every rate is Eq. (3) at the step itself.
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=1.0)
    budget = TimeBudget(seconds=100.0, max_steps=1000)
    clock = {"now": 0.0}
    scheduler = build_scheduler(
        optimizer, 16, 100, 1.0, 1000, 250, lambda: budget.schedule_step(clock["now"])
    )
    for step in range(1, 1001):
        clock["now"] = 0.05 * step  # half the budget's pace
        optimizer.step()
        scheduler.step()
        assert scheduler.get_last_lr()[0] == eq3(step + 1)


def slowed_trainer(
    tmp_path: Path, write_config, monkeypatch, train: dict
) -> tuple[Trainer, RecordingReporter]:
    """A tiny run whose steps take at least 40 ms each: a deliberately slow machine."""
    recipe = {"max_steps": 10_000, "validate_every": 0, "checkpoint_every": 0, "log_every": 5, **train}
    experiment = load_config(write_config(tmp_path, train=recipe))
    run_dir = tmp_path / "run"
    data = prepare_data(experiment.data, experiment.model.vocab_size, run_dir)
    reporter = RecordingReporter()
    trainer = Trainer(experiment, run_dir, data, reporter=reporter)
    real_step = trainer.gradient_step.run

    def slow_step(group):
        time.sleep(0.04)
        return real_step(group)

    monkeypatch.setattr(trainer.gradient_step, "run", slow_step)
    return trainer, reporter


def logged_rates(run_dir: Path) -> list[float]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [record["learning_rate"] for record in records if record["kind"] == "train"]


def test_a_slowed_run_anneals_to_zero_at_its_time_limit_then_resumes(
    tmp_path: Path, write_config, monkeypatch
) -> None:
    # 3 seconds of budget for 10,000 steps of which 2,000 warm up (20%) and 2,500 cool down (the last 25%):
    # the machine does about 60 steps, yet warms up fully, decays and anneals to zero.
    train = {
        "max_minutes": 0.05,
        "cooldown_steps": 2500,
        "warmup_steps": 2000,
        "peak_learning_rate": 0.01,
        "log_every": 1,  # every rate: on a loaded machine a sparse log can miss the peak
    }
    trainer, reporter = slowed_trainer(tmp_path, write_config, monkeypatch, train)
    result = trainer.train()
    assert result.stop_reason == "max_minutes" and 20 <= result.step < 100
    rates = logged_rates(tmp_path / "run")
    assert max(rates) > 0.85 * 0.01  # the step schedule alone would have reached 3% of the peak
    peak_at = rates.index(max(rates)) + 1
    assert 0.1 * result.step <= peak_at <= 0.4 * result.step  # around 20% of the run
    assert trainer.scheduler.get_last_lr()[0] < 0.05 * 0.01  # cooled down, not cut off
    assert rates[-1] < rates[len(rates) // 2]
    assert any(
        message.startswith("time budget: max_minutes=0.05 binds; from step ") for message in reporter.messages
    )
    assert result.schedule_note.startswith(f"stopped by max_minutes=0.05 at step {result.step} of 10000 (")
    assert result.schedule_note.endswith("annealing the learning rate to zero within the time limit")
    assert result.schedule_note in reporter.messages

    assert load_training_checkpoint(result.checkpoint).state.stop_reason == "max_minutes"
    # The quick start run twice reuses the finished run...
    again, _ = slowed_trainer(tmp_path, write_config, monkeypatch, train)
    reused = again.train(resume=True, reuse_finished=True)
    assert (reused.step, reused.stop_reason) == (result.step, "max_minutes")

    # ...while --resume trains another budget instead of stopping at once on the time already spent.
    resumed, _ = slowed_trainer(tmp_path, write_config, monkeypatch, train)
    second = resumed.train(resume=True)
    assert second.stop_reason == "max_minutes" and second.step >= result.step + 20
    assert second.elapsed_seconds >= result.elapsed_seconds + 2.5


def test_without_a_cooldown_the_time_limit_is_reported_with_the_share_done(
    tmp_path: Path, write_config, monkeypatch
) -> None:
    trainer, reporter = slowed_trainer(tmp_path, write_config, monkeypatch, {"max_minutes": 0.02})
    result = trainer.train()
    assert result.stop_reason == "max_minutes"
    share = f"{result.step / 10_000:.0%}"
    assert result.schedule_note.startswith(
        f"warning: stopped by max_minutes=0.02 at step {result.step} of 10000 ({share}"
    )
    assert "without a cool-down" in result.schedule_note and result.schedule_note in reporter.messages


def test_checkpoints_keep_their_spacing_in_the_schedule_when_time_binds(
    tmp_path: Path, write_config, monkeypatch
) -> None:
    train = {"max_minutes": 0.04, "cooldown_steps": 2500, "warmup_steps": 100, "checkpoint_every": 2500}
    train["keep_checkpoints"] = 10
    trainer, _ = slowed_trainer(tmp_path, write_config, monkeypatch, train)
    result = trainer.train()
    saved = sorted(path.name for path in (tmp_path / "run" / "checkpoints").glob("step-*"))
    steps = [int(name.removeprefix("step-")) for name in saved]
    # Positions 2,500, 5,000 and 7,500 of 10,000 fall at about 25/50/75% of the run's steps, then the end.
    assert len(steps) == 4 and steps[-1] == result.step
    for index, share in enumerate((0.25, 0.5, 0.75)):
        assert abs(steps[index] / result.step - share) < 0.12


def test_a_time_limit_that_does_not_bind_changes_nothing(tmp_path: Path, write_config) -> None:
    recipe = {"max_steps": 12, "warmup_steps": 4, "cooldown_steps": 4, "log_every": 1, "checkpoint_every": 5}
    recipe["keep_checkpoints"] = 10
    runs = {}
    for name, minutes in (("plain", None), ("budget", 30.0)):
        (tmp_path / name).mkdir()
        experiment = load_config(write_config(tmp_path / name, train={**recipe, "max_minutes": minutes}))
        data = prepare_data(experiment.data, experiment.model.vocab_size, tmp_path / name / "run")
        Trainer(experiment, tmp_path / name / "run", data, reporter=SilentReporter()).train()
        runs[name] = tmp_path / name / "run"
    assert logged_rates(runs["budget"]) == logged_rates(runs["plain"])
    for name in ("plain", "budget"):
        saved = sorted(path.name for path in (runs[name] / "checkpoints").glob("step-*"))
        assert saved == ["step-00000005", "step-00000010", "step-00000012"]
