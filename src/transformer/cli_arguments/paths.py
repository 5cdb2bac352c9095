"""The files and directories a command's options name, found before anything is read or written.

They feed :func:`~transformer.command_checks.refuse_outputs_among_inputs`, which compares a command's outputs
with its inputs (checkpoints included) before any work starts.
"""

import argparse
from pathlib import Path

from transformer.checkpoint.layout import resolve_checkpoint
from transformer.command_checks import check_output_directory


def default_output_dir(args: argparse.Namespace) -> Path:
    """``--output-dir``, else ``runs/<config name>``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments.

    Returns
    -------
    Path
        The run directory (not necessarily existing yet).

    Raises
    ------
    ValueError
        Naming ``--output-dir`` when the path is a file.

    Notes
    -----
    A run directory holds the data it generated, the vocabulary, checkpoints and metrics; a config's name
    is its file's stem, so ``--config configs/tiny.yaml`` and ``--config tiny`` share ``runs/tiny``.
    """
    run_dir = Path(args.output_dir) if args.output_dir else Path("runs") / Path(args.config).stem
    check_output_directory(run_dir, "--output-dir")
    return run_dir


def named_file(option: str, value: str | None) -> list[tuple[str, Path]]:
    """Pair a file option with its path, or nothing when it means standard input or output.

    Parameters
    ----------
    option : str
        The flag, e.g. ``"--output"``.
    value : str or None
        Its value; None and "-" stand for standard input or output.

    Returns
    -------
    list of (str, Path)
        ``[(option, Path(value))]``, or an empty list.

    Notes
    -----
    Standard input and output are never files of another option, so they are left out of the comparison
    of outputs with inputs (:func:`~transformer.command_checks.refuse_outputs_among_inputs`).
    """
    return [] if value is None or value == "-" else [(option, Path(value))]


def checkpoint_directory(args: argparse.Namespace) -> Path:
    """Find the checkpoint directory ``--checkpoint`` means, before loading it.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments with ``checkpoint``.

    Returns
    -------
    Path
        A directory holding ``model.safetensors``.

    Raises
    ------
    CheckpointError
        When the path holds no checkpoint, or its run's index names a checkpoint that is gone.

    Notes
    -----
    See :func:`~transformer.checkpoint.resolve_checkpoint` (a run directory means its best checkpoint, the
    weights file its directory); used to compare the outputs with the checkpoint's files before the model
    is loaded.
    """
    return resolve_checkpoint(Path(args.checkpoint))


def checkpoint_directories(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """Find the checkpoint directories of every ``--checkpoint`` (an ensemble has several).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``translate`` or ``evaluate`` arguments; ``checkpoint`` is a list of paths.

    Returns
    -------
    list of (str, Path)
        ``("--checkpoint", directory)`` per path, for :func:`~transformer.command_checks.refuse_outputs_among_inputs`.

    Raises
    ------
    CheckpointError
        When a path holds no checkpoint, or its run's index names a checkpoint that is gone.

    Notes
    -----
    Resolved before anything is loaded, so an output that is one of the checkpoints' files is refused
    before the models are read.
    """
    return [("--checkpoint", resolve_checkpoint(Path(path))) for path in args.checkpoint or []]
