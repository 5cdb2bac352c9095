"""Run the suite under tcmalloc: find it, re-execute with it preloaded, and name the allocator in use.

PyTorch's CPU training allocates and frees large tensors every step; on this project's machines preloading
tcmalloc sped training up by 15-40% and cut run-to-run noise from about ±16% to a few percent. LD_PRELOAD only
takes effect when a process starts, so the suite replaces itself (``os.execve``) with the same command and the
library preloaded. This module imports nothing heavy, so that happens before torch is loaded. "The same command"
is the interpreter's own command line (``sys.orig_argv``), so ``python -m benchmarks.run ...`` re-executes as a
module again, in the same working directory.
"""

import os
import shlex
import sys
from pathlib import Path

#: Debian's libtcmalloc-minimal4 (``apt-get install -y libtcmalloc-minimal4``).
TCMALLOC_PATH = Path("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")
#: Set in the re-executed process, so it does not re-execute again.
REEXEC_MARKER = "TRANSFORMER_BENCHMARKS_REEXECUTED"
#: The command as the user typed it, carried across the re-execution for the report.
COMMAND_VARIABLE = "TRANSFORMER_BENCHMARKS_COMMAND"


def reexecute_under_tcmalloc(no_tcmalloc: bool) -> None:
    """Replace this process by the same command with tcmalloc preloaded, when that applies.

    Parameters
    ----------
    no_tcmalloc : bool
        The user's ``--no-tcmalloc``: keep the current allocator.

    Returns
    -------
    None
        Returns only when there is nothing to do: opted out, already re-executed, tcmalloc already preloaded,
        or not installed.

    Notes
    -----
    Child processes (the attention workers) inherit LD_PRELOAD, so the whole suite runs on one allocator. The
    new process gets this one's interpreter options and ``-m benchmarks.run`` back from ``sys.orig_argv``
    (``sys.argv[0]`` names the module's file, which does not run as a script).
    """
    preload = os.environ.get("LD_PRELOAD", "")
    if no_tcmalloc or os.environ.get(REEXEC_MARKER) or "tcmalloc" in preload or not TCMALLOC_PATH.exists():
        return
    environment = dict(os.environ)
    environment["LD_PRELOAD"] = " ".join(part for part in (str(TCMALLOC_PATH), preload) if part)
    environment[REEXEC_MARKER] = "1"
    environment[COMMAND_VARIABLE] = typed_command()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], environment)


def typed_command() -> str:
    """Return the command line that started the suite, as the user typed it (before any re-execution).

    Parameters
    ----------
    None

    Returns
    -------
    str
        ``python`` and the interpreter's arguments, e.g. ``"python -m benchmarks.run --quick"``.

    Notes
    -----
    Read from ``sys.orig_argv`` (``sys.argv`` has lost ``-m benchmarks.run``), or after a re-execution from
    the environment variable the first process set.
    """
    return os.environ.get(COMMAND_VARIABLE) or shlex.join(["python", *sys.orig_argv[1:]])


def allocator_description(no_tcmalloc: bool) -> str:
    """Name the malloc in use (from LD_PRELOAD) and why, for the report."""
    preload = os.environ.get("LD_PRELOAD", "")
    if "tcmalloc" in preload:
        described = f"tcmalloc (LD_PRELOAD={preload})"
    elif preload:
        described = f"LD_PRELOAD={preload}"
    else:
        described = "glibc malloc (no LD_PRELOAD)"
    if no_tcmalloc:
        return f"{described}; --no-tcmalloc given"
    if not preload and not TCMALLOC_PATH.exists():
        return (
            f"{described}; tcmalloc is not installed ({TCMALLOC_PATH}, Debian package libtcmalloc-minimal4)"
        )
    return described
