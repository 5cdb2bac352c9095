"""The quality curve: every kept checkpoint scored against its training time, cached, read for levels."""

from pathlib import Path
from typing import Any

import pytest

from tests.experiments.curve_points import CURVE_WITH_A_DIP
from transformer.experiments.rnn_baseline.quality_curve import (
    CURVE_FILE,
    CurvePoint,
    checkpoint_curve,
    first_reaching,
)
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer
from transformer.training.checkpoint import CheckpointManager, TrainerState

CONFIG = TransformerConfig(
    vocab_size=30, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1
)


def _run_with_checkpoints(run_dir: Path, steps: list[int]) -> None:
    """Write training checkpoints as a run would: step s at 10 s elapsed per step, 50 tokens a step."""
    manager = CheckpointManager(run_dir / "checkpoints", keep_last=100)
    for step in steps:
        state = TrainerState(step=step, elapsed_seconds=10.0 * step, tokens_seen=50 * step)
        manager.save(Transformer(CONFIG), CONFIG, {"tokenizer.model": b"tok"}, state, {})


def test_every_checkpoint_is_scored_in_step_order_and_cached(tmp_path: Path) -> None:
    _run_with_checkpoints(tmp_path, [2, 4, 6])
    scored: list[int] = []

    def score(model: Any) -> float:
        assert isinstance(model, Transformer) and not model.training
        scored.append(len(scored))
        return 10.0 * len(scored)

    curve = checkpoint_curve(tmp_path, score)
    assert curve == [
        CurvePoint("step-00000002", 2, 20.0, 100, 10.0),
        CurvePoint("step-00000004", 4, 40.0, 200, 20.0),
        CurvePoint("step-00000006", 6, 60.0, 300, 30.0),
    ]

    def refuse(_: Any) -> float:
        raise AssertionError("a cached checkpoint was scored again")

    assert checkpoint_curve(tmp_path, refuse) == curve
    # A new checkpoint (the run went on) is scored alone; the cached ones are kept.
    _run_with_checkpoints(tmp_path, [8])
    extended = checkpoint_curve(tmp_path, lambda _: 40.0)
    assert extended[:3] == curve and extended[3] == CurvePoint("step-00000008", 8, 80.0, 400, 40.0)


def test_a_cached_score_of_another_checkpoint_is_not_reused(tmp_path: Path) -> None:
    _run_with_checkpoints(tmp_path, [2, 4])
    checkpoint_curve(tmp_path, lambda _: 1.0)
    cache = (tmp_path / CURVE_FILE).read_text(encoding="utf-8")
    (tmp_path / CURVE_FILE).write_text(cache.replace('"step": 4', '"step": 5'), encoding="utf-8")
    assert [point.score for point in checkpoint_curve(tmp_path, lambda _: 2.0)] == [1.0, 2.0]
    (tmp_path / CURVE_FILE).write_text("{not json", encoding="utf-8")  # unreadable: an empty cache
    assert [point.score for point in checkpoint_curve(tmp_path, lambda _: 3.0)] == [3.0, 3.0]


def test_a_run_without_checkpoints_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no checkpoint to score"):
        checkpoint_curve(tmp_path, lambda _: 1.0)


def test_first_reaching_takes_the_first_checkpoint_at_or_above_the_level() -> None:
    points = CURVE_WITH_A_DIP
    assert first_reaching(points, 20.0) == points[1]
    assert first_reaching(points, 21.0) == points[1]
    assert first_reaching(points, 31.0) == points[3]
    assert first_reaching(list(reversed(points)), 31.0) == points[3]
    assert first_reaching(points, 35.0) is None
    assert first_reaching([], 1.0) is None
