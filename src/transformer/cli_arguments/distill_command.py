"""The options of ``transformer distill``: a student trained on a teacher's translations, in one resumable run."""

import argparse

from transformer.cli_arguments.parser import Subcommands
from transformer.cli_arguments.training_commands import add_config_arguments


def add_distill_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer distill`` and its options.

    Parameters
    ----------
    commands : argparse._SubParsersAction
        The subcommands of the ``transformer`` parser.

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser; :func:`transformer.cli.build_parser` sets its handler.

    Notes
    -----
    ``--config`` is the student's config (``configs/multi30k-student.yaml``): its ``data`` section names the
    corpus whose training sources the teacher translates, its ``distill`` section how. Rerunning the same
    command resumes, stage by stage; under ``torchrun`` the teacher's pass and the training are shared by
    the processes.
    """
    distill = commands.add_parser(
        "distill",
        help="train a small, fast student on a teacher's translations (run under torchrun to share the work)",
        description="Sequence-level knowledge distillation (Kim and Rush, 2016): the teacher translates the "
        "training sources with beam search, the student of --config trains on its outputs, then both are "
        "scored and timed on the validation set. Rerun the same command to resume where it stopped.",
    )
    distill.add_argument(
        "--teacher",
        nargs="+",
        required=True,
        metavar="CHECKPOINT",
        help="the teacher: a checkpoint, an averaged checkpoint or a run directory; several translate as an "
        "ensemble",
    )
    add_config_arguments(distill)
    distill.add_argument(
        "--reuse-teacher-pass",
        metavar="DIR",
        help="copy the finished teacher's pass of another distill run (same teacher, sources and pass "
        "settings) instead of translating again, e.g. for a sweep of students",
    )
    return distill
