"""What a training run returns, and the error it stops with when the loss diverges."""

from dataclasses import dataclass
from pathlib import Path


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
