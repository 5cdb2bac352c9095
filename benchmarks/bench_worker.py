"""Measurements in a fresh worker process: peak resident memory on Linux, and running the worker itself.

Peak memory is only honest in a process that has not already grown its heap for something larger, so the
attention and training-memory sections run each point as ``python -m benchmarks.bench_<section> --worker ...``
(started in the repository root, where the ``benchmarks`` package is found), which prints its result as one
JSON line.
"""

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

KIB = 1024
#: The repository root: workers start there, so that ``python -m benchmarks.<module>`` finds the package.
REPOSITORY = Path(__file__).resolve().parent.parent


def read_status_bytes(field: str) -> int:
    """Read one memory line of /proc/self/status in bytes.

    Parameters
    ----------
    field : str
        ``"VmRSS"`` (resident now) or ``"VmHWM"`` (peak resident since start or the last reset).

    Returns
    -------
    int
        The value in bytes.

    Notes
    -----
    Linux only. Raises RuntimeError when the line is missing.
    """
    match = re.search(
        rf"^{field}:\s*(\d+) kB", Path("/proc/self/status").read_text(encoding="utf-8"), re.MULTILINE
    )
    if match is None:
        raise RuntimeError(f"/proc/self/status has no {field} line")
    return int(match.group(1)) * KIB


def reset_peak_rss() -> None:
    """Reset this process's peak resident set size (VmHWM) to its current resident size.

    Parameters
    ----------
    None

    Returns
    -------
    None

    Notes
    -----
    Writes 5 to /proc/self/clear_refs (Linux >= 4.0).
    """
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")


def worker_command(module: str, arguments: dict[str, object]) -> list[str]:
    """Build the command line ``python -m module --name value ...`` of a benchmark worker.

    Parameters
    ----------
    module : str
        Dotted name of the benchmark module to run as a worker (its ``__name__``, e.g.
        ``"benchmarks.bench_attention"``).
    arguments : dict of str to object
        Command-line options without the leading dashes (``{"worker": "fused", "length": 128}``); values are
        passed as ``str(value)``, paths made absolute first.

    Returns
    -------
    list of str
        The command, starting with this interpreter, ``-m`` and the module.

    Notes
    -----
    Start it with ``cwd=REPOSITORY``: ``-m`` finds the ``benchmarks`` package in the working directory, and the
    paths among the arguments are absolute, so they still name the same files there. The worker inherits this
    process's environment, so ``LD_PRELOAD`` (tcmalloc) applies to it too.
    """
    command = [sys.executable, "-m", module]
    for name, value in arguments.items():
        command += [f"--{name}", str(value.absolute() if isinstance(value, Path) else value)]
    return command


def run_json_worker(module: str, arguments: dict[str, object], timeout: float, description: str) -> Any:
    """Run ``python -m module --name value ...`` in a fresh process and parse the JSON of its last output line.

    Parameters
    ----------
    module : str
        Dotted name of the benchmark module to run as a worker (its ``__name__``).
    arguments : dict of str to object
        Command-line options without the leading dashes (``{"worker": "fused", "length": 128}``).
    timeout : float
        Seconds before the worker is killed.
    description : str
        What the worker measures, for the error message.

    Returns
    -------
    Any
        The parsed JSON value.

    Notes
    -----
    The worker runs in the repository root (see :func:`worker_command`). A worker that exits with an error
    raises RuntimeError with its exit code and the end of its stderr.
    """
    command = worker_command(module, arguments)
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=REPOSITORY, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"{description} worker failed ({completed.returncode}):\n{completed.stderr[-2000:]}"
        )
    return json.loads(completed.stdout.strip().splitlines()[-1])
