"""Where and how the suite ran: CPU, cores, memory, versions, allocator, threads, date and command.

Numbers from different machines or allocators are not comparable; the report states all of these so a
reader can tell whether two reports may be compared at all.
"""

import datetime
import os
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from benchmarks.bench_allocator import allocator_description, typed_command
from transformer.atomic_files import write_text_atomically
from transformer.device import cpu_has_native_bf16, cpu_model_and_flags, describe_cpu

#: The repository's root (records name its commit).
_REPOSITORY = Path(__file__).resolve().parent.parent


def cpu_description() -> dict[str, Any]:
    """Read the CPU model and its vector and matrix extensions from /proc/cpuinfo.

    Returns
    -------
    dict
        ``model`` (str), ``isa_flags`` (the AMX, AVX-512, AVX2, AVX-VNNI, FMA and F16C flags),
        ``summary`` (one line such as "Intel(R) Xeon(R) Processor (avx2 avx512_bf16 avx512_vnni avx512f,
        no AMX)", the label this project puts on every speed figure) and ``logical_cpus`` (int).

    Notes
    -----
    The same reading as the automatic defaults' machine fingerprint
    (``transformer.autotune.machine``): two machines with one model string can differ in flags (a
    hypervisor may hide AMX), and on a CPU without AMX bf16 products are slower than fp32.
    """
    model, flags = cpu_model_and_flags()
    return {"model": model, "isa_flags": flags, "summary": describe_cpu(), "logical_cpus": os.cpu_count()}


def memory_gib() -> float | None:
    """Total memory in GiB from /proc/meminfo, or None where it cannot be read."""
    try:
        text = Path("/proc/meminfo").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"^MemTotal:\s*(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) / 2**20 if match else None


def package_version(name: str) -> str | None:
    """Version of an installed distribution, or None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_commit(repository: Path) -> str | None:
    """The checked-out commit of the repository (read-only ``git rev-parse``), or None."""
    try:
        completed = subprocess.run(
            ["git", "-C", str(repository), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return completed.stdout.strip() or None


def describe_environment(threads: int, repository: Path, no_tcmalloc: bool) -> dict[str, Any]:
    """Collect everything that decides whether two reports can be compared.

    Parameters
    ----------
    threads : int
        The intra-op thread count the suite set.
    repository : Path
        The project checkout (for the commit).
    no_tcmalloc : bool
        Whether the user opted out of tcmalloc (stated with the allocator).

    Returns
    -------
    dict
        Machine, versions, allocator, threads, date (UTC, ISO 8601), command and commit.

    Notes
    -----
    The command is the one the user typed, even after the suite re-executed itself under tcmalloc.
    """
    return {
        "cpu": cpu_description(),
        "memory_gib": memory_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "native_bf16": cpu_has_native_bf16(),
        "allocator": allocator_description(no_tcmalloc),
        "threads": threads,
        "interop_threads": torch.get_num_interop_threads(),
        "optional_packages": {
            name: package_version(name)
            for name in ("transformers", "ctranslate2", "fairseq-fixed", "fairseq", "OpenNMT-py")
        },
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": typed_command(),
        "git_commit": git_commit(repository),
    }


def provenance_lines(module: str) -> list[str]:
    """Write a record's provenance: the CPU and the date, the command and the commit.

    Parameters
    ----------
    module : str
        The benchmark's module, e.g. ``"benchmarks.confidence"`` (the command is it and this run's arguments).

    Returns
    -------
    list of str
        Two Markdown list items.

    Notes
    -----
    Every record names the CPU it came from: figures differ by CPU kind (AMX, AVX-512 BF16, AVX2 only).
    """
    cpu = cpu_description()
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    command = " ".join(["python", "-m", module, *sys.argv[1:]])
    return [
        f"- CPU: {cpu['summary']}; date {date}",
        f"- command: `{command}`; commit {git_commit(_REPOSITORY)}",
    ]


def write_record(path: Path, text: str) -> None:
    """Write a record atomically (its folder made) and print it with where it went.

    Parameters
    ----------
    path : Path
        The record's file.
    text : str
        Its Markdown.

    Returns
    -------
    None

    Notes
    -----
    Atomic, so a stopped benchmark leaves the previous record whole.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, text)
    print(text + f"written to {path}")
