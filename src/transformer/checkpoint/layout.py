"""What a checkpoint directory holds, and which checkpoint a run directory or a ``checkpoints`` folder means."""

import json
from pathlib import Path
from typing import Any

from transformer.data.shortlist import SHORTLIST_FILE

FORMAT = "transformer-checkpoint-v1"
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
TOKENIZER_FILE = "tokenizer.model"
INDEX_FILE = "index.json"
AVERAGED_FROM_FILE = "averaged_from.json"
#: Key of the weights-file metadata that holds a weights-only checkpoint's search settings (JSON).
DECODE_METADATA_KEY = "decode_config"
#: Key of the weights-file metadata that holds the SHA-256 of the weights
#: (:func:`transformer.checkpoint.weights.weights_sha256`); checkpoints written before 2026-11-26 lack it and
#: load unverified.
CHECKSUM_METADATA_KEY = "weights_sha256"
#: Key of the weights-file metadata that holds the SHA-256 of the model config in canonical JSON
#: (:func:`transformer.checkpoint.integrity.model_config_sha256`); absent before 2026-11-28.
CONFIG_CHECKSUM_METADATA_KEY = "model_config_sha256"
#: Key of the weights-file metadata that holds a JSON object of tokenizer file name to SHA-256
#: (:func:`transformer.checkpoint.integrity.tokenizer_sha256s`); absent before 2026-11-28.
TOKENIZER_CHECKSUM_METADATA_KEY = "tokenizer_sha256"
#: The keys of ``index.json`` that name one checkpoint (a string, or null before the first save).
INDEX_NAME_KEYS = ("latest", "best")
#: Files of a checkpoint directory that are not its tokenizer's: the vocabulary shortlist is one, so it is
#: neither recorded as a tokenizer file nor copied by averaging and conversion.
NON_TOKENIZER_FILES = {MODEL_FILE, OPTIMIZER_FILE, STATE_FILE, AVERAGED_FROM_FILE, SHORTLIST_FILE}


class CheckpointError(ValueError):
    """A checkpoint is missing, malformed or does not match what it is loaded into.

    Notes
    -----
    A ``ValueError``, so the command line reports it as one line naming the checkpoint, like any bad input.
    """


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
        (naming that checkpoint), an index of the wrong shape or naming a directory outside its folder
        (:func:`read_index`), or a directory with neither weights nor an index.

    Notes
    -----
    A run resolves to its best checkpoint by validation loss, else its latest (the best is what one wants
    to translate with, and the manager never deletes it). The index is checked by :func:`read_index` (its
    shape, and names that stay inside its folder) and then trusted: if the directory it names has lost its
    weights, that is an error rather than a fall-back to another checkpoint. A file
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
    """Read ``index.json`` of a checkpoints directory, refusing one of the wrong shape or naming outside it.

    Parameters
    ----------
    checkpoint_dir : Path
        The directory holding the checkpoints.

    Returns
    -------
    dict
        ``{"latest": name or None, "best": name or None, "checkpoints": [names, oldest first]}``; empty values
        when the file does not exist yet, or lacks a key.

    Raises
    ------
    CheckpointError
        In one line naming ``index.json`` (and the key at fault): for a file that cannot be read or is not
        JSON, for anything but an object, a ``latest`` or ``best`` that is not a string or null, a
        ``checkpoints`` that is not a list of strings, and a name that leads outside ``checkpoint_dir`` (a
        path with ``/`` or ``..``, or a link to a directory elsewhere).

    Notes
    -----
    Written atomically by :class:`transformer.training.checkpoint.CheckpointManager`; read here because a run
    directory resolves to the checkpoint its index names best. Every reader (translating, averaging,
    resuming, the experiments) comes through here, so an index edited into ``[]`` or ``{"best": 5}`` is
    refused in words rather than failing as a ``TypeError`` deeper down, and one naming ``../other-run/...``
    can never make a command load a model from outside the run it was given.
    """
    index_path = checkpoint_dir / INDEX_FILE
    if not index_path.exists():
        return {"latest": None, "best": None, "checkpoints": []}
    try:
        values = json.loads(index_path.read_text(encoding="utf-8"))
    except OSError as error:
        raise CheckpointError(f"{index_path}: cannot read it ({error.strerror})") from None
    except ValueError as error:
        raise CheckpointError(f"{index_path}: not valid JSON ({error})") from None
    if not isinstance(values, dict):
        raise CheckpointError(
            f'{index_path}: expected a JSON object with "latest", "best" and "checkpoints", got '
            f"{_json_text(values)}"
        )
    for key in INDEX_NAME_KEYS:
        if values.get(key) is not None:
            _check_index_name(values[key], key, index_path)
    names = values.get("checkpoints", [])
    if not isinstance(names, list):
        raise CheckpointError(
            f'{index_path}: "checkpoints" must be a list of checkpoint names, got {_json_text(names)}'
        )
    for position, name in enumerate(names):
        _check_index_name(name, f"checkpoints[{position}]", index_path)
    return {**values, "latest": values.get("latest"), "best": values.get("best"), "checkpoints": names}


def _check_index_name(name: Any, key: str, index_path: Path) -> None:
    """Refuse an index entry that is not the name of a directory inside the index's own folder."""
    if not isinstance(name, str) or not name:
        raise CheckpointError(
            f'{index_path}: "{key}" must be a checkpoint name or null, got {_json_text(name)}'
        )
    folder = index_path.parent
    if name in (".", "..") or Path(name).name != name:
        raise CheckpointError(
            f'{index_path}: "{key}" names {name!r}, which is outside {folder}; an index names only the '
            "checkpoints in its own folder"
        )
    try:
        target = (folder / name).resolve()
        inside = target.parent == folder.resolve()
    except (OSError, RuntimeError):  # a loop of links
        target, inside = folder / name, False
    if not inside:
        raise CheckpointError(
            f'{index_path}: "{key}" names {name!r}, a link to {target}, outside {folder}; an index names only '
            "the checkpoints in its own folder"
        )


def _json_text(value: Any) -> str:
    """Write a value as JSON text, cut to 60 characters, for an error message."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
