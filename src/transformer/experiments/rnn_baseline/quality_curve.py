"""Quality over training time: every checkpoint a run kept, scored, against the time it had trained.

A run that saves checkpoints at regular step intervals and keeps them all leaves a time-to-quality curve on
disk: each checkpoint's ``trainer_state.json`` records the wall-clock seconds the run had trained
(``elapsed_seconds``, validation and checkpoint writing included, summed over resumed segments), the step and
the target tokens seen. :func:`checkpoint_curve` scores each checkpoint with a caller's function (dev BLEU of
a search) and caches every score in the run directory as it goes, so a scoring interrupted halfway continues
where it stopped. :func:`first_reaching` reads the time a level of quality was first reached off the curve.
"""

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from transformer.architectures import SequenceModel
from transformer.atomic_files import write_json_atomically
from transformer.checkpoint.layout import read_index
from transformer.checkpoint.model_checkpoint import load_checkpoint
from transformer.training.checkpoint import read_trainer_state

#: The cache of scored checkpoints, in the run directory.
CURVE_FILE = "quality_curve.json"


@dataclass(frozen=True)
class CurvePoint:
    """One checkpoint of a run: when it was written and how good it was.

    Parameters
    ----------
    checkpoint : str
        Its directory name, e.g. ``step-00000500``.
    step : int
        Optimizer steps trained.
    elapsed_seconds : float
        Wall-clock training seconds at the checkpoint (the trainer's ``elapsed_seconds``).
    tokens_seen : int
        Target tokens trained on.
    score : float
        The score the caller's function gave it (dev BLEU).

    Notes
    -----
    Stored as a JSON object in :data:`CURVE_FILE` and in results records.
    """

    checkpoint: str
    step: int
    elapsed_seconds: float
    tokens_seen: int
    score: float


def checkpoint_curve(run_dir: Path, score: Callable[[SequenceModel], float]) -> list[CurvePoint]:
    """Score every checkpoint a run kept, reusing the scores cached by an earlier call.

    Parameters
    ----------
    run_dir : Path
        A trained run directory (``checkpoints/`` with ``index.json``).
    score : callable
        Takes a model in eval mode on the CPU (the checkpoint's weights) and returns its score.

    Returns
    -------
    list of CurvePoint
        One per kept training checkpoint, by step (so by elapsed time too).

    Raises
    ------
    ValueError
        When the run has no checkpoint.

    Notes
    -----
    ``run_dir/quality_curve.json`` is rewritten atomically after each checkpoint scored. A cached score is
    reused only for a checkpoint of the same name, step and elapsed time; any other is scored afresh.
    Weights-only checkpoints (none in a training run's index) have no training time and are skipped.
    """
    checkpoint_dir = run_dir / "checkpoints"
    names = sorted(read_index(checkpoint_dir).get("checkpoints", []))
    if not names:
        raise ValueError(f"{checkpoint_dir}: the run has no checkpoint to score")
    cached = _read_cache(run_dir / CURVE_FILE)
    points: list[CurvePoint] = []
    for name in names:
        state = read_trainer_state(checkpoint_dir / name)
        if state is None:
            continue
        known = cached.get(name)
        if known is not None and (known.step, known.elapsed_seconds) == (state.step, state.elapsed_seconds):
            points.append(known)
            continue
        model = load_checkpoint(checkpoint_dir / name).build_model()
        points.append(
            CurvePoint(name, state.step, state.elapsed_seconds, state.tokens_seen, float(score(model)))
        )
        cached[name] = points[-1]
        write_json_atomically(run_dir / CURVE_FILE, {key: asdict(point) for key, point in cached.items()})
    return sorted(points, key=lambda point: point.step)


def _read_cache(path: Path) -> dict[str, CurvePoint]:
    """Read the cached curve points by checkpoint name; a missing or unreadable file is an empty cache."""
    try:
        values: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        return {name: CurvePoint(**point) for name, point in values.items()}
    except (OSError, TypeError, ValueError, AttributeError):
        return {}


def first_reaching(points: Sequence[CurvePoint], level: float) -> CurvePoint | None:
    """Find the first checkpoint whose score reached a level.

    Parameters
    ----------
    points : sequence of CurvePoint
        A run's curve, by step.
    level : float
        The score to reach (e.g. BLEU 30).

    Returns
    -------
    CurvePoint or None
        The earliest point with ``score >= level``; None if no point reached it.

    Notes
    -----
    The level was reached at or before this checkpoint's time, after the previous one's: the time read off is
    an upper bound with the resolution of the checkpoint interval. No interpolation between checkpoints
    (quality is not linear in time, and a point can dip below one before it).
    """
    return next((point for point in sorted(points, key=lambda p: p.step) if point.score >= level), None)
