"""What only training keeps in a checkpoint: the optimizer and trainer state, and the last-K/best manager.

A training checkpoint is a checkpoint (:mod:`transformer.checkpoint`: weights, model config, tokenizer) plus
``optimizer.safetensors`` (Adam moments and random-number-generator states) and ``trainer_state.json`` (step,
data position, schedule, experiment config, tokenizer fingerprint), enough for ``--resume`` to continue
exactly. :class:`CheckpointManager` keeps a run's last K checkpoints and its best one by validation loss, and
``index.json`` beside them names the latest and the best.
"""

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor, nn

from transformer.architectures import ModelConfig
from transformer.atomic_files import staged_directory, write_json_atomically
from transformer.checkpoint.layout import (
    FORMAT,
    INDEX_FILE,
    OPTIMIZER_FILE,
    STATE_FILE,
    CheckpointError,
    read_index,
)
from transformer.checkpoint.model_checkpoint import Checkpoint, load_checkpoint, write_model_files
from transformer.checkpoint.weights import model_tensors
from transformer.data.pipeline.token_batch_sampler import BATCH_ORDER_VERSION
from transformer.safetensors_files import save_safetensors_file


@dataclass
class TrainerState:
    """The non-tensor state that makes a resumed run continue exactly.

    Parameters
    ----------
    step : int
        Optimizer steps done.
    epoch : int
        Current pass over the training data (from 0).
    batches_done_in_epoch : int
        Batches of ``epoch`` already consumed (per process).
    tokens_seen : int
        Target tokens trained on so far (all processes).
    best_valid_loss : float or None
        Lowest validation loss per token seen so far.
    valid_loss : float or None
        Validation loss per token at this checkpoint, if measured.
    elapsed_seconds : float
        Training wall-clock time so far.
    scheduler : dict
        ``LambdaLR.state_dict()``.
    param_groups : list of dict
        The optimizer's hyper-parameters per parameter group.
    grad_scaler : dict or None
        ``GradScaler.state_dict()`` for fp16 training.
    experiment : dict
        ``ExperimentConfig.to_dict()``.
    tokenizer_fingerprint : str
        SHA-256 of the SentencePiece model the run uses.
    stop_reason : str or None
        Why training ended ("max_steps", "max_epochs", "max_minutes") in the checkpoint written at its end;
        None in checkpoints written along the way.
    batch_order : int or None
        :data:`~transformer.data.pipeline.token_batch_sampler.BATCH_ORDER_VERSION` of the sampler that cut the batches; None for a
        checkpoint written before the version was recorded (order 1, or 2 from 2026-11-24 until then).
    tuning : dict or None
        The automatic defaults the run measured (:func:`transformer.training.reproducibility.tuning_record`),
        applied again on resume; None in checkpoints written before runs recorded them (2026-11-26).

    Notes
    -----
    Stored as ``trainer_state.json``: plain JSON, so a checkpoint can be inspected and loaded without
    unpickling anything. ``epoch`` and ``batches_done_in_epoch`` with the sampler's seed fix the data
    position, so a resumed run sees the same batches an uninterrupted one would have.
    """

    step: int = 0
    epoch: int = 0
    batches_done_in_epoch: int = 0
    tokens_seen: int = 0
    best_valid_loss: float | None = None
    valid_loss: float | None = None
    elapsed_seconds: float = 0.0
    scheduler: dict[str, Any] = field(default_factory=dict)
    param_groups: list[dict[str, Any]] = field(default_factory=list)
    grad_scaler: dict[str, Any] | None = None
    experiment: dict[str, Any] = field(default_factory=dict)
    tokenizer_fingerprint: str = ""
    stop_reason: str | None = None
    batch_order: int | None = BATCH_ORDER_VERSION
    tuning: dict[str, Any] | None = None


@dataclass
class TrainingCheckpoint(Checkpoint):
    """A checkpoint with the state to resume training from it.

    Parameters
    ----------
    path : Path
        The checkpoint directory.
    model_config : TransformerConfig or RNNConfig
        Architecture of the saved model.
    weights : dict of str to torch.Tensor
        Model weights (shared tensors once).
    decode_config : DecodeConfig or None
        The run's search settings.
    state : TrainerState or None
        Training state; None for a weights-only checkpoint (an average, an imported model).
    optimizer_tensors : dict of str to torch.Tensor
        Adam moments and RNG states (empty for weights-only checkpoints).

    Notes
    -----
    Produced by :func:`load_training_checkpoint`; everything that only translates uses
    :class:`transformer.checkpoint.model_checkpoint.Checkpoint`, which this extends.
    """

    state: TrainerState | None = None
    optimizer_tensors: dict[str, Tensor] = field(default_factory=dict)


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> dict[str, Tensor]:
    """Flatten an optimizer's per-parameter state into named tensors.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        The optimizer (Adam).

    Returns
    -------
    dict of str to torch.Tensor
        Keys ``state.{param_index}.{name}``.

    Notes
    -----
    safetensors stores tensors only, so a non-tensor entry (a Python number) is wrapped in a 0-d tensor,
    and the hyper-parameters (``param_groups``) go to JSON instead. Copied to the CPU, so the file does not
    depend on the device that trained.
    """
    tensors = {}
    for index, values in optimizer.state_dict()["state"].items():
        for name, value in values.items():
            tensor = value if isinstance(value, Tensor) else torch.tensor(value)
            tensors[f"state.{index}.{name}"] = tensor.detach().contiguous().cpu()
    return tensors


def restore_optimizer(
    optimizer: torch.optim.Optimizer, tensors: dict[str, Tensor], param_groups: list[dict[str, Any]]
) -> None:
    """Load state flattened by :func:`optimizer_tensors` back into an optimizer.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        A freshly built optimizer over the same parameters.
    tensors : dict of str to torch.Tensor
        Flattened state.
    param_groups : list of dict
        Saved hyper-parameters.

    Returns
    -------
    None

    Notes
    -----
    Tensors are moved to each parameter's device by ``Optimizer.load_state_dict``. JSON turned Adam's
    ``betas`` tuple into a list, so it is made a tuple again. Parameter indices are positions in
    ``model.parameters()``: the model must be built the same way as the one saved.
    """
    state: dict[int, dict[str, Tensor]] = {}
    for key, tensor in tensors.items():
        if key.startswith("state."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = tensor
    groups = [
        {**group, "betas": tuple(group["betas"])} if "betas" in group else group for group in param_groups
    ]
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def save_training_checkpoint(
    directory: Path,
    model: nn.Module,
    model_config: ModelConfig,
    tokenizer_files: dict[str, bytes],
    state: TrainerState,
    extra_tensors: dict[str, Tensor],
) -> Path:
    """Write a training checkpoint directory atomically.

    Parameters
    ----------
    directory : Path
        Final checkpoint directory (e.g. ``run/checkpoints/step-00001000``); replaced if it exists.
    model : torch.nn.Module
        The model (unwrapped from DistributedDataParallel).
    model_config : TransformerConfig or RNNConfig
        Its architecture.
    tokenizer_files : dict of str to bytes
        Tokenizer files stored beside the weights (``{"tokenizer.model": ...}``).
    state : TrainerState
        Training state, written as ``trainer_state.json``.
    extra_tensors : dict of str to torch.Tensor
        Optimizer moments and RNG states for ``optimizer.safetensors``.

    Returns
    -------
    Path
        ``directory``.

    Notes
    -----
    Written to a hidden sibling directory, flushed, then renamed: readers never see a partial checkpoint, and
    a run killed while saving resumes from the previous one.
    """
    with staged_directory(Path(directory)) as staging:
        write_model_files(staging, model_tensors(model), model_config, tokenizer_files)
        save_safetensors_file(extra_tensors, staging / OPTIMIZER_FILE, {"format": FORMAT})
        (staging / STATE_FILE).write_text(json.dumps(state.__dict__, indent=1), encoding="utf-8")
    return Path(directory)


def load_training_checkpoint(path: Path) -> TrainingCheckpoint:
    """Read a checkpoint with its optimizer and trainer state.

    Parameters
    ----------
    path : Path
        A checkpoint directory, a run's ``checkpoints`` directory or the run directory (see
        :func:`transformer.checkpoint.model_checkpoint.load_checkpoint`).

    Returns
    -------
    TrainingCheckpoint
        Weights, config, search settings, and the training state if the checkpoint has one.

    Raises
    ------
    CheckpointError
        Naming the directory when the state files are unreadable.

    Notes
    -----
    Only safetensors and JSON are read. Unreadable state is a CheckpointError, like unreadable weights, so
    ``--resume`` can fall back to an older checkpoint.
    """
    checkpoint = load_checkpoint(path)
    state = read_trainer_state(checkpoint.path)
    try:
        optimizer_file = checkpoint.path / OPTIMIZER_FILE
        extra = load_file(str(optimizer_file)) if optimizer_file.exists() else {}
    except (OSError, SafetensorError, TypeError, ValueError) as error:
        raise CheckpointError(f"{checkpoint.path}: unreadable training state ({error})") from None
    return TrainingCheckpoint(
        checkpoint.path, checkpoint.model_config, checkpoint.weights, checkpoint.decode_config, state, extra
    )


def read_trainer_state(directory: Path) -> TrainerState | None:
    """Read a checkpoint's training state alone, without its weights or optimizer moments.

    Parameters
    ----------
    directory : Path
        A checkpoint directory (``run/checkpoints/step-00001000``).

    Returns
    -------
    TrainerState or None
        Its ``trainer_state.json``; None for a weights-only checkpoint (an average, an imported model).

    Raises
    ------
    CheckpointError
        Naming the directory when the file is unreadable.

    Notes
    -----
    For readers that want the step, the elapsed training time or the tokens seen of many checkpoints (a
    quality-over-time curve) without loading the optimizer file, three times the size of the weights.
    """
    state_file = Path(directory) / STATE_FILE
    if not state_file.exists():
        return None
    try:
        fields = json.loads(state_file.read_text(encoding="utf-8"))
        if isinstance(fields, dict):
            fields.setdefault("batch_order", None)  # written before the sampler's order was versioned
        return TrainerState(**fields)
    except (OSError, TypeError, ValueError) as error:
        raise CheckpointError(f"{directory}: unreadable training state ({error})") from None


class CheckpointManager:
    """Save checkpoints of a run, keeping the last K and the best by validation loss.

    Parameters
    ----------
    checkpoint_dir : Path
        Directory of the run's checkpoints (created if missing).
    keep_last : int
        Recent checkpoints to keep; the best one is kept in addition.

    Notes
    -----
    Old checkpoints are deleted only after the new one and the index are safely on disk.
    """

    def __init__(self, checkpoint_dir: Path, keep_last: int) -> None:
        self.checkpoint_dir = checkpoint_dir
        self.keep_last = keep_last
        checkpoint_dir.mkdir(parents=True, exist_ok=True)

    def save(
        self,
        model: nn.Module,
        model_config: ModelConfig,
        tokenizer_files: dict[str, bytes],
        state: TrainerState,
        extra_tensors: dict[str, Tensor],
    ) -> Path:
        """Write the checkpoint of ``state.step`` and update the index.

        Parameters
        ----------
        model : torch.nn.Module
            The (unwrapped) model.
        model_config : TransformerConfig or RNNConfig
            Its architecture.
        tokenizer_files : dict of str to bytes
            Tokenizer files to store with the weights.
        state : TrainerState
            Training state; ``state.valid_loss`` decides whether this is the new best.
        extra_tensors : dict of str to torch.Tensor
            Optimizer and RNG tensors.

        Returns
        -------
        Path
            The new checkpoint directory.

        Notes
        -----
        Keeps ``keep_last`` most recent checkpoints plus the best one. The checkpoint, then the index, is
        written atomically before any stale directory is deleted, so a crash at any point leaves an index
        naming only complete checkpoints. Relies on the caller having updated ``state.best_valid_loss``
        first: this checkpoint becomes the best when its ``valid_loss`` is at most that value.
        """
        name = f"step-{state.step:08d}"
        path = save_training_checkpoint(
            self.checkpoint_dir / name, model, model_config, tokenizer_files, state, extra_tensors
        )
        index = read_index(self.checkpoint_dir)
        names = [item for item in index.get("checkpoints", []) if item != name] + [name]
        best = index.get("best")
        if state.valid_loss is not None and state.valid_loss <= (state.best_valid_loss or float("inf")):
            best = name
        keep = set(names[-self.keep_last :]) | ({best} if best else set())
        write_json_atomically(
            self.checkpoint_dir / INDEX_FILE,
            {"latest": name, "best": best, "checkpoints": [item for item in names if item in keep]},
        )
        for stale in (item for item in names if item not in keep):
            shutil.rmtree(self.checkpoint_dir / stale, ignore_errors=True)
        return path

    def latest(self) -> Path | None:
        """Return the newest checkpoint directory, or None before the first save.

        Returns
        -------
        Path or None
            The latest checkpoint.

        Notes
        -----
        Read from ``index.json``, not from the directory listing, so a half-written staging directory is
        never taken for a checkpoint. The trainer uses it to decide whether a run directory is already in
        use (and refuses it without ``--resume``); resuming itself goes through :meth:`newest_first`.
        """
        name = read_index(self.checkpoint_dir).get("latest")
        return self.checkpoint_dir / name if name else None

    def newest_first(self) -> list[Path]:
        """List the run's kept checkpoints, newest first.

        Returns
        -------
        list of Path
            Every checkpoint in the index, by descending step (the latest first).

        Notes
        -----
        ``--resume`` tries them in this order, so a damaged latest checkpoint (a disk error, a copy cut short)
        falls back to the one before it instead of stopping the run.
        """
        names = read_index(self.checkpoint_dir).get("checkpoints", [])
        return [self.checkpoint_dir / name for name in sorted(names, reverse=True)]
