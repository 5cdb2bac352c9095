"""A checkpoint's vocabulary shortlist: built from its run's training pairs, stored and read beside its weights.

``transformer shortlist --checkpoint DIR`` calls :func:`build_checkpoint_shortlist`; ``--shortlist`` on
``translate``, ``evaluate`` and ``serve`` (and ``Translator.from_checkpoint(..., shortlist=True)``) calls
:func:`load_checkpoint_shortlist`, which refuses a file built for another vocabulary, naming both.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from transformer.checkpoint.layout import STATE_FILE, resolve_checkpoint
from transformer.checkpoint.model_checkpoint import load_checkpoint, load_checkpoint_tokenizer
from transformer.config.experiment import experiment_from_dict
from transformer.data.pipeline.text_files import iter_parallel_lines
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.data.prepare import corpus_files
from transformer.data.shortlist import (
    SHORTLIST_FILE,
    Shortlist,
    ShortlistError,
    build_shortlist,
    check_shortlist_destination,
    load_shortlist,
    save_shortlist,
    vocabulary_fingerprint,
)

#: Candidates per source piece by default (``transformer shortlist --per-source``): Marian's and
#: CTranslate2's published shortlists keep 50 to 100.
DEFAULT_PER_SOURCE = 50
#: Most frequent target pieces every sentence may use by default (``--frequent``).
DEFAULT_FREQUENT = 100


@dataclass(frozen=True)
class ShortlistBuild:
    """What :func:`build_checkpoint_shortlist` wrote.

    Parameters
    ----------
    path : Path
        The shortlist file.
    pairs : int
        Sentence pairs counted.
    source_file, target_file : Path
        The training files read.
    shortlist : Shortlist
        The table written.

    Notes
    -----
    The command prints one line from it.
    """

    path: Path
    pairs: int
    source_file: Path
    target_file: Path
    shortlist: Shortlist


def training_files(checkpoint_dir: Path) -> tuple[Path, Path]:
    """Find the source and target training files of the run a checkpoint belongs to.

    Parameters
    ----------
    checkpoint_dir : Path
        A training checkpoint (``RUN/checkpoints/NAME``), holding ``trainer_state.json``.

    Returns
    -------
    (Path, Path)
        The run's training split: the built-in corpus in ``RUN/data`` (regenerated if missing), a
        ``directory`` corpus's files, or a known corpus from its cache (downloaded if missing).

    Raises
    ------
    ShortlistError
        For a checkpoint without a readable trainer state (an averaged or converted one): pass the files.

    Notes
    -----
    Read from the experiment config the trainer stored in the checkpoint, so the shortlist counts the very
    pairs the model learned from (without back-translated pairs, whose sources are machine output).
    """
    state_file = checkpoint_dir / STATE_FILE
    try:
        experiment = json.loads(state_file.read_text(encoding="utf-8"))["experiment"]
        data = experiment_from_dict(experiment, str(state_file)).data
    except (OSError, ValueError, KeyError, TypeError):
        raise ShortlistError(
            f"{checkpoint_dir}: no readable {STATE_FILE} naming the run's training data; pass the training "
            f"pairs with --source and --target"
        ) from None
    return corpus_files(data, checkpoint_dir.parent.parent)["train"]


def build_checkpoint_shortlist(
    checkpoint: Path,
    source_file: Path | None = None,
    target_file: Path | None = None,
    per_source: int = DEFAULT_PER_SOURCE,
    frequent: int = DEFAULT_FREQUENT,
    output: Path | None = None,
) -> ShortlistBuild:
    """Build a checkpoint's shortlist from training pairs and store it beside its weights.

    Parameters
    ----------
    checkpoint : Path
        A checkpoint or run directory (a run means its best checkpoint).
    source_file, target_file : Path or None
        Line-aligned training pairs; None reads the run's own training split (:func:`training_files`).
    per_source : int
        Candidates per source piece.
    frequent : int
        Most frequent target pieces every sentence may use.
    output : Path or None
        Where to write; None writes ``CHECKPOINT/shortlist.safetensors``.

    Returns
    -------
    ShortlistBuild
        The file written and what it counted.

    Raises
    ------
    ShortlistError
        When ``output`` exists and is not a shortlist file, or the run's data cannot be found.
    ValueError
        For only one of ``source_file`` and ``target_file``, or files of different lengths (naming them).

    Notes
    -----
    The pairs are encoded with the checkpoint's own tokenizer (source side with ``encode``, target with
    ``encode_target``), so the ids are the model's; the vocabulary's fingerprint is stored with the table.
    """
    checkpoint_dir = resolve_checkpoint(checkpoint)
    if (source_file is None) != (target_file is None):
        raise ValueError("--source and --target go together: pass both training files, or neither")
    path = output if output is not None else checkpoint_dir / SHORTLIST_FILE
    check_shortlist_destination(path)  # before reading a corpus, and before a missing one is regenerated
    config = load_checkpoint(checkpoint_dir).model_config
    tokenizer = load_checkpoint_tokenizer(checkpoint_dir)
    if source_file is None or target_file is None:
        source_file, target_file = training_files(checkpoint_dir)
    count = 0

    def encoded_pairs() -> Iterator[tuple[list[int], list[int]]]:
        nonlocal count
        for source, target in iter_parallel_lines(source_file, target_file):
            count += 1
            yield tokenizer.encode(source), tokenizer.encode_target(target)

    shortlist = build_shortlist(
        encoded_pairs(),
        config.src_vocab_size,
        config.tgt_vocab_size,
        sorted({config.pad_id, config.bos_id, config.eos_id, config.unk_id}),
        vocabulary_fingerprint(tokenizer, config.src_vocab_size),
        per_source,
        frequent,
    )
    save_shortlist(shortlist, path)
    return ShortlistBuild(path, count, source_file, target_file, shortlist)


def load_checkpoint_shortlist(checkpoint: Path, path: Path | None = None) -> Shortlist:
    """Read the shortlist of a checkpoint, refusing one built for another vocabulary.

    Parameters
    ----------
    checkpoint : Path
        A checkpoint or run directory.
    path : Path or None
        The shortlist file; None reads ``CHECKPOINT/shortlist.safetensors``.

    Returns
    -------
    Shortlist
        The table.

    Raises
    ------
    ShortlistError
        One line naming the file: missing, damaged, or ``built for vocabulary X, the checkpoint's is Y``.

    Notes
    -----
    The fingerprint is recomputed from the checkpoint's tokenizer, so a shortlist copied from another run
    with a vocabulary of the same size is refused too.
    """
    checkpoint_dir = resolve_checkpoint(checkpoint)
    config = load_checkpoint(checkpoint_dir).model_config
    tokenizer = load_checkpoint_tokenizer(checkpoint_dir)
    return shortlist_for_tokenizer(checkpoint_dir, tokenizer, config.src_vocab_size, path)


def shortlist_for_tokenizer(
    checkpoint_dir: Path, tokenizer: TextTokenizer, src_vocab_size: int, path: Path | None = None
) -> Shortlist:
    """Read a checkpoint's shortlist given its already loaded tokenizer.

    Parameters
    ----------
    checkpoint_dir : Path
        The checkpoint directory (resolved).
    tokenizer : TextTokenizer
        Its tokenizer.
    src_vocab_size : int
        Its model's source vocabulary size.
    path : Path or None
        The shortlist file; None reads ``checkpoint_dir/shortlist.safetensors``.

    Returns
    -------
    Shortlist
        The table.

    Raises
    ------
    ShortlistError
        As :func:`load_checkpoint_shortlist`.

    Notes
    -----
    For :meth:`~transformer.decoding.translator.Translator.from_checkpoint`, which has loaded the checkpoint
    already and should not read its weights twice.
    """
    expected = vocabulary_fingerprint(tokenizer, src_vocab_size)
    return load_shortlist(path if path is not None else checkpoint_dir / SHORTLIST_FILE, expected)
