"""What identifies a machine for the probes: CPU model and instruction-set flags or GPU, torch version."""

import hashlib
import json
import os
import platform
from pathlib import Path

import torch

#: CPU flags that change which kernels PyTorch runs (oneDNN bf16/int8 paths, AMX tiles, vector width).
RELEVANT_CPU_FLAG_PREFIXES = ("amx", "avx512", "avx2", "avx_vnni", "fma", "f16c")
#: The flags that decide matrix-product speed most, named in one-line descriptions of a CPU.
HEADLINE_CPU_FLAGS = ("amx_bf16", "amx_int8", "amx_tile", "avx512f", "avx512_bf16", "avx512_vnni", "avx2")


def cpu_model_and_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, list[str]]:
    """Read the CPU's model name and the instruction-set flags that matter for matrix products.

    Parameters
    ----------
    cpuinfo : Path
        Linux's CPU description (``/proc/cpuinfo``).

    Returns
    -------
    model : str
        The first "model name" line (``platform.processor()`` where the file is missing).
    flags : list of str
        Sorted flags starting with one of :data:`RELEVANT_CPU_FLAG_PREFIXES` (empty without the file).

    Notes
    -----
    Two machines with the same model string can differ in flags (a hypervisor may hide AMX), so both are
    part of the fingerprint.
    """
    model: str | None = None
    flags: set[str] = set()
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model is None:
            model = value.strip()
        elif key.strip() == "flags":
            flags.update(flag for flag in value.split() if flag.startswith(RELEVANT_CPU_FLAG_PREFIXES))
    return model or platform.processor() or platform.machine(), sorted(flags)


def describe_cpu() -> str:
    """Name the CPU and its matrix-relevant flags in one line, for logs and benchmark reports.

    Returns
    -------
    str
        E.g. "Intel(R) Xeon(R) Processor (avx2 avx512_bf16 avx512_vnni avx512f, no AMX)".

    Notes
    -----
    Every speed figure this project records is labelled with this line: the machines it runs on differ.
    """
    model, flags = cpu_model_and_flags()
    headline = [flag for flag in flags if flag in HEADLINE_CPU_FLAGS]
    amx = "" if any(flag.startswith("amx") for flag in flags) else ", no AMX"
    return f"{model} ({' '.join(headline) or 'no AVX2/AVX-512'}{amx})"


def machine_fingerprint(device: torch.device) -> dict[str, object]:
    """Describe what a probe's answer depends on.

    Parameters
    ----------
    device : torch.device
        The device the probe timed.

    Returns
    -------
    dict of str to object
        CPU model and flags, torch version, PyTorch's thread count, and for CUDA the GPU's name and
        compute capability.

    Notes
    -----
    The thread count is included because the same CPU with one thread or with all cores can reach opposite
    decisions (the bf16 path of oneDNN scales differently from fp32).
    """
    model, flags = cpu_model_and_flags()
    fingerprint: dict[str, object] = {
        "cpu": model,
        "cpu_flags": flags,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": device.type,
    }
    if device.type == "cuda":
        fingerprint["gpu"] = torch.cuda.get_device_name(device)
        fingerprint["gpu_capability"] = list(torch.cuda.get_device_capability(device))
    return fingerprint


def fingerprint_key(fingerprint: dict[str, object], probe: str, shape: dict[str, object]) -> str:
    """Make the cache key of one probe on one machine at one shape.

    Parameters
    ----------
    fingerprint : dict of str to object
        From :func:`machine_fingerprint`.
    probe : str
        The probe's name ("precision", "attention", "threads").
    shape : dict of str to object
        The model shapes (and anything else) the probe's answer depends on.

    Returns
    -------
    str
        ``probe:`` followed by 16 hex digits of a SHA-256 over the canonical JSON of all three.

    Notes
    -----
    Canonical JSON (sorted keys) makes the key independent of dict order.
    """
    payload = json.dumps({"machine": fingerprint, "probe": probe, "shape": shape}, sort_keys=True)
    return f"{probe}:{hashlib.sha256(payload.encode()).hexdigest()[:16]}"


def default_cache_dir() -> Path:
    """Locate the user's cache directory for this project.

    Returns
    -------
    Path
        ``$TRANSFORMER_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/transformer``, else
        ``~/.cache/transformer`` (where downloaded corpora go too).

    Notes
    -----
    Tests point ``TRANSFORMER_CACHE_DIR`` at a temporary folder so they never touch the user's cache.
    """
    explicit = os.environ.get("TRANSFORMER_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "transformer"
