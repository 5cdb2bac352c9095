"""The student's corpus: the training sources with the teacher's translations, beside the real held-out splits.

Written as a ``directory`` corpus (``{train,valid,test}.{lang}``), so the student trains through the ordinary
data pipeline: ``data.corpus=directory`` and ``data.data_dir`` pointing here. The validation and test splits are
the original ones, copied byte for byte, so the student is validated and scored against human references.
"""

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from transformer.atomic_files import staged_directory
from transformer.data.pipeline.text_files import iter_parallel_lines

#: What the corpus folder records of how it was made.
CORPUS_RECORD = "distilled_corpus.json"


@dataclass(frozen=True)
class DistilledCorpus:
    """What :func:`write_distilled_corpus` wrote.

    Parameters
    ----------
    directory : Path
        The corpus folder.
    teacher_pairs : int
        Pairs of a training source and the teacher's translation.
    original_pairs : int
        Original training pairs added beside them (``distill.mix_original``; else 0).
    dropped : int
        Sources whose translation was empty, left out.

    Notes
    -----
    The same numbers are in the folder's :data:`CORPUS_RECORD`, which resuming reads back.
    """

    directory: Path
    teacher_pairs: int
    original_pairs: int
    dropped: int


def write_distilled_corpus(
    directory: Path,
    split_files: dict[str, tuple[Path, Path]],
    translations: list[str],
    languages: tuple[str, str],
    mix_original: bool,
) -> DistilledCorpus:
    """Write the student's training pairs and copy the held-out splits, as one folder published at once.

    Parameters
    ----------
    directory : Path
        The folder to write (replaced as a whole; the caller owns it).
    split_files : dict of str to (Path, Path)
        The original corpus's files per split; "train" is required, "valid" and "test" are copied if there.
    translations : list of str
        The teacher's translation of every training source, in order.
    languages : (str, str)
        Source and target suffixes of the files, e.g. ("en", "de").
    mix_original : bool
        Also write the original training pairs (after the teacher's).

    Returns
    -------
    DistilledCorpus
        The folder and its counts.

    Raises
    ------
    ValueError
        When the number of translations differs from the training sources' (naming the source file).
    CorpusError
        When an original file is unreadable or the two sides are not line-aligned.

    Notes
    -----
    Written in a hidden sibling and renamed into place (:func:`~transformer.atomic_files.staged_directory`),
    so a kill leaves the old folder or the new one, never half of one. A copied split keeps its name, with
    ``.gz`` when the original was gzipped (the ``directory`` corpus reads both).
    """
    source_lang, target_lang = languages
    train_source, train_target = split_files["train"]
    teacher_pairs = original_pairs = dropped = 0
    with staged_directory(directory) as staging:
        with (
            (staging / f"train.{source_lang}").open("w", encoding="utf-8", newline="\n") as sources_out,
            (staging / f"train.{target_lang}").open("w", encoding="utf-8", newline="\n") as targets_out,
        ):
            originals = list(iter_parallel_lines(train_source, train_target))
            if len(originals) != len(translations):
                raise ValueError(
                    f"{train_source}: {len(originals)} training sources, but the teacher's pass holds "
                    f"{len(translations)} translations"
                )
            for (source, _), translation in zip(originals, translations, strict=True):
                if not source or not translation:
                    dropped += 1
                    continue
                sources_out.write(source + "\n")
                targets_out.write(translation + "\n")
                teacher_pairs += 1
            if mix_original:
                for source, target in originals:
                    if source and target:
                        sources_out.write(source + "\n")
                        targets_out.write(target + "\n")
                        original_pairs += 1
        for split in ("valid", "test"):
            for original in split_files.get(split, ()):
                suffix = ".gz" if original.name.endswith(".gz") else ""
                language = source_lang if original == split_files[split][0] else target_lang
                shutil.copyfile(original, staging / f"{split}.{language}{suffix}")
        record = {"teacher_pairs": teacher_pairs, "original_pairs": original_pairs, "dropped": dropped}
        (staging / CORPUS_RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return DistilledCorpus(directory, teacher_pairs, original_pairs, dropped)
