"""Training metrics as JSON lines (and optionally TensorBoard)."""

import json
from pathlib import Path
from typing import Any

from transformer.atomic_files import write_text_atomically


class MetricsLog:
    """Append one JSON object per record to ``metrics.jsonl``; mirror scalars to TensorBoard if asked.

    Parameters
    ----------
    path : Path
        The JSON-lines file (appended to, so a resumed run continues it).
    tensorboard_dir : Path or None
        Where to write TensorBoard event files; None disables TensorBoard.

    Raises
    ------
    ValueError
        Naming ``train.tensorboard`` and the extra to install when ``tensorboard_dir`` is given but TensorBoard
        is not installed.

    Notes
    -----
    Each record has ``kind`` ("train" or "valid") and ``step``. TensorBoard needs the ``tensorboard`` extra,
    imported only when asked for, so a run without it never needs the package.
    """

    def __init__(self, path: Path, tensorboard_dir: Path | None = None) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._writer: Any = None
        if tensorboard_dir is not None:
            try:
                from torch.utils.tensorboard import (
                    SummaryWriter,
                )  # optional extra: imported only when asked for
            except ImportError:
                raise ValueError(
                    "train.tensorboard=true needs TensorBoard: pip install 'transformer[tensorboard]'"
                ) from None
            self._writer = SummaryWriter(log_dir=str(tensorboard_dir))

    def drop_after(self, step: int) -> int:
        """Remove the records of steps after ``step`` (those a resumed run is about to redo).

        Parameters
        ----------
        step : int
            The step training continues from (0 for a fresh start).

        Returns
        -------
        int
            How many records were removed.

        Notes
        -----
        A run resumed from its step-400 checkpoint after being killed at step 430 would otherwise log steps
        401-430 twice, and the loss curve would draw a loop. The file is rewritten atomically, and only when
        something is removed; lines that are not JSON (a write cut short by the kill) are dropped too.
        """
        if not self.path.exists():
            return 0
        lines = self.path.read_text(encoding="utf-8").splitlines()
        steps = [_record_step(line) for line in lines]
        kept = [
            line
            for line, line_step in zip(lines, steps, strict=True)
            if line_step is not None and line_step <= step
        ]
        if len(kept) < len(lines):
            write_text_atomically(self.path, "".join(line + "\n" for line in kept))
        return len(lines) - len(kept)

    def write(self, record: dict[str, Any]) -> None:
        """Append one record.

        Parameters
        ----------
        record : dict of str to Any
            JSON-serialisable values; must include ``kind`` and ``step``.

        Returns
        -------
        None

        Notes
        -----
        Flushed at once, so a killed run keeps its metrics up to the last record.
        """
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self._writer is not None:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key != "step":
                    self._writer.add_scalar(f"{record['kind']}/{key}", value, record["step"])
            self._writer.flush()

    def close(self) -> None:
        """Close the TensorBoard writer, if any.

        Returns
        -------
        None

        Notes
        -----
        The JSON-lines file needs no closing: each :meth:`write` opens and closes it. Only TensorBoard keeps
        a writer (and a background thread) open.
        """
        if self._writer is not None:
            self._writer.close()


def _record_step(line: str) -> int | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    step = record.get("step") if isinstance(record, dict) else None
    return step if isinstance(step, int) else None
