"""The ``transformer`` command's entry point: re-execute under tcmalloc where that applies, then run the CLI.

The rule and its reasons are in :mod:`transformer.allocator`; this module only applies it, before anything
imports torch (``import transformer`` loads nothing heavy), and then hands over to :func:`transformer.cli.main`.
"""

import os
import sys

from transformer.allocator import find_tcmalloc, preload_command


def main() -> int:
    """Run the ``transformer`` command, under tcmalloc for the commands that compute.

    Returns
    -------
    int
        The command's exit status (:func:`transformer.cli.main`).

    Notes
    -----
    ``os.execve`` keeps the process ID and the open files, so standard input not yet read, ``torchrun``'s
    bookkeeping and a shell's job control are unaffected. The re-executed process runs the same interpreter
    with its original arguments (``sys.orig_argv``), that is the same console script.
    """
    try:
        environment = preload_command(sys.argv[1:], dict(os.environ), find_tcmalloc())
    except ValueError as error:
        print(f"transformer: error: {error}", file=sys.stderr)
        return 2
    if environment is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], environment)
    from transformer.cli import main as cli_main  # after the allocator is settled: this loads torch

    return cli_main()
