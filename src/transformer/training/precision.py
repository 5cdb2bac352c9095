"""Numeric precision of training: fp32, bf16 autocast (CPU and CUDA) or fp16 with a gradient scaler (CUDA)."""

import contextlib
from collections.abc import Iterator

import torch

from transformer.device import bf16_unsupported_reason


def check_precision(requested: str, device: torch.device) -> None:
    """Refuse a precision the device cannot train in.

    Parameters
    ----------
    requested : str
        "auto", "fp32", "bf16" or "fp16".
    device : torch.device
        The training device.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        One line naming ``train.precision`` and the device, for fp16 off CUDA or bf16 without native support.

    Notes
    -----
    fp16 needs a gradient scaler, which PyTorch has only for CUDA. bf16 is refused where the device would
    only emulate it (:func:`transformer.device.bf16_unsupported_reason`: CPUs with AVX2 but neither AVX-512
    BF16 nor AMX), rather than falling back to fp32: an explicit request is the user's choice of numerics,
    and a silent fp32 run would not be what the config records. ``auto`` never picks what the device lacks.
    "auto" is resolved by measurement (``transformer.autotune.precision_probe``), not here.
    """
    if requested == "fp16" and device.type != "cuda":
        raise ValueError("train.precision='fp16' needs a CUDA device; use bf16 or fp32 on the CPU")
    if requested == "bf16":
        reason = bf16_unsupported_reason(device)
        if reason is not None:
            raise ValueError(f"train.precision='bf16': {reason}; use precision auto or fp32")


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
