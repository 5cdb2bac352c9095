"""The learning-rate schedule of Eq. (3): linear warm-up, then decay with the inverse square root of the step."""

import math
from collections.abc import Callable
from dataclasses import dataclass

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def inverse_sqrt_learning_rate(
    step: int,
    d_model: int,
    warmup_steps: int,
    scale: float = 1.0,
    total_steps: int | None = None,
    cooldown_steps: int = 0,
) -> float:
    """Learning rate at an optimizer step.

    Parameters
    ----------
    step : int
        Optimizer step, counted from 1 (step 0 is treated as 1).
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
    """A wall-clock limit inside which the learning rate's cool-down must end.

    Parameters
    ----------
    seconds : float
        The time limit of one training segment (``train.max_minutes`` x 60).
    cooldown_share : float
        Share of the budget, at its end, over which the rate decays linearly to zero: the share of
        ``max_steps`` that ``cooldown_steps`` is, so the schedule keeps its shape when time binds first.

    Notes
    -----
    Without it, a run stopped by its time limit ends at whatever rate it had, before its cool-down: the
    quick start stopped at step 327 of 800 with a high rate and scored 19 BLEU instead of 94. With it, the
    rate at any moment is the step schedule's times ``min(1, remaining / cooldown)`` in seconds, so the
    decay ends exactly at the limit on a slow machine, and the step schedule alone rules on a fast one that
    reaches ``max_steps`` in time. Both factors only fall, so the rate never jumps up within a segment.
    """

    seconds: float
    cooldown_share: float

    def __post_init__(self) -> None:
        if self.seconds <= 0 or not 0.0 < self.cooldown_share <= 1.0:
            raise ValueError(
                f"TimeBudget(seconds={self.seconds}, cooldown_share={self.cooldown_share}): seconds must be "
                "positive and cooldown_share in (0, 1]"
            )

    def factor(self, elapsed_seconds: float) -> float:
        """Return the cool-down factor after some seconds of the segment.

        Parameters
        ----------
        elapsed_seconds : float
            Wall-clock time since the segment began.

        Returns
        -------
        float
            1.0 before the cool-down window, falling linearly to 0.0 at the time limit.

        Notes
        -----
        Multiplied onto :func:`inverse_sqrt_learning_rate`'s rate, not substituted for it: the smaller of
        the step and time cool-downs rules. Past the limit it stays 0.0 rather than going negative.
        """
        remaining = max(self.seconds - elapsed_seconds, 0.0)
        return min(1.0, remaining / (self.cooldown_share * self.seconds))


def build_scheduler(
    optimizer: Optimizer,
    d_model: int,
    warmup_steps: int,
    scale: float = 1.0,
    total_steps: int | None = None,
    cooldown_steps: int = 0,
    time_budget: TimeBudget | None = None,
    elapsed_seconds: Callable[[], float] | None = None,
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
    time_budget : TimeBudget or None
        A time limit the cool-down must also end within.
    elapsed_seconds : callable or None
        Returns the seconds elapsed in the budget's segment; required with ``time_budget``.

    Returns
    -------
    torch.optim.lr_scheduler.LambdaLR
        Call ``step()`` after every optimizer step.

    Notes
    -----
    The scheduler's internal count starts at 0 for the first optimizer step, hence the ``+ 1``. With a time
    budget the rate depends on the clock, so a run that the budget shortens is not bit-for-bit repeatable.
    """
    if time_budget is not None and elapsed_seconds is None:
        raise ValueError("build_scheduler: time_budget needs elapsed_seconds")

    def rate(index: int) -> float:
        base = inverse_sqrt_learning_rate(
            index + 1, d_model, warmup_steps, scale, total_steps, cooldown_steps
        )
        if time_budget is None or elapsed_seconds is None:
            return base
        return base * time_budget.factor(elapsed_seconds())

    return LambdaLR(optimizer, rate)
