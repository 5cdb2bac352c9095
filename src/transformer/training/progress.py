"""The progress bar of ``transformer train`` and ``quickstart``: one tqdm line, messages printed above it."""

import sys
from typing import Any

from tqdm import tqdm


class ProgressBar:
    """A tqdm progress bar showing loss, learning rate, tokens/s and ETA; messages print above it.

    Notes
    -----
    Implements the trainer's Reporter protocol. Everything goes to stderr, so stdout stays free for a
    command's results; the bar exists only between :meth:`start` and :meth:`close`.
    """

    def __init__(self) -> None:
        self.bar: Any = None

    def start(self, total_steps: int, initial_step: int) -> None:
        """Open the bar.

        Parameters
        ----------
        total_steps : int
            ``train.max_steps``: the bar's 100 %.
        initial_step : int
            Steps already done (a resumed run starts part-filled).

        Returns
        -------
        None

        Notes
        -----
        Starting the bar at ``initial_step`` keeps tqdm's rate and ETA to this segment's steps; a bar
        started at 0 and jumped forward would report the resumed steps as done in no time.
        """
        self.bar = tqdm(
            total=total_steps, initial=initial_step, unit="step", dynamic_ncols=True, file=sys.stderr
        )

    def update(self, step: int, metrics: dict[str, Any]) -> None:
        """Move the bar to ``step`` and show the latest metrics.

        Parameters
        ----------
        step : int
            The optimizer step just finished.
        metrics : dict[str, Any]
            The train record; ``train_loss``, ``learning_rate``, ``tokens_per_second`` and ``padding_ratio``
            are shown.

        Returns
        -------
        None

        Notes
        -----
        The trainer reports only every ``log_every`` steps, so the bar advances by the difference to its
        position rather than by one. Ignored before :meth:`start` and after :meth:`close`.
        """
        if self.bar is None:
            return
        self.bar.update(step - self.bar.n)
        self.bar.set_postfix(
            loss=f"{metrics['train_loss']:.3f}",
            lr=f"{metrics['learning_rate']:.2e}",
            tok_s=f"{metrics['tokens_per_second']:.0f}",
            pad=f"{metrics['padding_ratio']:.2f}",
        )

    def message(self, text: str) -> None:
        """Print a line without breaking the bar.

        Parameters
        ----------
        text : str
            The line to print.

        Returns
        -------
        None

        Notes
        -----
        With the bar open, ``tqdm.write`` prints above it and redraws it; a plain ``print`` would split the
        bar's line. Without a bar (before :meth:`start`, after :meth:`close`) it is a plain print to stderr.
        """
        if self.bar is None:
            print(text, file=sys.stderr)
        else:
            self.bar.write(text, file=sys.stderr)

    def close(self) -> None:
        """Close the bar.

        Returns
        -------
        None

        Notes
        -----
        Idempotent: the bar is dropped after closing, so a second call does nothing and later messages
        print plainly.
        """
        if self.bar is not None:
            self.bar.close()
            self.bar = None
