"""The checkpoint, the product's central artifact: weights, model config, tokenizer files and search settings.

A checkpoint is a directory::

    step-00001000/
      model.safetensors      weights; the model config, the weights' SHA-256 (and, for weights-only
                             checkpoints, the search settings) in the file's metadata
      tokenizer.model        the SentencePiece model, so the directory alone can translate
                             (or source.spm, target.spm and vocab.json for an imported Marian model)
      optimizer.safetensors  training checkpoints only: Adam moments and random-number-generator states
      trainer_state.json     training checkpoints only: step, data position, schedule, experiment config
      averaged_from.json     averages only: the checkpoints averaged

This module reads and writes what translating, converting, scoring and averaging need, and depends only on
the model, its config and the tokenizers; what only training needs (the optimizer and trainer state, the
manager of the last-K and best checkpoints) is in :mod:`transformer.training.checkpoint`. Nothing is ever
unpickled: only safetensors and JSON are read, so a checkpoint cannot execute code. Directories are assembled
in a hidden sibling and renamed into place (:func:`transformer.atomic_files.staged_directory`), so a crash
(even SIGKILL) leaves the old checkpoint or the new one, never a half-written directory.
"""

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor, nn

from transformer.architectures import (
    ModelConfig,
    SequenceModel,
    architecture_of,
    build_model,
    model_config_from_dict,
)
from transformer.atomic_files import staged_directory
from transformer.config.decode import DecodeConfig
from transformer.data.text_tokenizer import TextTokenizer
from transformer.data.tokenizer import Tokenizer
from transformer.safetensors_files import save_safetensors_file
from transformer.typed_fields import build_dataclass

FORMAT = "transformer-checkpoint-v1"
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
TOKENIZER_FILE = "tokenizer.model"
INDEX_FILE = "index.json"
AVERAGED_FROM_FILE = "averaged_from.json"
#: Key of the weights-file metadata that holds a weights-only checkpoint's search settings (JSON).
DECODE_METADATA_KEY = "decode_config"
#: Key of the weights-file metadata that holds the SHA-256 of the weights (:func:`weights_sha256`); checkpoints
#: written before 2026-11-26 lack it and load unverified.
CHECKSUM_METADATA_KEY = "weights_sha256"
NON_TOKENIZER_FILES = {MODEL_FILE, OPTIMIZER_FILE, STATE_FILE, AVERAGED_FROM_FILE}


class CheckpointError(ValueError):
    """A checkpoint is missing, malformed or does not match what it is loaded into.

    Notes
    -----
    A ``ValueError``, so the command line reports it as one line naming the checkpoint, like any bad input.
    """


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

    Raises
    ------
    CheckpointError
        Naming the source and the missing, unexpected or mis-shaped tensors.

    Notes
    -----
    Names and shapes are compared before ``load_state_dict``, so a mismatch names the file it came from
    instead of surfacing as PyTorch's size-mismatch error.
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


def weights_sha256(weights: dict[str, Tensor]) -> str:
    """Hash a checkpoint's weights: every tensor's name, dtype, shape and bytes, in name order.

    Parameters
    ----------
    weights : dict of str to torch.Tensor
        Model weights on the CPU (as saved or as loaded).

    Returns
    -------
    str
        The hexadecimal SHA-256 digest.

    Notes
    -----
    Computed from the tensors rather than the file, so it can be stored in the file's own metadata and does
    not depend on how safetensors lays the file out; a byte changed anywhere in the tensors changes it. 40 MB
    of weights hash in 34 ms on the 2-core development CPU, once per save and once per load.
    """
    digest = hashlib.sha256()
    for name in sorted(weights):
        tensor = weights[name].detach().contiguous().cpu()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().data)  # the tensor's own memory, no copy
    return digest.hexdigest()


def check_weights(weights: dict[str, Tensor], metadata: dict[str, str], model_file: Path) -> None:
    """Refuse weights that do not match their recorded checksum or hold NaN or infinite values.

    Parameters
    ----------
    weights : dict of str to torch.Tensor
        The tensors read from ``model_file``.
    metadata : dict of str to str
        The file's metadata; ``weights_sha256`` is checked when present (checkpoints written before it was
        recorded have none).
    model_file : Path
        The weights file, named in the error.

    Returns
    -------
    None

    Raises
    ------
    CheckpointError
        Naming the file, when the checksum differs or a tensor holds NaN or infinite values.

    Notes
    -----
    A weights file with a few kilobytes overwritten in the middle still parses, and used to translate every
    line to an empty one with exit status 0; the checksum catches any changed byte, and the finiteness check
    catches damage in files that carry no checksum yet.
    """
    expected = metadata.get(CHECKSUM_METADATA_KEY)
    if expected is not None and weights_sha256(weights) != expected:
        raise CheckpointError(
            f"{model_file}: the weights do not match the SHA-256 recorded when they were saved; the file is "
            "damaged (restore it from a copy, or use another checkpoint)"
        )
    for name, tensor in weights.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            count = int((~torch.isfinite(tensor)).sum())
            raise CheckpointError(
                f"{model_file}: {name} holds {count} NaN or infinite value(s); the weights are damaged"
            )


@dataclass
class Checkpoint:
    """A checkpoint read from disk.

    Parameters
    ----------
    path : Path
        The checkpoint directory.
    model_config : TransformerConfig or RNNConfig
        Architecture of the saved model (the stored config's ``architecture`` key; a Transformer without it).
    weights : dict of str to torch.Tensor
        Model weights (shared tensors once).
    decode_config : DecodeConfig or None
        The search settings of the run that trained it (its config's ``decode`` section), kept by averaged
        checkpoints too; None for checkpoints made elsewhere (e.g. imported from HuggingFace Marian).

    Notes
    -----
    Produced by :func:`load_checkpoint`; :meth:`build_model` instantiates the model. ``transformer
    translate`` / ``evaluate`` and :class:`~transformer.decoding.translator.Translator` search with
    ``decode_config`` unless told otherwise. A training checkpoint's optimizer and trainer state are read
    only by :func:`transformer.training.checkpoint.load_training_checkpoint`.
    """

    path: Path
    model_config: ModelConfig
    weights: dict[str, Tensor]
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
        Everything in the directory except the weights, optimizer, state and provenance files: excluding
        the known files rather than naming the tokenizer's lets both layouts travel through averaging and
        conversion unchanged, but a stray file put in the directory by hand travels with them.
        """
        return {
            path.name: path.read_bytes()
            for path in sorted(self.path.iterdir())
            if path.is_file() and path.name not in NON_TOKENIZER_FILES
        }

    def build_model(self) -> SequenceModel:
        """Instantiate the saved model with its weights.

        Returns
        -------
        transformer.Transformer or transformer.baselines.RNNEncoderDecoder
            The architecture the config names, in eval mode, on the CPU.

        Raises
        ------
        CheckpointError
            If the weights do not fit the config.

        Notes
        -----
        Built on the CPU in eval mode, so dropout is off for decoding; the caller moves it to its device.
        """
        model = build_model(self.model_config)
        load_model_tensors(model, self.weights, str(self.path / MODEL_FILE))
        return model.eval()


def write_model_files(
    directory: Path,
    weights: dict[str, Tensor],
    model_config: ModelConfig,
    tokenizer_files: dict[str, bytes],
    decode_config: DecodeConfig | None = None,
) -> None:
    """Write the weights and tokenizer files of a checkpoint into a directory being assembled.

    Parameters
    ----------
    directory : Path
        An existing (staging) directory.
    weights : dict of str to torch.Tensor
        Model weights, each shared tensor once (:func:`model_tensors`).
    model_config : TransformerConfig or RNNConfig
        The architecture, stored as JSON in the weights file's metadata (an ``RNNConfig``'s includes
        ``architecture: "rnn"``; a Transformer's has no such key, as before the recurrent model existed).
    tokenizer_files : dict of str to bytes
        File name to contents, stored beside the weights.
    decode_config : DecodeConfig or None
        Search settings to keep in the metadata (weights-only checkpoints: a training checkpoint keeps them
        in its trainer state instead).

    Returns
    -------
    None

    Notes
    -----
    Not atomic by itself: callers write into :func:`transformer.atomic_files.staged_directory`, as
    :func:`save_checkpoint` and :func:`transformer.training.checkpoint.save_training_checkpoint` do. The
    metadata records the weights' SHA-256 (:func:`weights_sha256`), which :func:`load_checkpoint` verifies;
    every writer of a checkpoint (training, averaging, conversion) comes through here, so all carry it.
    """
    metadata = {
        "format": FORMAT,
        "model_config": json.dumps(model_config.to_dict()),
        CHECKSUM_METADATA_KEY: weights_sha256(weights),
    }
    if decode_config is not None:
        metadata[DECODE_METADATA_KEY] = json.dumps(dataclasses.asdict(decode_config))
    save_safetensors_file(weights, directory / MODEL_FILE, metadata)
    for name, contents in tokenizer_files.items():
        (directory / name).write_bytes(contents)


def save_checkpoint(
    directory: Path,
    model: nn.Module,
    model_config: ModelConfig,
    tokenizer_files: dict[str, bytes],
    decode_config: DecodeConfig | None = None,
) -> Path:
    """Write a weights-only checkpoint directory atomically (an imported model, a model built in code).

    Parameters
    ----------
    directory : Path
        Final checkpoint directory; replaced if it exists.
    model : torch.nn.Module
        The model (unwrapped from DistributedDataParallel).
    model_config : TransformerConfig or RNNConfig
        Its architecture.
    tokenizer_files : dict of str to bytes
        Tokenizer files stored beside the weights (``{"tokenizer.model": ...}`` for this project's models).
    decode_config : DecodeConfig or None
        Search settings the checkpoint should translate with by default.

    Returns
    -------
    Path
        ``directory``.

    Notes
    -----
    Assembled in a hidden sibling directory, flushed, then renamed: readers never see a partial checkpoint.
    The caller decides whether ``directory`` may be replaced (``transformer convert`` refuses a foreign one).
    """
    with staged_directory(Path(directory)) as staging:
        write_model_files(staging, model_tensors(model), model_config, tokenizer_files, decode_config)
    return Path(directory)


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
        Weights, model config and search settings.

    Notes
    -----
    Only safetensors and JSON are read: nothing is unpickled, so a checkpoint cannot execute code. The search
    settings come from a training checkpoint's ``trainer_state.json`` (its run's ``decode`` section) or from
    the weights file's metadata (averages); every checkpoint written since the format's first version loads.
    The weights are verified against their recorded SHA-256 (checkpoints written before it was recorded
    have none) and must be finite (:func:`check_weights`).
    """
    path = resolve_checkpoint(path)
    model_file = path / MODEL_FILE
    try:
        weights = load_file(str(model_file))
        metadata = read_weights_metadata(model_file)
        config_values = json.loads(metadata["model_config"])
    except (OSError, SafetensorError, KeyError, ValueError) as error:
        raise CheckpointError(f"{model_file}: not a readable checkpoint ({error})") from None
    check_weights(weights, metadata, model_file)
    try:
        model_config = model_config_from_dict(config_values)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{model_file}: unreadable model config ({error})") from None
    decode_values = None
    try:
        if (path / STATE_FILE).exists():
            state_values = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
            decode_values = state_values.get("experiment", {}).get("decode")
    except (OSError, KeyError, TypeError, AttributeError, ValueError) as error:
        raise CheckpointError(f"{path / STATE_FILE}: unreadable training state ({error})") from None
    if decode_values is None and DECODE_METADATA_KEY in metadata:
        decode_values = json.loads(metadata[DECODE_METADATA_KEY])
    try:
        decode_config = build_dataclass(DecodeConfig, decode_values) if decode_values is not None else None
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: unreadable decode settings ({error})") from None
    return Checkpoint(path, model_config, weights, decode_config)


def read_weights_metadata(model_file: Path) -> dict[str, str]:
    """Read the string metadata of a safetensors file without loading its tensors.

    Parameters
    ----------
    model_file : Path
        A ``model.safetensors`` file.

    Returns
    -------
    dict of str to str
        The header's ``__metadata__`` (``format``, ``model_config``, optionally ``decode_config``).

    Raises
    ------
    OSError
        When the file cannot be read.
    KeyError
        When the header has no ``__metadata__``.
    ValueError
        When the header is malformed.

    Notes
    -----
    The safetensors header is an 8-byte little-endian length followed by that much JSON; reading it directly
    avoids a second pass over the weights.
    """
    with open(model_file, "rb") as handle:
        header_size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(header_size))
    metadata: dict[str, str] = header["__metadata__"]
    return metadata


def load_checkpoint_tokenizer(directory: Path) -> TextTokenizer:
    """Load the tokenizer stored in a checkpoint directory.

    Parameters
    ----------
    directory : Path
        A checkpoint directory.

    Returns
    -------
    TextTokenizer
        This project's SentencePiece tokenizer (``tokenizer.model``), or the Marian vocabulary adapter
        (``vocab.json`` with ``source.spm`` and ``target.spm``) for converted HuggingFace Marian models.

    Raises
    ------
    ValueError
        Naming the directory when neither is present.

    Notes
    -----
    The Marian adapter (:mod:`transformer.data.marian_tokenizer`) needs nothing beyond sentencepiece, so
    translating an imported model does not need ``transformers``; it is imported only when a checkpoint holds
    ``vocab.json``.
    """
    directory = Path(directory)
    if (directory / TOKENIZER_FILE).exists():
        return Tokenizer.load(directory / TOKENIZER_FILE)
    if (directory / "vocab.json").exists():
        from transformer.data.marian_tokenizer import MarianTokenizer

        return MarianTokenizer.load(directory)
    raise ValueError(
        f"{directory}: no tokenizer (expected {TOKENIZER_FILE}, or vocab.json with source/target.spm)"
    )


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

    Raises
    ------
    CheckpointError
        For a file that is not part of a checkpoint, an index naming a checkpoint whose weights are gone
        (naming that checkpoint), or a directory with neither weights nor an index.

    Notes
    -----
    A run resolves to its best checkpoint by validation loss, else its latest (the best is what one wants
    to translate with, and the manager never deletes it). The index is trusted: if the directory it names
    has lost its weights, that is an error rather than a fall-back to another checkpoint. A file
    of a checkpoint (``step-00000944/model.safetensors``) means its directory, and ``index.json`` its
    checkpoints directory; any other file is refused as not a checkpoint.
    """
    path = Path(path)
    if path.is_file():
        if (path.parent / MODEL_FILE).is_file() or path.name == INDEX_FILE:
            return resolve_checkpoint(path.parent)
        raise CheckpointError(
            f"{path}: a file, not a checkpoint; pass a checkpoint directory (holding {MODEL_FILE}) or a run"
        )
    if (path / MODEL_FILE).exists():
        return path
    for index_dir in (path, path / "checkpoints"):
        if (index_dir / INDEX_FILE).exists():
            index = read_index(index_dir)
            role = "best" if index.get("best") else "latest"
            name = index.get(role)
            if not name:
                continue
            if not (index_dir / name / MODEL_FILE).exists():
                missing = (
                    index_dir / name if not (index_dir / name).exists() else index_dir / name / MODEL_FILE
                )
                raise CheckpointError(
                    f"{index_dir / INDEX_FILE}: names {name} as the {role} checkpoint, but {missing} does not "
                    "exist (pass another checkpoint directory explicitly)"
                )
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
    Written atomically by :class:`transformer.training.checkpoint.CheckpointManager`; read here because a run
    directory resolves to the checkpoint its index names best.
    """
    index_path = checkpoint_dir / INDEX_FILE
    if not index_path.exists():
        return {"latest": None, "best": None, "checkpoints": []}
    try:
        values: dict[str, Any] = json.loads(index_path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise CheckpointError(f"{index_path}: not valid JSON ({error})") from None
    return values


def describe_mismatch(expected: ModelConfig, actual: ModelConfig, source: str) -> None:
    """Refuse a model config that differs from the expected one, saying which fields differ.

    Parameters
    ----------
    expected : TransformerConfig or RNNConfig
        The config in use.
    actual : TransformerConfig or RNNConfig
        The config found in a checkpoint.
    source : str
        The checkpoint, for the message.

    Returns
    -------
    None

    Raises
    ------
    CheckpointError
        When the architectures or any field differ, naming them, such as "run/step-1: model config differs:
        d_model 256 (checkpoint) != 512".

    Notes
    -----
    Every field is compared, including ones that do not change the weights' shapes (``dropout``,
    ``attention_implementation``), so a resume with such a setting changed is refused too. Configs of two
    architectures differ in ``model.architecture`` alone (their fields are not comparable).
    """
    if architecture_of(actual) != architecture_of(expected):
        raise CheckpointError(
            f"{source}: model config differs: model.architecture {architecture_of(actual)!r} (checkpoint) "
            f"!= {architecture_of(expected)!r}"
        )
    differences = [
        f"{key} {value!r} (checkpoint) != {expected.to_dict()[key]!r}"
        for key, value in actual.to_dict().items()
        if expected.to_dict()[key] != value
    ]
    if differences:
        raise CheckpointError(f"{source}: model config differs: " + "; ".join(differences))
