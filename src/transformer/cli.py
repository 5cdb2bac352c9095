"""The ``transformer`` command: prepare data, train, distil, average, translate, evaluate, plot.

The command line is three parts: the options of each subcommand (:mod:`transformer.cli_arguments`), the
handler of each (:mod:`transformer.cli_commands`: it checks its options and the files they name, loads the
model it names, makes one library call for its work and prints the outcome), and this module, which builds
the parser and runs a handler, turning the library's errors into one-line messages (exit status 2) instead
of tracebacks.
"""

import argparse
import sys
from collections.abc import Sequence

from transformer.cli_arguments import (
    distill_command,
    shortlist_command,
    training_commands,
    translation_commands,
)
from transformer.cli_arguments.parser import OneLineErrorParser, UsageError
from transformer.cli_commands.distill import run_distill
from transformer.cli_commands.shortlist import run_shortlist
from transformer.cli_commands.training import (
    run_experiment_command,
    run_plot,
    run_prepare,
    run_quickstart,
    run_train,
)
from transformer.cli_commands.translation import (
    run_attention,
    run_average,
    run_backtranslate,
    run_convert,
    run_evaluate,
    run_serve,
    run_translate,
)
from transformer.training.result import TrainingDivergedError


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of every subcommand.

    Returns
    -------
    argparse.ArgumentParser
        The ``transformer`` parser.

    Notes
    -----
    Each subcommand's options are declared in :mod:`transformer.cli_arguments`; here each parser stores its
    ``run_*`` function as ``handler``, which :func:`main` calls, so adding a command is one ``add_*_parser``
    function and one handler, with no dispatch table to keep in step. The order is the order of ``--help``.
    """
    parser = OneLineErrorParser(prog="transformer", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    training_commands.add_prepare_parser(commands).set_defaults(handler=run_prepare)
    training_commands.add_train_parser(commands).set_defaults(handler=run_train)
    training_commands.add_quickstart_parser(commands).set_defaults(handler=run_quickstart)
    translation_commands.add_translate_parser(commands).set_defaults(handler=run_translate)
    translation_commands.add_serve_parser(commands).set_defaults(handler=run_serve)
    translation_commands.add_evaluate_parser(commands).set_defaults(handler=run_evaluate)
    translation_commands.add_backtranslate_parser(commands).set_defaults(handler=run_backtranslate)
    translation_commands.add_average_parser(commands).set_defaults(handler=run_average)
    translation_commands.add_attention_parser(commands).set_defaults(handler=run_attention)
    translation_commands.add_convert_parser(commands).set_defaults(handler=run_convert)
    shortlist_command.add_shortlist_parser(commands).set_defaults(handler=run_shortlist)
    distill_command.add_distill_parser(commands).set_defaults(handler=run_distill)
    training_commands.add_plot_parser(commands).set_defaults(handler=run_plot)
    training_commands.add_experiment_parser(commands).set_defaults(handler=run_experiment_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``transformer`` command.

    Parameters
    ----------
    argv : sequence of str or None
        Arguments without the program name; None reads ``sys.argv``.

    Returns
    -------
    int
        Exit status: 0 on success, 2 on a usage or input error (one line on standard error).

    Notes
    -----
    Known errors (bad config, bad data, mismatched checkpoint, diverged training) print one line naming
    the file, line or option at fault; anything else is a bug and keeps its traceback.
    """
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # named with the subcommand, like any other usage error of it
            raise UsageError(
                f"transformer {args.command}: error: unrecognized arguments: {' '.join(unknown)}"
            )
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    try:
        status: int = args.handler(args)
    except (ValueError, OSError, TrainingDivergedError, ImportError) as error:  # ImportError: a missing extra
        print(f"transformer {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"transformer {args.command}: interrupted", file=sys.stderr)
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
