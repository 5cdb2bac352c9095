"""What a checkpoint's weights file vouches for besides the weights: the model config and the tokenizer files.

The weights' SHA-256 (:func:`transformer.checkpoint.weights.weights_sha256`) says nothing about the two other
things that decide what a checkpoint computes: the model config stored as JSON beside it in the file's
metadata (``num_heads`` changed from 4 to 2 keeps every tensor's shape, so the weights load and translate
differently), and the tokenizer files in the directory (another tokenizer of the same size maps text to other
ids, and the model translates garbage). Both are hashed when a checkpoint is written and checked at every
load; checkpoints written before these digests were recorded load as before, a training checkpoint among
them checked against the tokenizer fingerprint of its ``trainer_state.json``.
"""

import hashlib
import json
from pathlib import Path
from typing import Any

from transformer.checkpoint.layout import (
    CONFIG_CHECKSUM_METADATA_KEY,
    MODEL_FILE,
    STATE_FILE,
    TOKENIZER_CHECKSUM_METADATA_KEY,
    TOKENIZER_FILE,
    CheckpointError,
)
from transformer.checkpoint.weights import read_weights_metadata
from transformer.data.pipeline.file_digests import sha256_of_file
from transformer.data.pipeline.marian_tokenizer import OPTIONAL_FILES, REQUIRED_FILES

#: Every file a checkpoint's tokenizer may be read from: this project's SentencePiece model, and the files of
#: an imported HuggingFace Marian model. One of these present but not recorded is refused, since the loader
#: would read it.
TOKENIZER_FILE_NAMES = (TOKENIZER_FILE, *REQUIRED_FILES, *OPTIONAL_FILES)


def model_config_sha256(config_values: dict[str, Any]) -> str:
    """Hash a model config in canonical JSON form.

    Parameters
    ----------
    config_values : dict of str to Any
        The config as a dictionary (``ModelConfig.to_dict()``, or the stored JSON parsed).

    Returns
    -------
    str
        The hexadecimal SHA-256 of the JSON text with sorted keys and no spaces.

    Notes
    -----
    The canonical form makes the digest a function of the values, not of how the JSON was spelt, so the
    config written at save time and the one parsed at load time hash alike; every field is a JSON scalar, and
    Python writes floats so that they read back exactly.
    """
    canonical = json.dumps(config_values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def tokenizer_sha256s(tokenizer_files: dict[str, bytes]) -> str:
    """Record the SHA-256 of each tokenizer file, as the JSON text stored in the weights' metadata.

    Parameters
    ----------
    tokenizer_files : dict of str to bytes
        File name to contents, as written beside the weights.

    Returns
    -------
    str
        A JSON object of file name to hexadecimal SHA-256, keys sorted.

    Notes
    -----
    One digest per file, not one for all, so that a refusal names the file that differs; the metadata holds
    strings only, hence JSON text.
    """
    digests = {name: hashlib.sha256(contents).hexdigest() for name, contents in tokenizer_files.items()}
    return json.dumps(dict(sorted(digests.items())), separators=(",", ":"))


def integrity_metadata(config_values: dict[str, Any], tokenizer_files: dict[str, bytes]) -> dict[str, str]:
    """Build the metadata entries that vouch for a checkpoint's model config and tokenizer files.

    Parameters
    ----------
    config_values : dict of str to Any
        The model config as a dictionary (``ModelConfig.to_dict()``).
    tokenizer_files : dict of str to bytes
        The tokenizer files written beside the weights.

    Returns
    -------
    dict of str to str
        ``model_config_sha256`` and ``tokenizer_sha256``.

    Notes
    -----
    Called by :func:`transformer.checkpoint.model_checkpoint.write_model_files`, which every writer of a
    checkpoint goes through (training, averaging, conversion), so every new checkpoint carries both.
    """
    return {
        CONFIG_CHECKSUM_METADATA_KEY: model_config_sha256(config_values),
        TOKENIZER_CHECKSUM_METADATA_KEY: tokenizer_sha256s(tokenizer_files),
    }


def check_model_config(config_values: dict[str, Any], metadata: dict[str, str], model_file: Path) -> None:
    """Refuse a stored model config that is not the one the checkpoint was saved with.

    Parameters
    ----------
    config_values : dict of str to Any
        The config parsed from the metadata's ``model_config``.
    metadata : dict of str to str
        The weights file's metadata; ``model_config_sha256`` is checked when present.
    model_file : Path
        The weights file, named in the error.

    Returns
    -------
    None

    Raises
    ------
    CheckpointError
        Naming the file when the digest differs.

    Notes
    -----
    A config edited by hand in the file's header still builds a model when the shapes agree (``num_heads``,
    ``norm_first``, ``activation``, ``dropout``), which then computes something the weights were not trained
    for, with exit status 0.
    """
    expected = metadata.get(CONFIG_CHECKSUM_METADATA_KEY)
    if expected is not None and model_config_sha256(config_values) != expected:
        raise CheckpointError(
            f"{model_file}: the model config does not match the SHA-256 recorded when the checkpoint was saved; "
            "it was edited or damaged (restore the file from a copy, or use another checkpoint)"
        )


def check_tokenizer_files(directory: Path, metadata: dict[str, str] | None = None) -> None:
    """Refuse tokenizer files that are not the ones a checkpoint was saved with.

    Parameters
    ----------
    directory : Path
        A checkpoint directory.
    metadata : dict of str to str or None
        Its weights file's metadata, if already read; None reads it (a directory without ``model.safetensors``,
        such as a CTranslate2 export, has nothing to check against and passes).

    Returns
    -------
    None

    Raises
    ------
    CheckpointError
        Naming the tokenizer file and the checkpoint when a recorded file is missing or differs, or a
        tokenizer file is present that was not recorded.

    Notes
    -----
    With no recorded digests (checkpoints written before 2026-11-28), a training checkpoint's
    ``tokenizer.model`` is checked against the fingerprint in its ``trainer_state.json``, which only
    ``--resume`` used to compare; an older weights-only checkpoint has nothing to compare with and passes.
    Files are read whole; tokenizers are a few hundred kilobytes.
    """
    directory = Path(directory)
    model_file = directory / MODEL_FILE
    if metadata is None:
        if not model_file.is_file():
            return
        try:
            metadata = read_weights_metadata(model_file)
        except (OSError, KeyError, ValueError) as error:
            raise CheckpointError(f"{model_file}: not a readable checkpoint ({error})") from None
    recorded = _recorded_digests(metadata, directory)
    if recorded is None:
        _check_against_trainer_state(directory)
        return
    present = {name for name in TOKENIZER_FILE_NAMES if (directory / name).is_file()}
    for name in sorted(set(recorded) | present):
        path = directory / name
        if name not in recorded:
            raise CheckpointError(
                f"{path}: not part of checkpoint {directory} (its {MODEL_FILE} records the tokenizer files "
                f"{sorted(recorded)}); remove it"
            )
        if not path.is_file():
            raise CheckpointError(f"{path}: missing; checkpoint {directory} was saved with it")
        if _file_sha256(path) != recorded[name]:
            raise CheckpointError(
                f"{path}: not the tokenizer checkpoint {directory} was saved with (its SHA-256 differs from "
                f"the one recorded in {MODEL_FILE}); restore the original file"
            )


def _recorded_digests(metadata: dict[str, str], directory: Path) -> dict[str, str] | None:
    """Read the tokenizer digests recorded in a weights file's metadata; None when there are none."""
    text = metadata.get(TOKENIZER_CHECKSUM_METADATA_KEY)
    if text is None:
        return None
    try:
        digests = json.loads(text)
    except ValueError:
        digests = None
    if not isinstance(digests, dict) or not all(isinstance(value, str) for value in digests.values()):
        raise CheckpointError(
            f"{directory / MODEL_FILE}: malformed {TOKENIZER_CHECKSUM_METADATA_KEY} metadata"
        )
    return digests


def _check_against_trainer_state(directory: Path) -> None:
    """Compare an old training checkpoint's ``tokenizer.model`` with the fingerprint its trainer state holds."""
    state_file, tokenizer_file = directory / STATE_FILE, directory / TOKENIZER_FILE
    if not state_file.is_file() or not tokenizer_file.is_file():
        return
    try:
        fingerprint = json.loads(state_file.read_text(encoding="utf-8")).get("tokenizer_fingerprint")
    except (OSError, ValueError, AttributeError) as error:
        raise CheckpointError(f"{state_file}: unreadable training state ({error})") from None
    if fingerprint and _file_sha256(tokenizer_file) != fingerprint:
        raise CheckpointError(
            f"{tokenizer_file}: not the tokenizer checkpoint {directory} was trained with (its SHA-256 differs "
            f"from the fingerprint in {STATE_FILE}); restore the original file"
        )


def _file_sha256(path: Path) -> str:
    """Hash a file's bytes (hexadecimal SHA-256); an unreadable file is a CheckpointError naming it."""
    try:
        return sha256_of_file(path)
    except OSError as error:
        raise CheckpointError(f"{path}: cannot read it ({error.strerror})") from None
