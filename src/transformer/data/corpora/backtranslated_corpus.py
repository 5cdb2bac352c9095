"""A synthetic parallel corpus made by back-translation, written once and read beside the real one.

Back-translation (Sennrich et al. 2016) turns target-language monolingual text into training pairs: a
target-to-source model translates it, and each (machine source, human target) pair joins the real data.
``transformer backtranslate`` writes such a corpus as a folder::

    DIR/train.SRC            synthetic sources (the model's translations), one per line
    DIR/train.TGT            the monolingual target sentences they came from
    DIR/backtranslation.json what made it: checkpoint, input, search, counts

and a run reads it with ``data.backtranslated_dir: DIR``, optionally marking its sources with
``data.backtranslation_tag`` (tagged back-translation, Caswell et al. 2019) and repeating the real pairs
``data.real_upsample`` times (Edunov et al. 2018 up-sample the bitext when the synthetic data dominates).
"""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformer.atomic_files import staged_directory
from transformer.data.pipeline.text_files import read_parallel_files

#: The record of what wrote a back-translated corpus; a folder without it was not written by us.
BACKTRANSLATION_RECORD = "backtranslation.json"


def check_backtranslation_output(directory: Path) -> None:
    """Refuse an output folder that holds anything but an earlier back-translation.

    Parameters
    ----------
    directory : Path
        The ``--output`` of ``transformer backtranslate``.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming ``--output`` when it holds anything else.

    Notes
    -----
    The corpus replaces the folder as a whole, so it may only be missing, empty, or an earlier
    back-translation (it holds :data:`BACKTRANSLATION_RECORD` and only files). Anything else is refused:
    replacing what this command did not write could destroy a corpus.
    """
    if directory.is_file():
        raise ValueError(f"--output {directory}: is a file; expected a directory")
    if not directory.is_dir() or not any(directory.iterdir()):
        return
    entries = list(directory.iterdir())
    if (directory / BACKTRANSLATION_RECORD).is_file() and all(entry.is_file() for entry in entries):
        return
    raise ValueError(
        f"--output {directory}: exists and does not hold an earlier back-translation "
        f"({BACKTRANSLATION_RECORD}); choose a new directory"
    )


def write_backtranslated_corpus(
    directory: Path,
    sources: Sequence[str],
    targets: Sequence[str],
    languages: tuple[str, str],
    record: dict[str, Any],
) -> int:
    """Write the synthetic pairs, leaving out those whose translation is empty, and the record.

    Parameters
    ----------
    directory : Path
        The corpus folder, replaced as a whole (check it with :func:`check_backtranslation_output`).
    sources : sequence of str
        The synthetic sources (translations), one per target sentence.
    targets : sequence of str
        The monolingual target sentences.
    languages : (str, str)
        Source and target language suffixes, e.g. ("en", "de").
    record : dict
        What made the corpus; ``pairs`` and ``dropped`` are added.

    Returns
    -------
    int
        The number of pairs written.

    Notes
    -----
    A pair with an empty side (an empty input line, or a sentence the model found no translation for) is
    dropped and counted: an empty source would teach the model to hallucinate. The folder is staged and
    renamed (:func:`~transformer.atomic_files.staged_directory`), so an interrupted run leaves the old
    corpus or none, never half of one.
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} synthetic sources for {len(targets)} target sentences")
    pairs = [(source, target) for source, target in zip(sources, targets, strict=True) if source and target]
    source_lang, target_lang = languages
    with staged_directory(directory) as staging:
        for suffix, side in ((source_lang, 0), (target_lang, 1)):
            text = "".join(pair[side] + "\n" for pair in pairs)
            (staging / f"train.{suffix}").write_text(text, encoding="utf-8")
        full_record = {**record, "pairs": len(pairs), "dropped": len(targets) - len(pairs)}
        (staging / BACKTRANSLATION_RECORD).write_text(json.dumps(full_record, indent=1), encoding="utf-8")
    return len(pairs)


def read_backtranslated_pairs(
    directory: Path, languages: tuple[str, str], tag: str | None
) -> list[tuple[str, str]]:
    """Read a back-translated corpus, with its sources tagged if asked.

    Parameters
    ----------
    directory : Path
        A folder written by ``transformer backtranslate``.
    languages : (str, str)
        The run's ``data.source_lang`` and ``data.target_lang``.
    tag : str or None
        Put before every synthetic source, separated by a space (e.g. "<BT>"); None adds nothing.

    Returns
    -------
    list of (str, str)
        The synthetic pairs.

    Raises
    ------
    CorpusError
        From :func:`~transformer.data.pipeline.text_files.read_parallel_files`, naming the file when a side is missing or
        the line counts differ.

    Notes
    -----
    The corpus is read like any other parallel text, by :func:`~transformer.data.pipeline.text_files.read_parallel_files`,
    so its errors name the file just the same.
    """
    source_lang, target_lang = languages
    pairs = read_parallel_files(directory / f"train.{source_lang}", directory / f"train.{target_lang}")
    if tag is None:
        return pairs
    return [(f"{tag} {source}", target) for source, target in pairs]
