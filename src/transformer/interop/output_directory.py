"""Write a converted model into a directory all at once, replacing only what ``transformer convert`` wrote.

An export (``--to hf-marian``, ``--to ctranslate2``, ``--to onnx``) ends with :data:`CONVERSION_RECORD`, which names its kind
and every file it wrote; a later export of the same kind may replace a directory holding exactly those. An
import (``--from hf-marian``) writes a checkpoint, where every file beside the weights is read as a tokenizer
file, so it carries no record: the names it writes are its mark (:func:`holds_earlier_import`). Anything else
in the way is refused, naming the directory: a file that merely shares a name with one of ours (a training
checkpoint's ``model.safetensors``, a user's ``config.json`` or ``model.bin``) no longer makes it replaceable.
"""

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from transformer import atomic_files
from transformer.checkpoint.layout import MODEL_FILE
from transformer.data.pipeline.marian_tokenizer import OPTIONAL_FILES, REQUIRED_FILES

#: The record every export writes last: ``{"format", "checkpoint", "files"}``.
CONVERSION_RECORD = "converted_from.json"
#: Each output kind, as the messages name it.
KIND_NAMES = {
    "hf-marian": "HuggingFace Marian export",
    "ctranslate2": "CTranslate2 export",
    "onnx": "ONNX export",
    "checkpoint": "imported checkpoint",
}
#: Every name an import (``convert --from hf-marian``) may write: the weights and the Marian tokenizer's files.
IMPORT_FILES = frozenset({MODEL_FILE, *REQUIRED_FILES, *OPTIONAL_FILES})
#: How many foreign names a refusal lists before "and N more".
_NAMES_SHOWN = 3


def check_replaceable(destination: Path, kind: str, option: str) -> None:
    """Refuse to replace a directory that holds anything but an earlier conversion of the same kind.

    Parameters
    ----------
    destination : Path
        Where the converted model will go.
    kind : {"hf-marian", "ctranslate2", "onnx", "checkpoint"}
        What will be written there: an export's format, or an imported checkpoint.
    option : str
        The argument that named it, for the message (``"OUTPUT_DIR"``, ``"--to"``).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the option and the directory when it is no directory, or holds anything else (with the first
        names that would be deleted).

    Notes
    -----
    A missing or empty directory is fine; so is an earlier conversion of the same kind, which is replaced as a
    whole. A symbolic link counts as its target (the target is replaced, the link kept). Checked before any
    model is read, so a mistyped path costs nothing and deletes nothing.
    """
    destination = Path(destination)
    if destination.exists() and not destination.is_dir():
        raise ValueError(f"{option} {destination}: is not a directory; the output must be a directory")
    if not destination.is_dir() or not any(destination.iterdir()):
        return
    foreign = _foreign_entries(destination, kind)
    if foreign:
        shown = ", ".join(foreign[:_NAMES_SHOWN])
        more = f" and {len(foreign) - _NAMES_SHOWN} more" if len(foreign) > _NAMES_SHOWN else ""
        raise ValueError(
            f"{option} {destination}: not an earlier {KIND_NAMES[kind]}; replacing it would delete "
            f"{shown}{more} (choose a new or empty directory)"
        )


def _foreign_entries(directory: Path, kind: str) -> list[str]:
    """Name the entries of a non-empty directory that an earlier conversion of ``kind`` did not write."""
    entries = sorted(directory.iterdir())
    if kind == "checkpoint":
        written = set(IMPORT_FILES) if holds_earlier_import(directory) else set()
    else:
        record = read_conversion_record(directory)
        written = (
            {CONVERSION_RECORD, *record.files} if record is not None and record.format == kind else set()
        )
    return [
        f"{entry.name}/" if entry.is_dir() else entry.name for entry in entries if entry.name not in written
    ]


def holds_earlier_import(directory: Path) -> bool:
    """Whether a directory looks exactly like a checkpoint ``convert --from hf-marian`` wrote.

    Parameters
    ----------
    directory : Path
        An existing directory.

    Returns
    -------
    bool
        True when it holds only files: ``model.safetensors`` and the Marian tokenizer's (``source.spm``,
        ``target.spm``, ``vocab.json``, maybe ``target_vocab.json`` and ``tokenizer_config.json``).

    Notes
    -----
    A checkpoint reads every file beside its weights as a tokenizer file (and refuses one it did not record),
    so an import cannot carry a record of its own; its set of names is distinctive instead: a training
    checkpoint has ``trainer_state.json`` and ``tokenizer.model``, an average ``averaged_from.json``, a
    HuggingFace model ``config.json``.
    """
    entries = list(directory.iterdir())
    names = {entry.name for entry in entries}
    return (
        all(entry.is_file() for entry in entries)
        and {MODEL_FILE, *REQUIRED_FILES} <= names
        and names <= IMPORT_FILES
    )


@dataclass(frozen=True)
class ConversionRecord:
    """What an export wrote, as its :data:`CONVERSION_RECORD` says.

    Parameters
    ----------
    format : str
        The export's kind: "hf-marian", "ctranslate2" or "onnx".
    checkpoint : str
        The checkpoint it was made from.
    files : tuple of str
        Every file it wrote beside the record.

    Notes
    -----
    Read back before an export replaces a directory: only the files listed may go with it.
    """

    format: str
    checkpoint: str
    files: tuple[str, ...]


def read_conversion_record(directory: Path) -> ConversionRecord | None:
    """Read the record an export left in its directory.

    Parameters
    ----------
    directory : Path
        An existing directory.

    Returns
    -------
    ConversionRecord or None
        None when there is none, or it is not such a record (damaged, or a file of that name the user wrote).

    Notes
    -----
    A record that does not parse as one is treated as absent, so the directory is refused rather than
    replaced on the strength of a file we cannot read.
    """
    try:
        values = json.loads((directory / CONVERSION_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(values, dict):
        return None
    kind, checkpoint, files = values.get("format"), values.get("checkpoint"), values.get("files")
    if not (
        isinstance(kind, str)
        and isinstance(checkpoint, str)
        and isinstance(files, list)
        and all(isinstance(name, str) for name in files)
    ):
        return None
    return ConversionRecord(kind, checkpoint, tuple(files))


@contextmanager
def staged_directory(destination: Path, kind: str, checkpoint: Path) -> Iterator[Path]:
    """Give a hidden temporary directory to fill with an export, then record it and move it to ``destination``.

    Parameters
    ----------
    destination : Path
        The final directory; replaced if it holds an earlier export of this kind (:func:`check_replaceable`).
    kind : {"hf-marian", "ctranslate2", "onnx"}
        The export's format.
    checkpoint : Path
        The checkpoint exported, kept in the record.

    Returns
    -------
    Iterator[Path]
        A context manager yielding the temporary sibling directory.

    Notes
    -----
    When the block succeeds, :data:`CONVERSION_RECORD` is written beside the files, listing them all, so a
    later export replaces this directory only while it holds nothing else. On an exception the temporary
    directory is removed and ``destination`` is left as it was; readers see either the old directory or the
    complete new one.
    """
    destination = Path(destination)
    check_replaceable(destination, kind, "OUTPUT_DIR")
    with atomic_files.staged_directory(destination) as temporary:
        yield temporary
        _write_conversion_record(
            temporary, kind, checkpoint, sorted(path.name for path in temporary.iterdir())
        )


def _write_conversion_record(directory: Path, kind: str, checkpoint: Path, files: Sequence[str]) -> None:
    """Write the export's record: its format, the checkpoint it came from and the files it wrote."""
    record = {"format": kind, "checkpoint": str(checkpoint), "files": list(files)}
    (directory / CONVERSION_RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
