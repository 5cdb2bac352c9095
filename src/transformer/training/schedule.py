"""The learning-rate schedule of Eq. (3): linear warm-up, then decay with the inverse square root of the step."""

import math

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


def build_scheduler(
    optimizer: Optimizer,
    d_model: int,
    warmup_steps: int,
    scale: float = 1.0,
    total_steps: int | None = None,
    cooldown_steps: int = 0,
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

    Returns
    -------
    torch.optim.lr_scheduler.LambdaLR
        Call ``step()`` after every optimizer step.

    Notes
    -----
    The scheduler's internal count starts at 0 for the first optimizer step, hence the ``+ 1``.
    """
    return LambdaLR(
        optimizer,
        lambda index: inverse_sqrt_learning_rate(
            index + 1, d_model, warmup_steps, scale, total_steps, cooldown_steps
        ),
    )
