"""Checkpoint averaging (section 6.1): which checkpoints of a run, their mean weights, and where it may go.

"For the base models, we used a single model obtained by averaging the last 5 checkpoints, which were written
at 10-minute intervals. For the big models, we averaged the last 20 checkpoints." ``transformer
average-checkpoints`` is :func:`select_last_checkpoints` (or explicit directories), then :func:`write_average`:
:func:`check_average_output`, :func:`average_checkpoints` and :func:`write_weights_checkpoint`, in that order.
"""

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from transformer.atomic_files import staged_directory
from transformer.checkpoint.layout import (
    AVERAGED_FROM_FILE,
    MODEL_FILE,
    STATE_FILE,
    CheckpointError,
    read_index,
)
from transformer.checkpoint.model_checkpoint import (
    Checkpoint,
    describe_mismatch,
    load_checkpoint,
    write_model_files,
)


def select_last_checkpoints(run_dir: Path, last: int) -> list[Path]:
    """Name the last ``last`` checkpoints a run kept, oldest first.

    Parameters
    ----------
    run_dir : Path
        A run directory (holding ``checkpoints/index.json``).
    last : int
        How many of the newest checkpoints to take (the paper: 5 for base, 20 for big).

    Returns
    -------
    list of Path
        Checkpoint directories by ascending step; fewer than ``last`` when the run kept fewer.

    Raises
    ------
    ValueError
        For ``last < 1``, naming the option.
    CheckpointError
        For a run without checkpoints, naming the directory.

    Notes
    -----
    The run keeps ``train.keep_checkpoints`` checkpoints (plus its best), so averaging the last 5 needs
    ``keep_checkpoints >= 5``; with fewer, the selection can include the best checkpoint from much earlier in
    the run, not a consecutive window.
    """
    if last < 1:
        raise ValueError(f"--last {last}: average at least one checkpoint")
    checkpoint_dir = Path(run_dir) / "checkpoints"
    names = read_index(checkpoint_dir).get("checkpoints", [])
    if not names:
        raise CheckpointError(f"{checkpoint_dir}: no checkpoints to average")
    return [checkpoint_dir / name for name in sorted(names)[-last:]]


def average_checkpoints(paths: Sequence[Path]) -> Checkpoint:
    """Average the weights of several checkpoints of one model (the paper averages the last 5 or 20).

    Parameters
    ----------
    paths : sequence of Path
        Checkpoint directories of the same architecture and vocabulary.

    Returns
    -------
    Checkpoint
        Weights-only checkpoint whose every tensor is the mean of the inputs' (in float64, then cast back).

    Notes
    -----
    Section 6.1: "averaging the last 5 checkpoints, which were written at 10-minute intervals". Refuses
    checkpoints whose configs or tokenizers differ.
    """
    if not paths:
        raise CheckpointError("average_checkpoints needs at least one checkpoint")
    checkpoints = [load_checkpoint(path) for path in paths]
    first = checkpoints[0]
    for other in checkpoints[1:]:
        describe_mismatch(first.model_config, other.model_config, str(other.path))
        if other.tokenizer_files() != first.tokenizer_files():
            raise CheckpointError(f"{other.path}: tokenizer differs from {first.path}'s; cannot average")
    averaged = {}
    for name, tensor in first.weights.items():
        total = sum((checkpoint.weights[name].double() for checkpoint in checkpoints), torch.zeros(()))
        averaged[name] = (total / len(checkpoints)).to(tensor.dtype)
    return Checkpoint(first.path, first.model_config, averaged, first.decode_config)


def write_weights_checkpoint(checkpoint: Checkpoint, destination: Path, sources: Iterable[Path]) -> Path:
    """Write a weights-only checkpoint (an average) atomically, recording what it was made from.

    Parameters
    ----------
    checkpoint : Checkpoint
        Weights, config and the path whose tokenizer to copy.
    destination : Path
        New checkpoint directory; check it first with :func:`check_average_output`.
    sources : iterable of Path
        The checkpoints it was made from, recorded in ``averaged_from.json``.

    Returns
    -------
    Path
        ``destination``.

    Notes
    -----
    Assembled in a temporary sibling directory and renamed into place. The checkpoint's ``decode_config``,
    if any, is kept in the weights file's metadata, so an average searches as its run did.
    """
    with staged_directory(Path(destination)) as staging:
        write_model_files(
            staging,
            checkpoint.weights,
            checkpoint.model_config,
            checkpoint.tokenizer_files(),
            checkpoint.decode_config,
        )
        (staging / AVERAGED_FROM_FILE).write_text(json.dumps([str(path) for path in sources], indent=1))
    return Path(destination)


def write_average(paths: Sequence[Path], destination: Path) -> Path:
    """Average checkpoints and write the mean as a new checkpoint.

    Parameters
    ----------
    paths : sequence of Path
        Checkpoint directories of one model shape and vocabulary (:func:`select_last_checkpoints`, or given).
    destination : Path
        The new checkpoint directory: missing, empty, or an earlier average (replaced).

    Returns
    -------
    Path
        ``destination``.

    Raises
    ------
    ValueError
        When ``destination`` holds anything but an earlier average (:func:`check_average_output`).
    CheckpointError
        When a checkpoint is missing or damaged, or the checkpoints differ in shape or tokenizer.

    Notes
    -----
    The destination is checked before any checkpoint is read, so a wrong ``--output`` costs no loading; the
    result records its sources in ``averaged_from.json``.
    """
    check_average_output(destination)
    return write_weights_checkpoint(average_checkpoints(paths), destination, paths)


def check_average_output(destination: Path) -> None:
    """Refuse an ``average-checkpoints --output`` that holds anything but an earlier average.

    Parameters
    ----------
    destination : Path
        The ``--output`` directory.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming ``--output`` when it is anything else: a run, a training checkpoint, unrelated files or a file.

    Notes
    -----
    The average replaces ``destination`` as a whole (see :func:`write_weights_checkpoint`), so it may only be
    missing, empty, or an earlier average: a weights checkpoint with ``averaged_from.json`` and no
    subdirectory or training state. Anything else is refused, as ``transformer convert`` refuses a foreign
    directory.
    """
    if destination.is_file():
        raise ValueError(f"--output {destination}: is a file; expected a checkpoint directory")
    if not destination.is_dir() or not any(destination.iterdir()) or holds_earlier_average(destination):
        return
    raise ValueError(
        f"--output {destination}: exists and does not hold an earlier average ({AVERAGED_FROM_FILE}); "
        "choose a new directory"
    )


def holds_earlier_average(directory: Path) -> bool:
    """Whether a directory looks exactly like one ``average-checkpoints`` wrote.

    Parameters
    ----------
    directory : Path
        An existing directory.

    Returns
    -------
    bool
        True when it holds ``model.safetensors`` and ``averaged_from.json``, only files, and no
        ``trainer_state.json``.

    Notes
    -----
    A training checkpoint has ``trainer_state.json``; a run has subdirectories; an imported or converted
    model has no ``averaged_from.json``: none of them counts as an earlier average.
    """
    entries = list(directory.iterdir())
    names = {entry.name for entry in entries}
    return (
        {MODEL_FILE, AVERAGED_FROM_FILE} <= names
        and STATE_FILE not in names
        and all(entry.is_file() for entry in entries)
    )
