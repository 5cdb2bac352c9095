"""What identifies a machine for the probes: CPU model and instruction-set flags or GPU, torch version."""

import hashlib
import json
import os
from pathlib import Path

import torch

from transformer.device import cpu_model_and_flags


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
