"""Numeric precision of training: fp32, bf16 autocast (CPU and CUDA) or fp16 with a gradient scaler (CUDA)."""

import contextlib
from collections.abc import Iterator

import torch


def cpu_has_native_bf16() -> bool:
    """Tell whether this CPU computes bf16 matrix products natively (AVX-512 BF16 or AMX).

    Returns
    -------
    bool
        True when oneDNN reports bf16 support.

    Notes
    -----
    On such CPUs (this project's development machine has AMX) a bf16 matmul runs several times faster than
    fp32; elsewhere bf16 would be emulated and slower.
    """
    checker = getattr(torch.backends.mkldnn, "is_available", None)
    if checker is None or not checker():
        return False
    native = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(native()) if native is not None else False


def resolve_precision(requested: str, device: torch.device) -> str:
    """Choose the precision for a device.

    Parameters
    ----------
    requested : str
        "auto", "fp32", "bf16" or "fp16".
    device : torch.device
        The training device.

    Returns
    -------
    str
        "fp32", "bf16" or "fp16".

    Notes
    -----
    "auto" picks bf16 on CUDA GPUs that support it and on CPUs with native bf16, else fp32. fp16 is refused
    on the CPU (no gradient scaler there).
    """
    if requested == "fp16" and device.type != "cuda":
        raise ValueError("train.precision='fp16' needs a CUDA device; use bf16 or fp32 on the CPU")
    if requested != "auto":
        return requested
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if cpu_has_native_bf16() else "fp32"


@contextlib.contextmanager
def autocast(precision: str, device: torch.device) -> Iterator[None]:
    """Run the forward pass in the chosen precision.

    Parameters
    ----------
    precision : str
        "fp32", "bf16" or "fp16".
    device : torch.device
        The device.

    Returns
    -------
    contextlib.AbstractContextManager
        A context in which matrix products run in reduced precision (weights stay fp32).

    Notes
    -----
    The loss is always computed in fp32 (see ``label_smoothed_nll_loss``).
    """
    if precision == "fp32":
        yield
        return
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield
