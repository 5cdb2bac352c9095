"""How the trainer tells its caller what it is doing: the :class:`Reporter` protocol and a silent reporter."""

from typing import Any, Protocol


class Reporter(Protocol):
    """Receives progress from the trainer (the CLI draws a progress bar with it).

    Notes
    -----
    Called on rank 0 only. The library itself never prints. Every method does nothing unless overridden: a
    reporter subclasses this protocol and overrides what it shows (:class:`SilentReporter` overrides
    nothing), or implements the four methods without subclassing, as the CLI's progress bar does.
    """

    def start(self, total_steps: int, initial_step: int) -> None:
        """Announce that training begins (or resumes at ``initial_step``).

        Parameters
        ----------
        total_steps : int
            ``train.max_steps``, the step count at which the run ends if nothing else stops it first.
        initial_step : int
            Optimizer steps already done: 0 for a fresh run, the checkpoint's step after ``--resume``.

        Returns
        -------
        None

        Notes
        -----
        Called once per :meth:`Trainer.train`, after the checkpoint is restored. The autotuning notes of the
        trainer's constructor arrive through :meth:`message` before it, so :meth:`message` must work
        unstarted.
        """
        return None

    def update(self, step: int, metrics: dict[str, Any]) -> None:
        """Report the training metrics at a log step.

        Parameters
        ----------
        step : int
            The optimizer step just finished.
        metrics : dict[str, Any]
            The ``metrics.jsonl`` train record: ``train_loss``, ``train_nll``, ``learning_rate``,
            ``tokens_per_second``, ``padding_ratio``, ``tokens_seen``, ``elapsed_seconds``, ``epoch``.

        Returns
        -------
        None

        Notes
        -----
        Called every ``train.log_every`` steps, not every step: reading the losses back is a host sync the
        loop makes only then, so ``step`` can jump by more than one between calls.
        """
        return None

    def message(self, text: str) -> None:
        """Tell the user something (data statistics, validation, checkpoints).

        Parameters
        ----------
        text : str
            One line, without a trailing newline.

        Returns
        -------
        None

        Notes
        -----
        Can come before :meth:`start` (autotuning notes) and after :meth:`close` (the time-limit note of
        :meth:`Trainer.train`), so an implementation must not assume it is open.
        """
        return None

    def close(self) -> None:
        """Announce that training ended.

        Returns
        -------
        None

        Notes
        -----
        Called from a ``finally`` block, so it runs also when training raises (a diverged loss, an
        interrupt); it must not raise itself, or it would hide the original error.
        """
        return None


class SilentReporter(Reporter):
    """A reporter that ignores everything (for library use and tests).

    Notes
    -----
    The protocol's methods already do nothing, so this only names that choice. The trainer gives it to every
    rank but 0 in place of the caller's reporter, so a ``torchrun`` job prints each line once. Warnings are
    dropped too (a damaged checkpoint skipped on resume); the time-limit note stays available as
    :attr:`~transformer.training.result.TrainResult.schedule_note`.
    """

    def __init__(self) -> None:  # holds nothing; named so its signature is plain (the protocol's takes *args)
        super().__init__()
