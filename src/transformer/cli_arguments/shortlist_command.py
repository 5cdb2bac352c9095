"""The options of ``transformer shortlist``: build a checkpoint's vocabulary shortlist from training pairs."""

import argparse

from transformer.cli_arguments.parser import Subcommands
from transformer.command_checks import integer_in_range
from transformer.decoding.checkpoint_shortlist import DEFAULT_FREQUENT, DEFAULT_PER_SOURCE


def add_shortlist_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer shortlist`` and its options.

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
    Without ``--source`` and ``--target`` the run's own training split is read, as named by the experiment
    config stored in the checkpoint (:func:`~transformer.decoding.checkpoint_shortlist.training_files`).
    """
    shortlist = commands.add_parser(
        "shortlist",
        help="build a vocabulary shortlist beside a checkpoint (then decode with --shortlist)",
        description="Count which target pieces occur with each source piece in the training pairs and store "
        "each piece's most likely targets, with the most frequent pieces, as CHECKPOINT/shortlist.safetensors.",
    )
    shortlist.add_argument("--checkpoint", required=True, help="checkpoint or run directory")
    shortlist.add_argument("--source", help="source side of the training pairs (default: the run's own)")
    shortlist.add_argument("--target", help="target side of the training pairs, line-aligned with --source")
    shortlist.add_argument(
        "--per-source",
        type=integer_in_range(0, 100_000),
        default=DEFAULT_PER_SOURCE,
        help=f"candidate target pieces kept per source piece (default {DEFAULT_PER_SOURCE})",
    )
    shortlist.add_argument(
        "--frequent",
        type=integer_in_range(0, 10_000_000),
        default=DEFAULT_FREQUENT,
        help=f"most frequent target pieces every sentence may use (default {DEFAULT_FREQUENT})",
    )
    shortlist.add_argument(
        "--output", help="shortlist file to write (default CHECKPOINT/shortlist.safetensors)"
    )
    return shortlist
