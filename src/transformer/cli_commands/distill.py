"""Handler of ``transformer distill``: check the options, run the distillation, print its summary."""

import argparse
from pathlib import Path

from transformer.cli_arguments.paths import default_output_dir
from transformer.cli_commands.training import load_experiment
from transformer.command_checks import refuse_outputs_among_inputs
from transformer.decoding.translation_progress import translation_progress_bar
from transformer.distillation.pipeline import DistillRequest, distill


def run_distill(args: argparse.Namespace) -> int:
    """Distil ``--teacher`` into the student of ``--config`` in ``--output-dir``, or resume that run.

    Parameters
    ----------
    args : argparse.Namespace
        ``--teacher`` (one or more), ``--config`` with ``--set`` overrides, ``--output-dir`` and
        ``--reuse-teacher-pass``.

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`transformer.cli.main` prints them as one line).

    Notes
    -----
    An ``--output-dir`` that is, or holds, a teacher is refused before anything is read; one holding anything
    but an earlier distill run is refused by the library, before anything is written. Under ``torchrun`` only
    rank 0 prints.
    """
    experiment = load_experiment(args)
    output_dir = default_output_dir(args)
    teachers = tuple(Path(teacher) for teacher in args.teacher)
    refuse_outputs_among_inputs(
        [("--teacher", teacher) for teacher in teachers], written_directories=[("--output-dir", output_dir)]
    )
    reuse = Path(args.reuse_teacher_pass) if args.reuse_teacher_pass else None
    result = distill(DistillRequest(teachers, experiment, output_dir, reuse), print, translation_progress_bar)
    if result is not None:
        print(result.describe())
    return 0
