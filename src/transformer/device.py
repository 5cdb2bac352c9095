"""Device selection: turn a ``device`` setting ("auto", "cpu", "cuda", "cuda:N") into a ``torch.device``."""

import torch


def resolve_device(requested: str, local_rank: int = 0, option: str = "train.device") -> torch.device:
    """Turn a device setting into a device.

    Parameters
    ----------
    requested : str
        "auto" (CUDA when available, else CPU), "cpu", "cuda" or "cuda:N".
    local_rank : int
        Picks the GPU for "auto"/"cuda" when several processes share a machine.
    option : str
        The setting's name in error messages: ``train.device`` for training, ``--device`` or ``device`` for
        translation.

    Returns
    -------
    torch.device
        The device.

    Notes
    -----
    Raises ValueError when CUDA is requested but unavailable, or when "auto"/"cuda" would give this process
    (local rank ``local_rank``) a GPU the machine does not have, e.g. ``torchrun --nproc_per_node=2`` on a
    machine with one GPU: without the check both processes would silently share GPU 0.
    """
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"{option}={requested!r} but CUDA is not available on this machine")
        if ":" in requested:
            return torch.device(requested)
        gpus = torch.cuda.device_count()
        if local_rank >= gpus:
            raise ValueError(
                f"{option}={requested!r}: process of local rank {local_rank} has no GPU of its own "
                f"({gpus} visible); start at most {gpus} processes per machine or set {option}=cpu"
            )
        return torch.device(f"cuda:{local_rank}")
    if requested != "cpu":
        raise ValueError(f"{option}={requested!r} is not one of auto, cpu, cuda, cuda:N")
    return torch.device("cpu")
