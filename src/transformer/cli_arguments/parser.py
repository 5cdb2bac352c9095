"""The argument parser of ``transformer``, whose usage errors are one line like every other error of the command."""

import argparse
from typing import NoReturn, TypeAlias

#: What ``add_subparsers`` returns: each subcommand's parser is added to it (``commands.add_parser``).
Subcommands: TypeAlias = "argparse._SubParsersAction[OneLineErrorParser]"


class UsageError(ValueError):
    """A command line argparse refuses; its message is the whole line to print.

    Notes
    -----
    Raised by :class:`OneLineErrorParser` and turned into exit status 2 by :func:`transformer.cli.main`, like
    every other input error, so a caller of ``main`` gets a status back instead of ``SystemExit``.
    """


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other error of the command.

    Notes
    -----
    argparse prints the whole usage before its error; the usage of ``translate`` is a dozen lines, which
    buries the one that says what is wrong. ``--help`` still prints it. Subcommand parsers are made of
    this class too (``add_subparsers`` takes the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        """Raise :class:`UsageError` with ``PROG: error: MESSAGE``.

        Parameters
        ----------
        message : str
            argparse's message, naming the option (e.g. "argument --alpha: expected a finite number ...").

        Returns
        -------
        NoReturn
            Always raises.

        Raises
        ------
        UsageError
            Always, with the program name and argparse's message.

        Notes
        -----
        :func:`transformer.cli.main` prints the message on standard error and returns status 2, as argparse
        itself would.
        """
        raise UsageError(f"{self.prog}: error: {message}")
