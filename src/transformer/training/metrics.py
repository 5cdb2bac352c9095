"""Training metrics as JSON lines (and optionally TensorBoard)."""

import json
from pathlib import Path
from typing import Any


class MetricsLog:
    """Append one JSON object per record to ``metrics.jsonl``; mirror scalars to TensorBoard if asked.

    Parameters
    ----------
    path : Path
        The JSON-lines file (appended to, so a resumed run continues it).
    tensorboard_dir : Path or None
        Where to write TensorBoard event files; None disables TensorBoard.

    Notes
    -----
    Each record has ``kind`` ("train" or "valid") and ``step``. TensorBoard needs the ``tensorboard`` extra;
    without it, asking for TensorBoard raises a clear error.
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
        The JSON-lines file needs no closing.
        """
        if self._writer is not None:
            self._writer.close()
