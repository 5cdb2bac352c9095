"""A checkpoint as translating, converting and averaging use it: weights, model config, tokenizer, search settings."""

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

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
from transformer.checkpoint.integrity import check_model_config, check_tokenizer_files, integrity_metadata
from transformer.checkpoint.layout import (
    CHECKSUM_METADATA_KEY,
    DECODE_METADATA_KEY,
    FORMAT,
    MODEL_FILE,
    NON_TOKENIZER_FILES,
    STATE_FILE,
    TOKENIZER_FILE,
    CheckpointError,
    resolve_checkpoint,
)
from transformer.checkpoint.weights import (
    check_weights,
    load_model_tensors,
    model_tensors,
    read_weights_metadata,
    weights_sha256,
)
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.marian_tokenizer import VOCAB_FILE, MarianTokenizer
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.data.pipeline.tokenizer import Tokenizer
from transformer.safetensors_files import save_safetensors_file
from transformer.typed_fields import build_dataclass


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
    metadata records the weights' SHA-256 (:func:`weights_sha256`), and those of the model config and of
    each tokenizer file (:func:`transformer.checkpoint.integrity.integrity_metadata`), which
    :func:`load_checkpoint` verifies; every writer of a checkpoint (training, averaging, conversion) comes
    through here, so all carry them.
    """
    metadata = {
        "format": FORMAT,
        "model_config": json.dumps(model_config.to_dict()),
        CHECKSUM_METADATA_KEY: weights_sha256(weights),
        **integrity_metadata(model_config.to_dict(), tokenizer_files),
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
    have none) and must be finite (:func:`check_weights`); the model config and the tokenizer files against
    theirs (:mod:`transformer.checkpoint.integrity`), so a hand-edited config or a swapped tokenizer is
    refused by every command, and averaging or converting cannot pass one on under fresh checksums.
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
    if not isinstance(config_values, dict):
        raise CheckpointError(f"{model_file}: unreadable model config (not a JSON object)")
    check_model_config(config_values, metadata, model_file)
    check_tokenizer_files(path, metadata)
    try:
        model_config = model_config_from_dict(config_values)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{model_file}: unreadable model config ({error})") from None
    return Checkpoint(path, model_config, weights, decode_settings(path, metadata))


def decode_settings(path: Path, metadata: dict[str, str] | None = None) -> DecodeConfig | None:
    """Read the search settings a checkpoint carries, without loading its weights.

    Parameters
    ----------
    path : Path
        A resolved checkpoint directory.
    metadata : dict of str to str or None
        Its weights file's metadata if already read; None reads the safetensors header (not the tensors).

    Returns
    -------
    DecodeConfig or None
        A training checkpoint's run's ``decode`` section (``trainer_state.json``), else the one an average
        keeps in its weights' metadata; None for a checkpoint made elsewhere.

    Raises
    ------
    CheckpointError
        Naming the file whose settings cannot be read.

    Notes
    -----
    :func:`load_checkpoint` reads them this way too; ``transformer distill`` records a teacher's search in its
    run's identity with it, where loading and verifying every weight again would only cost time.
    """
    decode_values = None
    try:
        if (path / STATE_FILE).exists():
            state_values = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
            decode_values = state_values.get("experiment", {}).get("decode")
    except (OSError, KeyError, TypeError, AttributeError, ValueError) as error:
        raise CheckpointError(f"{path / STATE_FILE}: unreadable training state ({error})") from None
    if decode_values is None:
        try:
            metadata = metadata if metadata is not None else read_weights_metadata(path / MODEL_FILE)
            if DECODE_METADATA_KEY in metadata:
                decode_values = json.loads(metadata[DECODE_METADATA_KEY])
        except (OSError, KeyError, ValueError) as error:
            raise CheckpointError(f"{path / MODEL_FILE}: not a readable checkpoint ({error})") from None
    try:
        return build_dataclass(DecodeConfig, decode_values) if decode_values is not None else None
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: unreadable decode settings ({error})") from None


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
    CheckpointError
        Naming the file and the checkpoint, when a tokenizer file is not the one the checkpoint was saved with
        (:func:`transformer.checkpoint.integrity.check_tokenizer_files`).

    Notes
    -----
    The tokenizer is checked here as well as in :func:`load_checkpoint`: a caller may load the two at
    different times, and a tokenizer of the same size swapped in between translates garbage. The Marian
    adapter (:mod:`transformer.data.pipeline.marian_tokenizer`) needs nothing beyond sentencepiece, so
    translating an imported model does not need ``transformers``.
    """
    directory = Path(directory)
    check_tokenizer_files(directory)
    if (directory / TOKENIZER_FILE).exists():
        return Tokenizer.load(directory / TOKENIZER_FILE)
    if (directory / VOCAB_FILE).exists():
        return MarianTokenizer.load(directory)
    raise ValueError(
        f"{directory}: no tokenizer (expected {TOKENIZER_FILE}, or vocab.json with source/target.spm)"
    )


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
