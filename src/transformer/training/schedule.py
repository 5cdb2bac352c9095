"""The learning-rate schedule of Eq. (3): linear warm-up, then decay with the inverse square root of the step."""

import math
from collections.abc import Callable
from dataclasses import dataclass

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def inverse_sqrt_learning_rate(
    step: float,
    d_model: int,
    warmup_steps: int,
    scale: float = 1.0,
    total_steps: int | None = None,
    cooldown_steps: int = 0,
) -> float:
    """Learning rate at an optimizer step.

    Parameters
    ----------
    step : float
        Optimizer step, counted from 1 (step 0 is treated as 1); fractional where a time budget sets the
        position (:class:`TimeBudget`).
    d_model : int
        Model width; the rate scales with d_model^-0.5.
    warmup_steps : int
        Steps of linear warm-up (4,000 in the paper).
    scale : float
        Multiplier on Eq. (3) (1.0 is the paper's rate).
    total_steps : int or None
        Length of the run; needed only for the cool-down.
    cooldown_steps : int
        If positive, decay linearly to zero over the last ``cooldown_steps`` of ``total_steps``.

    Returns
    -------
    float
        lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5), times the cool-down factor.

    Notes
    -----
    Eq. (3) of the paper. The peak, at ``step == warmup_steps``, is scale * (d_model * warmup_steps)^-0.5:
    7.0e-4 for the base model. The optional cool-down is not in the paper; short runs on small hardware end
    at a high rate without it.
    """
    step = max(step, 1)
    rate = scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
    if total_steps is not None and cooldown_steps > 0:
        remaining = total_steps - step
        rate *= min(1.0, max(remaining, 0) / cooldown_steps)
    return rate


def scale_for_peak(peak_learning_rate: float, d_model: int, warmup_steps: int) -> float:
    """Find the ``scale`` that makes Eq. (3) peak at a chosen learning rate.

    Parameters
    ----------
    peak_learning_rate : float
        The rate wanted at the end of warm-up.
    d_model : int
        Model width.
    warmup_steps : int
        Warm-up steps.

    Returns
    -------
    float
        The multiplier for :func:`inverse_sqrt_learning_rate`.

    Notes
    -----
    Small models on small data train faster with a higher peak than Eq. (3) gives them.
    """
    return peak_learning_rate * math.sqrt(d_model * warmup_steps)


@dataclass(frozen=True)
class TimeBudget:
    """A wall-clock limit that the whole step schedule, warm-up and cool-down included, must fit into.

    Parameters
    ----------
    seconds : float
        The time limit of one training segment (``train.max_minutes`` x 60).
    max_steps : int
        The schedule's length in steps (``train.max_steps``).

    Notes
    -----
    The schedule is read at a position, not at a step: ``max(step, share of the budget used x max_steps)``.
    A machine fast enough to reach ``max_steps`` in time never lets the clock lead, so the plain step
    schedule rules and the run is as reproducible as one without a limit. On a slow machine the clock leads
    and the schedule follows it: warm-up ends after ``warmup_steps / max_steps`` of the budget and the
    cool-down anneals to zero exactly at the limit, so the recipe keeps its shape in fewer steps. Before
    this, only the cool-down followed the clock: on a 2-core AVX2 CPU the Multi30k recipe stopped at step
    587 of 2,800, inside its 600-step warm-up, and scored 20.8 BLEU. The position only rises, so the rate
    never jumps back up within a segment.
    """

    seconds: float
    max_steps: int

    def __post_init__(self) -> None:
        if not (self.seconds > 0 and math.isfinite(self.seconds)) or self.max_steps < 1:
            raise ValueError(
                f"TimeBudget(seconds={self.seconds}, max_steps={self.max_steps}): seconds must be positive "
                "and finite, max_steps at least 1"
            )

    def schedule_step(self, elapsed_seconds: float, start_seconds: float = 0.0) -> float:
        """Return the step of the schedule that the clock has reached.

        Parameters
        ----------
        elapsed_seconds : float
            Wall-clock time since the segment began.
        start_seconds : float
            When the clock starts counting: the end of the segment's first step, so that one-off start-up
            costs (allocations, first kernel calls) do not count as schedule.

        Returns
        -------
        float
            ``max_steps`` times the share of the budget used after ``start_seconds``: 0.0 until then,
            ``max_steps`` at the limit and after it.

        Notes
        -----
        The share is measured against the time left after ``start_seconds``, so the position still reaches
        ``max_steps`` exactly when the run's stop condition (``seconds`` since the segment began) fires.
        """
        usable = self.seconds - start_seconds
        if usable <= 0:
            return float(self.max_steps)
        share = min(max((elapsed_seconds - start_seconds) / usable, 0.0), 1.0)
        return share * self.max_steps


def build_scheduler(
    optimizer: Optimizer,
    d_model: int,
    warmup_steps: int,
    scale: float = 1.0,
    total_steps: int | None = None,
    cooldown_steps: int = 0,
    clock_step: Callable[[], float] | None = None,
) -> LambdaLR:
    """Wrap :func:`inverse_sqrt_learning_rate` as a PyTorch scheduler.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        Its parameter groups' ``lr`` must be 1.0: the schedule gives the absolute rate.
    d_model : int
        Model width.
    warmup_steps : int
        Warm-up steps.
    scale : float
        Multiplier on Eq. (3).
    total_steps : int or None
        Length of the run, for the cool-down.
    cooldown_steps : int
        Linear cool-down length (0: none).
    clock_step : callable or None
        Returns the step the wall clock has reached (:meth:`TimeBudget.schedule_step`); the schedule is read
        at the larger of it and the optimizer step. None: steps alone.

    Returns
    -------
    torch.optim.lr_scheduler.LambdaLR
        Call ``step()`` after every optimizer step.

    Notes
    -----
    The scheduler's internal count starts at 0 for the first optimizer step, hence the ``+ 1``. Where the
    clock leads (a time budget that binds) the rate depends on it, so such a run is not bit-for-bit
    repeatable; where it never leads, the rates are exactly the step schedule's.
    """

    def rate(index: int) -> float:
        position = float(index + 1)
        if clock_step is not None:
            position = max(position, clock_step())
        return inverse_sqrt_learning_rate(position, d_model, warmup_steps, scale, total_steps, cooldown_steps)

    return LambdaLR(optimizer, rate)


def crossed_multiple(previous: float, position: float, every: int) -> bool:
    """Tell whether the schedule passed a multiple of ``every`` between two positions.

    Parameters
    ----------
    previous : float
        The schedule's position after the previous step.
    position : float
        Its position after this step (at least ``previous``).
    every : int
        The interval (``validate_every``, ``checkpoint_every``); 0 means never.

    Returns
    -------
    bool
        True when some multiple of ``every`` lies in ``(previous, position]``.

    Notes
    -----
    With whole steps this is ``step % every == 0``. When a binding time budget moves the position faster
    than the steps, validations and checkpoints keep their spacing in the schedule, so the last checkpoints
    averaged at the end sit in the cool-down as they do on a machine that finishes ``max_steps``.
    """
    return every > 0 and math.floor(position / every) > math.floor(previous / every)
