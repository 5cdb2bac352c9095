"""Handler of ``transformer shortlist``: build a checkpoint's vocabulary shortlist and say what it holds."""

import argparse
from pathlib import Path

from transformer.cli_arguments.paths import named_file
from transformer.command_checks import refuse_outputs_among_inputs
from transformer.decoding.checkpoint_shortlist import build_checkpoint_shortlist


def run_shortlist(args: argparse.Namespace) -> int:
    """Build the shortlist of ``--checkpoint`` and print where it went.

    Parameters
    ----------
    args : argparse.Namespace
        ``--checkpoint``, ``--source``/``--target`` (default: the run's training split), ``--per-source``,
        ``--frequent`` and ``--output``.

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`transformer.cli.main` prints them as one line).

    Notes
    -----
    An ``--output`` that is one of the training files is refused before anything is read; one that exists
    and is not a shortlist file is refused by the library (never replaced).
    """
    refuse_outputs_among_inputs(
        [*named_file("--source", args.source), *named_file("--target", args.target)],
        output_files=named_file("--output", args.output),
    )
    built = build_checkpoint_shortlist(
        Path(args.checkpoint),
        Path(args.source) if args.source else None,
        Path(args.target) if args.target else None,
        args.per_source,
        args.frequent,
        Path(args.output) if args.output else None,
    )
    table = built.shortlist
    print(
        f"shortlist of {built.pairs:,} pairs ({built.source_file}, {built.target_file}): up to {args.per_source} "
        f"candidates per source piece, {table.always.numel()} pieces in every sentence's (the {args.frequent} "
        f"most frequent and the special tokens), for vocabulary {table.vocabulary}; written to {built.path}"
    )
    return 0
