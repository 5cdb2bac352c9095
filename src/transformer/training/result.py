"""What a training run returns, and the error it stops with when the loss diverges."""

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from transformer.config.train import TrainConfig


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is left untouched.

    Notes
    -----
    Raised when the losses are read back (log, validation and checkpoint steps, or every
    :meth:`Trainer.train_step`), before anything is saved, so the diverged weights never replace a good
    checkpoint. The message names the first bad step and the latest checkpoint to resume from.
    """


@dataclass
class TrainResult:
    """What a finished (or stopped) training run achieved.

    Parameters
    ----------
    step : int
        Optimizer steps done.
    tokens_seen : int
        Target tokens trained on.
    elapsed_seconds : float
        Training wall-clock time, resumed segments included.
    valid_loss : float or None
        Final validation loss per token (label-smoothed), if validated.
    valid_perplexity : float or None
        Final validation perplexity (from the unsmoothed NLL).
    best_valid_loss : float or None
        Best validation loss seen.
    checkpoint : Path or None
        The last checkpoint written.
    stop_reason : str
        "max_steps", "max_epochs" or "max_minutes".
    schedule_note : str
        When the time limit stopped the run: how much of ``max_steps`` it did and whether the learning rate
        was annealed to zero in time; empty otherwise.

    Notes
    -----
    Returned by :meth:`Trainer.train` on every rank. The losses are summed over ranks, so they agree
    everywhere, but ``checkpoint`` is None on every rank except 0, the only one that writes.
    """

    step: int
    tokens_seen: int
    elapsed_seconds: float
    valid_loss: float | None
    valid_perplexity: float | None
    best_valid_loss: float | None
    checkpoint: Path | None
    stop_reason: str
    schedule_note: str = ""

    def describe(self) -> str:
        """Summarise the run in one line.

        Returns
        -------
        str
            Steps, target tokens, minutes, what stopped it, the final validation loss and perplexity (when
            validated) and the last checkpoint.

        Notes
        -----
        ``transformer train`` and ``transformer quickstart`` print it when training ends; the validation loss
        is label-smoothed, the perplexity comes from the unsmoothed NLL, so the two do not convert into each
        other.
        """
        valid = ""
        if self.valid_loss is not None and self.valid_perplexity is not None:
            valid = f", valid loss {self.valid_loss:.4f}, perplexity {self.valid_perplexity:.2f}"
        return (
            f"trained {self.step} steps ({self.tokens_seen:,} target tokens) in {self.elapsed_seconds / 60:.1f} min, "
            f"stopped by {self.stop_reason}{valid}; checkpoint {self.checkpoint}"
        )


def raise_if_diverged(per_step: Tensor, first_step: int, latest_checkpoint: Path | None) -> None:
    """Raise :class:`TrainingDivergedError` naming the first step whose loss is not finite.

    Parameters
    ----------
    per_step : torch.Tensor, shape (steps, 2)
        Loss and NLL sums of consecutive steps, summed over processes, on the host.
    first_step : int
        The step of the first row.
    latest_checkpoint : Path or None
        The run's latest checkpoint, named as the one to resume from.

    Returns
    -------
    None

    Raises
    ------
    TrainingDivergedError
        When a loss is NaN or infinite.

    Notes
    -----
    The losses are checked per step rather than as a sum, so the message names the step that diverged even
    when the trainer read several steps back at once.
    """
    finite = torch.isfinite(per_step[:, 0])
    if bool(finite.all()):
        return
    bad = int((~finite).nonzero()[0, 0])
    raise TrainingDivergedError(
        f"loss became {float(per_step[bad, 0])} at step {first_step + bad}; the last good checkpoint is "
        f"{latest_checkpoint or 'none'} (try a lower learning rate or train.clip_norm)"
    )


def time_limit_note(step: int, recipe: TrainConfig, learning_rate: float) -> str:
    """Say how much of the schedule a run stopped by its time limit did, and whether it cooled down.

    Parameters
    ----------
    step : int
        The step the run stopped at.
    recipe : TrainConfig
        ``max_minutes``, ``max_steps`` and ``cooldown_steps``.
    learning_rate : float
        The rate at the last step.

    Returns
    -------
    str
        One line; a warning when the run had no cool-down (its rate did not reach zero).

    Notes
    -----
    With a cool-down the clock-led schedule annealed the rate to zero at the limit, so the run is complete
    in fewer steps; without one it stopped mid-schedule and ``--resume`` continues it.
    """
    share = step / recipe.max_steps
    done = (
        f"stopped by max_minutes={recipe.max_minutes} at step {step} of {recipe.max_steps} "
        f"({share:.0%} of the schedule)"
    )
    if recipe.cooldown_steps > 0:
        return (
            f"{done}; warm-up and cool-down followed the clock, annealing the learning rate to zero within "
            "the time limit"
        )
    return (
        f"warning: {done} without a cool-down (train.cooldown_steps is 0), at learning rate "
        f"{learning_rate:.2e}; --resume continues it"
    )
