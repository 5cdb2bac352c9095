"""The wall-clock budget: a run stopped by ``max_minutes`` still ends its cool-down, and resumes."""

import json
import time
from pathlib import Path

import pytest
import torch

from transformer.config import load_config
from transformer.data.prepare import prepare_data
from transformer.training.checkpoint import load_training_checkpoint
from transformer.training.schedule import TimeBudget, build_scheduler
from transformer.training.trainer import SilentReporter, Trainer


class RecordingReporter(SilentReporter):
    def __init__(self) -> None:
        self.messages: list[str] = []

    def message(self, text: str) -> None:
        self.messages.append(text)


def test_budget_factor_ends_the_cooldown_at_the_limit() -> None:
    budget = TimeBudget(seconds=100.0, cooldown_share=0.25)
    assert budget.factor(0.0) == budget.factor(75.0) == 1.0
    assert budget.factor(87.5) == pytest.approx(0.5)
    assert budget.factor(100.0) == budget.factor(130.0) == 0.0
    with pytest.raises(ValueError, match="cooldown_share"):
        TimeBudget(seconds=10.0, cooldown_share=0.0)


def test_scheduler_multiplies_the_step_schedule_by_the_clock() -> None:
    clock = {"now": 0.0}
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=1.0)
    budget = TimeBudget(seconds=10.0, cooldown_share=0.5)
    scheduler = build_scheduler(optimizer, 16, 4, 1.0, 1000, 100, budget, lambda: clock["now"])
    rates = []
    for now in (1.0, 5.0, 7.5, 10.0):
        clock["now"] = now
        optimizer.step()
        scheduler.step()
        rates.append(scheduler.get_last_lr()[0])
    # Steps 2-5 of Eq. (3) (warm-up 4, d_model 16), times 1, 1, 0.5, 0.
    assert rates[0] == pytest.approx(16**-0.5 * 2 * 4**-1.5)
    assert rates[1] == pytest.approx(16**-0.5 * 3 * 4**-1.5)
    assert rates[2] == pytest.approx(0.5 * 16**-0.5 * 4**-0.5)
    assert rates[3] == 0.0
    with pytest.raises(ValueError, match="needs elapsed_seconds"):
        build_scheduler(optimizer, 16, 4, time_budget=budget)


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
    real_step = trainer._accumulate_and_step

    def slow_step(group):
        time.sleep(0.04)
        return real_step(group)

    monkeypatch.setattr(trainer, "_accumulate_and_step", slow_step)
    return trainer, reporter


def logged_rates(run_dir: Path) -> list[float]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [record["learning_rate"] for record in records if record["kind"] == "train"]


def test_a_slowed_run_anneals_to_zero_at_its_time_limit_then_resumes(
    tmp_path: Path, write_config, monkeypatch
) -> None:
    # 3 seconds of budget, a cool-down of 25% of max_steps: the last 0.75 s anneal to zero.
    train = {"max_minutes": 0.05, "cooldown_steps": 2500, "warmup_steps": 4}
    trainer, reporter = slowed_trainer(tmp_path, write_config, monkeypatch, train)
    result = trainer.train()
    assert result.stop_reason == "max_minutes" and 20 <= result.step < 100
    peak = max(logged_rates(tmp_path / "run"))
    assert trainer.scheduler.get_last_lr()[0] < 0.1 * peak  # cooled down, not cut off at the peak
    rates = logged_rates(tmp_path / "run")
    assert rates[-1] < rates[len(rates) // 2]
    assert result.schedule_note.startswith(f"stopped by max_minutes=0.05 at step {result.step} of 10000 (")
    assert result.schedule_note.endswith("annealed to zero within the time limit")
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
