"""What an automatic default resolved to, and a name for the device it was measured on."""

from dataclasses import dataclass

import torch

from transformer.device import describe_cpu


@dataclass(frozen=True)
class TuningDecision:
    """What an automatic default resolved to, and why.

    Parameters
    ----------
    value : str
        The chosen setting ("bf16", "fp32", "2", "128", ...).
    reason : str
        One line for the log: the measurement (or fact) behind the choice.
    seconds : dict of str to float
        The probe's best time per candidate; empty when nothing was timed.
    cached : bool
        True when the answer came from the cache rather than a fresh measurement.

    Notes
    -----
    Shared by every probe so that the trainer and the translator log them alike.
    """

    value: str
    reason: str
    seconds: dict[str, float]
    cached: bool


def describe_device(device: torch.device) -> str:
    """Name the device a probe ran on, for its log line.

    Parameters
    ----------
    device : torch.device
        The device.

    Returns
    -------
    str
        The GPU's name, or the CPU's model and relevant flags.

    Notes
    -----
    The flags say at a glance why two CPUs decided differently (AMX or not).
    """
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return describe_cpu()
