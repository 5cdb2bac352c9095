"""What a checkpoint directory holds, and which checkpoint a run directory or a ``checkpoints`` folder means."""

import json
from pathlib import Path
from typing import Any

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
NON_TOKENIZER_FILES = {MODEL_FILE, OPTIMIZER_FILE, STATE_FILE, AVERAGED_FROM_FILE}


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
