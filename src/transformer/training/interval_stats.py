"""Loss, token and padding sums between two training log records, read back from the device lazily."""

import time
from typing import Any

import torch
from torch import Tensor

from transformer.training.checkpoint import TrainerState


class IntervalStats:
    """Sums of losses, tokens and padding between two training log records.

    Notes
    -----
    Internal to the trainer. Step losses are kept as device tensors until :meth:`take_pending` collects
    them, so training on a GPU does not wait for each step's loss to reach the host.
    """

    def __init__(self) -> None:
        self.loss_sum = 0.0
        self.nll_sum = 0.0
        self.tokens = 0
        self.steps = 0
        self._pending: list[Tensor] = []
        self._padding_sum = 0.0
        self._started = time.perf_counter()

    def add(self, losses: Tensor, tokens: int, padding_ratio: float) -> None:
        """Account for one optimizer step.

        Parameters
        ----------
        losses : torch.Tensor, shape (2,)
            This rank's label-smoothed loss sum and NLL sum for the step, float64, still on the device.
        tokens : int
            Target tokens of the step over all ranks.
        padding_ratio : float
            Mean padding fraction of the step's batches.

        Returns
        -------
        None

        Notes
        -----
        ``losses`` is only queued: :meth:`take_pending` stacks the queue at the next log, validation or
        checkpoint step, so a GPU step never waits for its loss to reach the host. Until then ``loss_sum``
        and ``nll_sum`` lag behind ``tokens``.
        """
        self._pending.append(losses)
        self.tokens += tokens
        self.steps += 1
        self._padding_sum += padding_ratio

    def take_pending(self) -> Tensor | None:
        """Return the step losses not yet read back, and forget them.

        Returns
        -------
        torch.Tensor, shape (steps, 2), or None
            One row per queued step, (loss sum, NLL sum) of this rank, on the device; None if nothing is
            queued.

        Notes
        -----
        The rows are still per rank: the trainer all-reduces them before adding them to ``loss_sum`` and
        ``nll_sum``, and keeps them per step so a non-finite loss can be traced to the step that made it.
        """
        if not self._pending:
            return None
        pending, self._pending = torch.stack(self._pending), []
        return pending

    def seconds(self) -> float:
        """Wall-clock time since the interval began.

        Returns
        -------
        float
            Seconds since this object was created, by ``time.perf_counter``.

        Notes
        -----
        The trainer starts a new interval after each log record, so this times the steps since the last
        one. It is read after the losses are synced to the host, so on a GPU it covers finished work and
        tokens/s is not inflated by queued kernels.
        """
        return time.perf_counter() - self._started

    def padding_ratio(self) -> float:
        """Mean fraction of padding cells in the interval's batches.

        Returns
        -------
        float
            The mean over steps of each step's mean batch padding ratio; 0.0 for an empty interval.

        Notes
        -----
        A mean of means: steps weigh equally whatever their batch count, which differs only at an epoch's
        end. High values mean the token batcher wastes compute on padding.
        """
        return self._padding_sum / max(self.steps, 1)

    def train_record(self, state: TrainerState, learning_rate: float) -> dict[str, Any]:
        """Build the ``metrics.jsonl`` train record of the interval that ends at the state's step.

        Parameters
        ----------
        state : TrainerState
            Step, epoch, tokens seen and elapsed time of the run.
        learning_rate : float
            The rate of the step just taken.

        Returns
        -------
        dict
            ``kind`` "train", ``step``, ``epoch``, ``train_loss`` and ``train_nll`` per target token,
            ``learning_rate``, ``tokens_per_second``, ``padding_ratio``, ``tokens_seen``, ``elapsed_seconds``.

        Notes
        -----
        Call it after the pending losses were read back (the trainer's settle step), or the loss sums lag
        behind the token count and the per-token losses come out low.
        """
        return {
            "kind": "train",
            "step": state.step,
            "epoch": state.epoch,
            "train_loss": self.loss_sum / max(self.tokens, 1),
            "train_nll": self.nll_sum / max(self.tokens, 1),
            "learning_rate": learning_rate,
            "tokens_per_second": self.tokens / max(self.seconds(), 1e-9),
            "padding_ratio": self.padding_ratio(),
            "tokens_seen": state.tokens_seen,
            "elapsed_seconds": state.elapsed_seconds,
        }
