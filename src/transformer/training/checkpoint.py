"""Checkpoints on disk: safetensors weights plus JSON state, written atomically, never unpickled.

A checkpoint is a directory::

    step-00001000/
      model.safetensors      weights; the model config as JSON in the file's metadata
      optimizer.safetensors  Adam moments and random-number-generator states
      trainer_state.json     step, data position, schedule, experiment config, tokenizer fingerprint
      tokenizer.model        the SentencePiece model, so the directory alone can translate

It is assembled in a hidden temporary directory and renamed into place, so a crash (even SIGKILL) leaves
either the old set of checkpoints or the new one, never a half-written directory. ``index.json`` beside the
checkpoints names the latest and the best (lowest validation loss) one.
"""

import dataclasses
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from transformer.config import DecodeConfig, TransformerConfig, build_dataclass
from transformer.model.transformer import Transformer

FORMAT = "transformer-checkpoint-v1"
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
TOKENIZER_FILE = "tokenizer.model"
INDEX_FILE = "index.json"
AVERAGED_FROM_FILE = "averaged_from.json"
#: Key of the weights-file metadata that holds a weights-only checkpoint's search settings (JSON).
DECODE_METADATA_KEY = "decode_config"
NON_TOKENIZER_FILES = {MODEL_FILE, OPTIMIZER_FILE, STATE_FILE, AVERAGED_FROM_FILE}


class CheckpointError(ValueError):
    """A checkpoint is missing, malformed or does not match what it is loaded into."""


def model_tensors(model: nn.Module) -> dict[str, Tensor]:
    """Collect a model's weights, each shared tensor once.

    Parameters
    ----------
    model : torch.nn.Module
        The model.

    Returns
    -------
    dict of str to torch.Tensor
        State-dict entries, minus later names of tensors already included (tied embeddings).

    Notes
    -----
    safetensors refuses tensors that share memory; loading restores the ties because the module shares them.
    """
    tensors: dict[str, Tensor] = {}
    seen: set[tuple[int, int, tuple[int, ...]]] = set()
    for name, tensor in model.state_dict().items():
        identity = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if identity in seen:
            continue
        seen.add(identity)
        tensors[name] = tensor.detach().contiguous().cpu()
    return tensors


def load_model_tensors(model: nn.Module, tensors: dict[str, Tensor], source: str) -> None:
    """Load weights saved by :func:`model_tensors` into a model of the same architecture.

    Parameters
    ----------
    model : torch.nn.Module
        Target model.
    tensors : dict of str to torch.Tensor
        Saved weights.
    source : str
        File name for error messages.

    Returns
    -------
    None

    Notes
    -----
    Raises CheckpointError naming missing, unexpected or mis-shaped tensors.
    """
    expected = model_tensors(model)
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise CheckpointError(
            f"{source}: weights do not match the model: missing {missing}, unexpected {unexpected}"
        )
    for name, tensor in tensors.items():
        if tensor.shape != expected[name].shape:
            raise CheckpointError(
                f"{source}: {name} has shape {tuple(tensor.shape)}, the model expects {tuple(expected[name].shape)}"
            )
    model.load_state_dict(tensors, strict=False)


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

    Notes
    -----
    Stored as ``trainer_state.json``.
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


@dataclass
class Checkpoint:
    """A checkpoint read from disk.

    Parameters
    ----------
    path : Path
        The checkpoint directory.
    model_config : TransformerConfig
        Architecture of the saved model.
    weights : dict of str to torch.Tensor
        Model weights (shared tensors once).
    state : TrainerState or None
        Training state (None for weights-only checkpoints such as averages).
    optimizer_tensors : dict of str to torch.Tensor
        Adam moments and RNG states (empty for weights-only checkpoints).
    decode_config : DecodeConfig or None
        The search settings of the run that trained it (its config's ``decode`` section), kept by averaged
        checkpoints too; None for checkpoints made elsewhere (e.g. imported from HuggingFace Marian).

    Notes
    -----
    Produced by :func:`load_checkpoint`; :meth:`build_model` instantiates the model. ``transformer
    translate`` / ``evaluate`` and :class:`~transformer.translator.Translator` search with
    ``decode_config`` unless told otherwise.
    """

    path: Path
    model_config: TransformerConfig
    weights: dict[str, Tensor]
    state: TrainerState | None
    optimizer_tensors: dict[str, Tensor]
    decode_config: DecodeConfig | None = None

    def tokenizer_files(self) -> dict[str, bytes]:
        """Read every tokenizer file stored with the checkpoint.

        Returns
        -------
        dict of str to bytes
            File name to contents: ``tokenizer.model`` for this project's models; ``source.spm``,
            ``target.spm`` and ``vocab.json`` for converted HuggingFace Marian models.

        Notes
        -----
        Everything in the directory except the weights, optimizer, state and provenance files.
        """
        return {
            path.name: path.read_bytes()
            for path in sorted(self.path.iterdir())
            if path.is_file() and path.name not in NON_TOKENIZER_FILES
        }

    def build_model(self) -> Transformer:
        """Instantiate the saved model with its weights.

        Returns
        -------
        transformer.Transformer
            In eval mode, on the CPU.

        Notes
        -----
        Raises CheckpointError if the weights do not fit the config.
        """
        model = Transformer(self.model_config)
        load_model_tensors(model, self.weights, str(self.path / MODEL_FILE))
        return model.eval()


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
    The hyper-parameters (``param_groups``) go to JSON instead.
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
    Tensors are moved to each parameter's device by ``Optimizer.load_state_dict``.
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


def save_checkpoint(
    directory: Path,
    model: nn.Module,
    model_config: TransformerConfig,
    tokenizer_files: dict[str, bytes],
    state: TrainerState | None = None,
    extra_tensors: dict[str, Tensor] | None = None,
) -> Path:
    """Write a checkpoint directory atomically.

    Parameters
    ----------
    directory : Path
        Final checkpoint directory (e.g. ``run/checkpoints/step-00001000``); replaced if it exists.
    model : torch.nn.Module
        The model (unwrapped from DistributedDataParallel).
    model_config : TransformerConfig
        Its architecture.
    tokenizer_files : dict of str to bytes
        Tokenizer files stored beside the weights (``{"tokenizer.model": ...}`` for this project's models).
    state : TrainerState or None
        Training state; None writes a weights-only checkpoint (e.g. an average).
    extra_tensors : dict of str to torch.Tensor or None
        Optimizer moments and RNG states for ``optimizer.safetensors``.

    Returns
    -------
    Path
        ``directory``.

    Notes
    -----
    Written to a hidden sibling directory, flushed, then renamed: readers never see a partial checkpoint.
    """
    temporary = directory.parent / f".{directory.name}.tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    metadata = {"format": FORMAT, "model_config": json.dumps(model_config.to_dict())}
    save_file(model_tensors(model), str(temporary / MODEL_FILE), metadata=metadata)
    if extra_tensors is not None:
        save_file(extra_tensors, str(temporary / OPTIMIZER_FILE), metadata={"format": FORMAT})
    if state is not None:
        (temporary / STATE_FILE).write_text(json.dumps(state.__dict__, indent=1), encoding="utf-8")
    for name, contents in tokenizer_files.items():
        (temporary / name).write_bytes(contents)
    _fsync_directory_files(temporary)
    replace_directory(temporary, directory)
    return directory


def replace_directory(source: Path, destination: Path) -> None:
    """Move a finished directory into place, replacing an existing one.

    Parameters
    ----------
    source : Path
        The completely written directory.
    destination : Path
        Where it belongs.

    Returns
    -------
    None

    Notes
    -----
    An existing destination is first renamed aside, so at every instant one complete version exists.
    """
    if destination.exists():
        trash = destination.parent / f".{destination.name}.old-{os.getpid()}"
        shutil.rmtree(trash, ignore_errors=True)
        os.replace(destination, trash)
        os.replace(source, destination)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(source, destination)


def _fsync_directory_files(directory: Path) -> None:
    for path in directory.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())


def load_checkpoint(path: Path) -> Checkpoint:
    """Read a checkpoint directory, or the best/latest checkpoint of a run.

    Parameters
    ----------
    path : Path
        A checkpoint directory (holding ``model.safetensors``), a run's ``checkpoints`` directory or the run
        directory itself; the last two resolve to the best checkpoint, else the latest.

    Returns
    -------
    Checkpoint
        Weights, config and (if present) training state.

    Notes
    -----
    Only safetensors and JSON are read: nothing is unpickled, so a checkpoint cannot execute code.
    """
    path = resolve_checkpoint(path)
    model_file = path / MODEL_FILE
    try:
        weights = load_file(str(model_file))
        with open(model_file, "rb") as handle:
            header_size = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(header_size))
        config_values = json.loads(header["__metadata__"]["model_config"])
    except (OSError, SafetensorError, KeyError, ValueError) as error:
        raise CheckpointError(f"{model_file}: not a readable checkpoint ({error})") from None
    model_config = TransformerConfig.from_dict(config_values)
    state = None
    try:
        if (path / STATE_FILE).exists():
            state = TrainerState(**json.loads((path / STATE_FILE).read_text(encoding="utf-8")))
        extra = load_file(str(path / OPTIMIZER_FILE)) if (path / OPTIMIZER_FILE).exists() else {}
    except (OSError, SafetensorError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: unreadable training state ({error})") from None
    decode_values = state.experiment.get("decode") if state is not None else None
    if decode_values is None and DECODE_METADATA_KEY in header["__metadata__"]:
        decode_values = json.loads(header["__metadata__"][DECODE_METADATA_KEY])
    try:
        decode_config = build_dataclass(DecodeConfig, decode_values) if decode_values is not None else None
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: unreadable decode settings ({error})") from None
    return Checkpoint(path, model_config, weights, state, extra, decode_config)


def resolve_checkpoint(path: Path) -> Path:
    """Find the checkpoint directory a user means.

    Parameters
    ----------
    path : Path
        A checkpoint, a ``checkpoints`` directory or a run directory.

    Returns
    -------
    Path
        A directory holding ``model.safetensors``.

    Notes
    -----
    A run resolves to its best checkpoint by validation loss, else its latest.
    """
    path = Path(path)
    if (path / MODEL_FILE).exists():
        return path
    for index_dir in (path, path / "checkpoints"):
        if (index_dir / INDEX_FILE).exists():
            index = read_index(index_dir)
            name = index.get("best") or index.get("latest")
            if name and (index_dir / name / MODEL_FILE).exists():
                return index_dir / name
    raise CheckpointError(f"{path}: no checkpoint here (expected {MODEL_FILE} or checkpoints/{INDEX_FILE})")


def read_index(checkpoint_dir: Path) -> dict[str, Any]:
    """Read ``index.json`` of a checkpoints directory.

    Parameters
    ----------
    checkpoint_dir : Path
        The directory holding the checkpoints.

    Returns
    -------
    dict
        ``{"latest": name, "best": name or None, "checkpoints": [names, oldest first]}``; empty values when
        the file does not exist yet.

    Notes
    -----
    Written atomically by :class:`CheckpointManager`.
    """
    index_path = checkpoint_dir / INDEX_FILE
    if not index_path.exists():
        return {"latest": None, "best": None, "checkpoints": []}
    try:
        values: dict[str, Any] = json.loads(index_path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise CheckpointError(f"{index_path}: not valid JSON ({error})") from None
    return values


def write_json_atomically(path: Path, values: Any) -> None:
    """Write JSON to a temporary file and rename it into place.

    Parameters
    ----------
    path : Path
        Destination.
    values : Any
        JSON-serialisable data.

    Returns
    -------
    None

    Notes
    -----
    The temporary file is in the same directory, so the rename is atomic.
    """
    temporary = path.parent / f".{path.name}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(values, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


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
        model_config: TransformerConfig,
        tokenizer_files: dict[str, bytes],
        state: TrainerState,
        extra_tensors: dict[str, Tensor],
    ) -> Path:
        """Write the checkpoint of ``state.step`` and update the index.

        Parameters
        ----------
        model : torch.nn.Module
            The (unwrapped) model.
        model_config : TransformerConfig
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
        Keeps ``keep_last`` most recent checkpoints plus the best one.
        """
        name = f"step-{state.step:08d}"
        path = save_checkpoint(
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
        Used by ``--resume``.
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


def average_checkpoints(paths: Sequence[Path]) -> Checkpoint:
    """Average the weights of several checkpoints of one model (the paper averages the last 5 or 20).

    Parameters
    ----------
    paths : sequence of Path
        Checkpoint directories of the same architecture and vocabulary.

    Returns
    -------
    Checkpoint
        Weights-only checkpoint whose every tensor is the mean of the inputs' (in float64, then cast back).

    Notes
    -----
    Section 6.1: "averaging the last 5 checkpoints, which were written at 10-minute intervals". Refuses
    checkpoints whose configs or tokenizers differ.
    """
    if not paths:
        raise CheckpointError("average_checkpoints needs at least one checkpoint")
    checkpoints = [load_checkpoint(path) for path in paths]
    first = checkpoints[0]
    for other in checkpoints[1:]:
        describe_mismatch(first.model_config, other.model_config, str(other.path))
        if other.tokenizer_files() != first.tokenizer_files():
            raise CheckpointError(f"{other.path}: tokenizer differs from {first.path}'s; cannot average")
    averaged = {}
    for name, tensor in first.weights.items():
        total = sum((checkpoint.weights[name].double() for checkpoint in checkpoints), torch.zeros(()))
        averaged[name] = (total / len(checkpoints)).to(tensor.dtype)
    return Checkpoint(first.path, first.model_config, averaged, None, {}, first.decode_config)


def describe_mismatch(expected: TransformerConfig, actual: TransformerConfig, source: str) -> None:
    """Refuse a model config that differs from the expected one, saying which fields differ.

    Parameters
    ----------
    expected : TransformerConfig
        The config in use.
    actual : TransformerConfig
        The config found in a checkpoint.
    source : str
        The checkpoint, for the message.

    Returns
    -------
    None

    Notes
    -----
    Raises CheckpointError such as "run/step-1: model config differs: d_model 256 (checkpoint) != 512".
    """
    differences = [
        f"{key} {value!r} (checkpoint) != {expected.to_dict()[key]!r}"
        for key, value in actual.to_dict().items()
        if expected.to_dict()[key] != value
    ]
    if differences:
        raise CheckpointError(f"{source}: model config differs: " + "; ".join(differences))


def write_weights_checkpoint(checkpoint: Checkpoint, destination: Path, sources: Iterable[Path]) -> Path:
    """Write a weights-only checkpoint (e.g. an average) atomically.

    Parameters
    ----------
    checkpoint : Checkpoint
        Weights, config and the path whose tokenizer to copy.
    destination : Path
        New checkpoint directory.
    sources : iterable of Path
        The checkpoints it was made from, recorded in ``averaged_from.json``.

    Returns
    -------
    Path
        ``destination``.

    Notes
    -----
    Assembled in a temporary sibling directory and renamed into place. The checkpoint's ``decode_config``,
    if any, is kept in the weights file's metadata, so an average searches as its run did.
    """
    temporary = destination.parent / f".{destination.name}.tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    metadata = {"format": FORMAT, "model_config": json.dumps(checkpoint.model_config.to_dict())}
    if checkpoint.decode_config is not None:
        metadata[DECODE_METADATA_KEY] = json.dumps(dataclasses.asdict(checkpoint.decode_config))
    save_file(checkpoint.weights, str(temporary / MODEL_FILE), metadata=metadata)
    for name, contents in checkpoint.tokenizer_files().items():
        (temporary / name).write_bytes(contents)
    (temporary / AVERAGED_FROM_FILE).write_text(json.dumps([str(path) for path in sources], indent=1))
    _fsync_directory_files(temporary)
    replace_directory(temporary, destination)
    return destination
