"""What makes two trainings with the same seed give the same bits, and the switches that keep it so.

Measured on 2026-11-26 (Intel Xeon with AMX, 2 cores, PyTorch 2.13.0 CPU; also with oneDNN and ATen capped at
AVX2): two runs of the same configuration and seed, with the same thread count, precision and attention
threshold, give bit-identical weights after 40 steps, in fp32 with 1 and 2 threads and in bf16. What did differ:

- the checkpoint files' bytes (the safetensors metadata came out in a per-process order; fixed in
  :mod:`transformer.safetensors_files`);
- the automatic defaults when they are measured anew (``threads: null``, ``precision: auto``,
  ``attention_implementation: auto``, the recipe ladder): each is a timing, so an empty cache or a busy
  machine can flip one, and each changes the arithmetic. They are cached per machine, and a run records what
  it used, so ``--resume`` applies the recorded values (:func:`reconcile_tuning`) rather than measuring again;
- a ``max_minutes`` budget that binds: the schedule follows the clock (``TimeBudget``), so the learning rate at
  a step depends on how fast the steps ran;
- the thread count and the CPU kind themselves (another blocking of the reductions), and on GPUs kernels
  that accumulate with atomics unless ``torch.use_deterministic_algorithms`` is on.

``train.deterministic: true`` turns the last switch on and refuses a time budget (:class:`TrainConfig`).
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

#: The cuBLAS workspace setting that PyTorch requires for deterministic matrix products on CUDA >= 10.2.
CUBLAS_WORKSPACE_SETTING = ":4096:8"


@contextmanager
def deterministic_algorithms(enabled: bool, device: torch.device) -> Iterator[None]:
    """Run a block with PyTorch's deterministic algorithms on, and restore the previous setting after it.

    Parameters
    ----------
    enabled : bool
        ``train.deterministic``; False leaves everything as it is.
    device : torch.device
        The training device; on CUDA the cuBLAS workspace setting is set first if the user did not.

    Returns
    -------
    Iterator[None]
        A context manager.

    Notes
    -----
    ``torch.use_deterministic_algorithms(True)`` makes an operation without a deterministic implementation
    raise instead of silently accumulating with atomics (on CUDA: index_add in the embedding backward,
    some attention backward kernels). On the CPUs measured here training was already bit-reproducible
    without it, so it costs nothing there; on CUDA it can cost speed. ``CUBLAS_WORKSPACE_CONFIG`` must be set
    before cuBLAS creates its handle, so a process that already ran a CUDA product keeps its setting.
    """
    if not enabled:
        yield
        return
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_SETTING)
    previous = torch.are_deterministic_algorithms_enabled()
    previous_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous, warn_only=previous_warn_only)
