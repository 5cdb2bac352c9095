"""The probes' workload: a position-wise feed-forward block (Eq. 2) at the model's shape, forward and backward."""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

#: Largest amount of work (multiply-adds x 2) one probe call may do: keeps every probe well under a second.
MAX_PROBE_FLOPS = 2.0e9


@dataclass(frozen=True)
class ProbeShape:
    """The sizes a probe measures at.

    Parameters
    ----------
    d_model : int
        Model width.
    d_ff : int
        Inner width of the feed-forward network.
    rows : int
        Token rows per product (the batch's token count, capped so the probe stays short).

    Notes
    -----
    Matrix-product speed depends on the shape (small products reach a fraction of peak, and bf16 kernels
    gain more on large ones), so the probe runs at the model's own widths rather than a square benchmark.
    """

    d_model: int
    d_ff: int
    rows: int

    @classmethod
    def for_model(cls, d_model: int, d_ff: int, batch_tokens: int) -> "ProbeShape":
        """Choose the probe's rows for a model and batch size.

        Parameters
        ----------
        d_model, d_ff : int
            The model's widths.
        batch_tokens : int
            Tokens per training batch (``train.max_tokens``).

        Returns
        -------
        ProbeShape
            Rows = the batch's tokens, rounded down to a power of two, between 64 and whatever keeps one
            forward + backward under :data:`MAX_PROBE_FLOPS`.

        Notes
        -----
        A power of two keeps the cache key stable when ``max_tokens`` changes a little.
        """
        flops_per_row = 3 * 2 * 2 * d_model * d_ff  # forward + two backward products, two layers
        limit = max(64, int(MAX_PROBE_FLOPS // flops_per_row))
        rows = max(64, min(batch_tokens, limit))
        return cls(d_model, d_ff, 1 << (rows.bit_length() - 1))

    def as_dict(self) -> dict[str, object]:
        """Return the shape as a JSON-friendly dict (part of the cache key).

        Returns
        -------
        dict of str to object
            ``d_model``, ``d_ff`` and ``rows``.

        Notes
        -----
        Keys are stable: changing them would invalidate every cached answer.
        """
        return {"d_model": self.d_model, "d_ff": self.d_ff, "rows": self.rows}


def feed_forward_step(
    shape: ProbeShape, device: torch.device, autocast_dtype: torch.dtype | None
) -> Callable[[], None]:
    """Build one forward + backward of a two-layer feed-forward block, as training runs it.

    Parameters
    ----------
    shape : ProbeShape
        Widths and rows.
    device : torch.device
        Where it runs.
    autocast_dtype : torch.dtype or None
        Run the forward under autocast to this dtype (bf16 or fp16); None runs fp32.

    Returns
    -------
    callable
        A workload taking no arguments.

    Notes
    -----
    Weights stay fp32 and autocast casts them on every call, as in training: the casts are part of what
    reduced precision costs, and on CPUs without fast bf16 products they are what makes it lose.
    """
    generator = torch.Generator().manual_seed(0)
    block = nn.Sequential(
        nn.Linear(shape.d_model, shape.d_ff), nn.ReLU(), nn.Linear(shape.d_ff, shape.d_model)
    )
    block = block.to(device)
    inputs = torch.randn(shape.rows, shape.d_model, generator=generator).to(device).requires_grad_(True)

    def step() -> None:
        with torch.autocast(
            device.type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None
        ):
            output = block(inputs)
        output.float().square().mean().backward()

    return step
