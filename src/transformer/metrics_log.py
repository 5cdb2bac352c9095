"""Training metrics as JSON lines (and optionally TensorBoard): written by the trainer, read back as series.

One writer (:class:`MetricsLog`) and one reader (:func:`read_metrics_series`) of ``metrics.jsonl``, so the
``plot`` command and the experiments' committed curves read a log alike and name a damaged line alike. A part of
its own below training, visualization and the experiments, since all three use it and visualization may not
import training.
"""

import json
from collections.abc import Sequence
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


#: A series of a metrics log: ``(kind, key)``, e.g. ``("train", "train_nll")`` or ``("valid", "valid_loss")``.
SeriesName = tuple[str, str]


def read_metrics_series(
    metrics_path: Path, wanted: Sequence[SeriesName]
) -> dict[SeriesName, list[tuple[int, float]]]:
    """Read some series of a ``metrics.jsonl`` as (step, value) points.

    Parameters
    ----------
    metrics_path : Path
        The JSON-lines log; blank lines are skipped.
    wanted : sequence of (str, str)
        The series, each ``(kind, key)``: the records' kind (``train`` or ``valid``) and the value read.

    Returns
    -------
    dict of (str, str) to list of (int, float)
        Each wanted series (empty when never logged), sorted by step, one point per step: the last logged.

    Raises
    ------
    ValueError
        ``metrics file PATH does not exist`` (or is a directory, or not UTF-8 text); or naming the file and line (``PATH, line N: ...``) for a line
        that is not JSON or not an object, a train or valid record without ``step``, or a wanted value (or the
        step) that is not a number.

    Notes
    -----
    A record's kind is its ``kind`` field; logs written before the field existed are read by their keys (a
    ``train_loss`` makes a train record, a ``valid_loss`` a valid one). A resumed run's log may repeat the
    steps after its checkpoint when it was copied before the trainer dropped them; the last value is the
    redone step's. A damaged line is an error, not skipped: a report or plot would otherwise draw partial
    curves without a word. Booleans are refused as numbers (``true`` as a loss is a writer's bug).
    """
    try:
        lines = Path(metrics_path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ValueError(f"metrics file {metrics_path} does not exist") from None
    except IsADirectoryError:
        raise ValueError(f"metrics file {metrics_path} is a directory") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"metrics file {metrics_path} is not UTF-8 text (byte {error.start})") from None
    points: dict[SeriesName, dict[int, float]] = {name: {} for name in wanted}
    for line_number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{metrics_path}, line {line_number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}: not valid JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
        kind = _record_kind(record)
        if kind is None:
            continue
        if "step" not in record:
            raise ValueError(f"{where}: {kind} record has no 'step'")
        step = int(_number(record, "step", where))
        for name in wanted:
            if name[0] == kind and name[1] in record:
                points[name][step] = _number(record, name[1], where)
    return {name: sorted(series.items()) for name, series in points.items()}


def _record_kind(record: dict[str, Any]) -> str | None:
    """``"train"``, ``"valid"`` or None (a record to read past), from ``kind`` or else from the keys present."""
    kind = record.get("kind")
    if kind is not None:
        return kind if kind in ("train", "valid") else None
    if "train_loss" in record:
        return "train"
    if "valid_loss" in record:
        return "valid"
    return None


def _number(record: dict[str, Any], key: str, where: str) -> float:
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: {key!r} must be a number, got {value!r}")
    return float(value)


def _record_step(line: str) -> int | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    step = record.get("step") if isinstance(record, dict) else None
    return step if isinstance(step, int) else None
