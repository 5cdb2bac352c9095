"""tcmalloc for the commands that compute: where it is installed, whether to preload it, the line to log.

PyTorch's CPU training and decoding allocate and free large tensors at every step; with glibc's malloc that
cost 10-40% of the time on every CPU kind measured here (BENCHMARKS.md), and tcmalloc removes most of it. An
allocator can only be chosen when a process starts (``LD_PRELOAD``), so for the commands that compute, the
entry point replaces its own process (``os.execve``: same PID, same arguments, same standard input) by one
with tcmalloc preloaded, before anything imports torch; a training says so in its log
(:func:`allocator_note`), while translation keeps standard error for errors and progress. The variable
``TRANSFORMER_ALLOCATOR=system`` keeps the system allocator. This module imports only the standard
library, and ``import transformer`` loads nothing heavy, which is what makes the switch cheap (tens of
milliseconds).
"""

from collections.abc import Sequence
from pathlib import Path

#: Where distributions install tcmalloc (Debian/Ubuntu ``libtcmalloc-minimal4`` first; gperftools' full
#: library and Fedora's paths after it).
TCMALLOC_CANDIDATES = (
    Path("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"),
    Path("/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4"),
    Path("/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"),
    Path("/usr/lib64/libtcmalloc_minimal.so.4"),
    Path("/usr/lib64/libtcmalloc.so.4"),
)
#: The opt-out: "system" keeps the allocator the process started with; "tcmalloc" (or unset) asks for it.
ALLOCATOR_VARIABLE = "TRANSFORMER_ALLOCATOR"
#: Set in the re-executed process to the library it preloaded, so it neither re-executes nor stays silent.
PRELOADED_VARIABLE = "TRANSFORMER_PRELOADED_ALLOCATOR"
#: The subcommands that spend their time in PyTorch (the others read and write files or parse arguments).
COMPUTE_COMMANDS = frozenset(
    {
        "train",
        "quickstart",
        "translate",
        "evaluate",
        "experiment",
        "attention",
        "serve",
        "backtranslate",
        "distill",
    }
)


def find_tcmalloc(candidates: Sequence[Path] = TCMALLOC_CANDIDATES) -> Path | None:
    """Return the first installed tcmalloc library.

    Parameters
    ----------
    candidates : sequence of Path
        Library paths to try, in order.

    Returns
    -------
    Path or None
        The first that exists, or None when tcmalloc is not installed.

    Notes
    -----
    Paths are checked rather than searched with ``ctypes.util.find_library``, which runs ``ldconfig`` and
    ``gcc`` in subprocesses (hundreds of milliseconds) at every start of the command.
    """
    return next((path for path in candidates if path.exists()), None)


def preload_command(
    argv: Sequence[str], environment: dict[str, str], library: Path | None
) -> dict[str, str] | None:
    """Decide whether to re-execute under tcmalloc, and with which environment.

    Parameters
    ----------
    argv : sequence of str
        The command's arguments after ``transformer`` (``sys.argv[1:]``).
    environment : dict of str to str
        The process environment.
    library : Path or None
        The tcmalloc found (:func:`find_tcmalloc`).

    Returns
    -------
    dict of str to str or None
        The environment to re-execute with (``LD_PRELOAD`` extended, the marker set), or None to run as is:
        a command that does not compute, ``TRANSFORMER_ALLOCATOR=system``, tcmalloc already preloaded (by the
        user or by an earlier re-execution), or not installed.

    Raises
    ------
    ValueError
        When ``TRANSFORMER_ALLOCATOR`` is neither "system" nor "tcmalloc" (the entry point prints it as one
        line and exits with status 2).

    Notes
    -----
    A pure function of its arguments, so the rule is tested without replacing the test's process.
    """
    choice = environment.get(ALLOCATOR_VARIABLE, "tcmalloc")
    if choice not in ("system", "tcmalloc"):
        raise ValueError(f"{ALLOCATOR_VARIABLE}={choice!r}: expected 'system' or 'tcmalloc'")
    command = next((argument for argument in argv if not argument.startswith("-")), None)
    preload = environment.get("LD_PRELOAD", "")
    if (
        choice == "system"
        or command not in COMPUTE_COMMANDS
        or library is None
        or "tcmalloc" in preload
        or PRELOADED_VARIABLE in environment
    ):
        return None
    new_environment = dict(environment)
    new_environment["LD_PRELOAD"] = " ".join(part for part in (str(library), preload) if part)
    new_environment[PRELOADED_VARIABLE] = str(library)
    return new_environment


def allocator_note(environment: dict[str, str]) -> str | None:
    """Describe the allocator the entry point preloaded, for a training's log.

    Parameters
    ----------
    environment : dict of str to str
        The process environment.

    Returns
    -------
    str or None
        "allocator: tcmalloc (...), preloaded by transformer; TRANSFORMER_ALLOCATOR=system keeps the system
        allocator", or None in a process the entry point did not re-execute.

    Notes
    -----
    The trainer logs it beside the measured defaults, after the configuration and the data were accepted, so
    a bad input still gets a one-line error; None in-process (tests, ``python -m transformer.cli``).
    """
    library = environment.get(PRELOADED_VARIABLE)
    if library is None or "tcmalloc" not in environment.get("LD_PRELOAD", ""):
        return None
    return (
        f"allocator: tcmalloc ({library}), preloaded by transformer; "
        f"{ALLOCATOR_VARIABLE}=system keeps the system allocator"
    )
