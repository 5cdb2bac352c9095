"""The progress bar of ``transformer train`` and ``quickstart``: one tqdm line, messages printed above it."""

import sys
from typing import Any

from tqdm import tqdm


class ProgressBar:
    """A tqdm progress bar showing loss, learning rate, tokens/s and ETA; messages print above it.

    Notes
    -----
    Implements the trainer's Reporter protocol.
    """

    def __init__(self) -> None:
        self.bar: Any = None

    def start(self, total_steps: int, initial_step: int) -> None:
        """Open the bar."""
        self.bar = tqdm(
            total=total_steps, initial=initial_step, unit="step", dynamic_ncols=True, file=sys.stderr
        )

    def update(self, step: int, metrics: dict[str, Any]) -> None:
        """Move the bar to ``step`` and show the latest metrics."""
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
        """Print a line without breaking the bar."""
        if self.bar is None:
            print(text, file=sys.stderr)
        else:
            self.bar.write(text, file=sys.stderr)

    def close(self) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
