"""What a distillation run distils, as a JSON record that a resumed run must match."""

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformer.checkpoint.layout import MODEL_FILE, resolve_checkpoint
from transformer.checkpoint.model_checkpoint import decode_settings
from transformer.config.experiment import ExperimentConfig
from transformer.data.pipeline.file_digests import sha256_of_file
from transformer.data.prepare import TOKENIZER_FILE
from transformer.distillation.run_state import JUDGING_SETTINGS

#: The parts of the identity the teacher's pass depends on (and ``--reuse-teacher-pass`` compares).
TEACHER_PASS_KEYS = ("teachers", "sources", "teacher_pass")


def distill_identity(
    teachers: Sequence[Path], experiment: ExperimentConfig, source_file: Path
) -> dict[str, Any]:
    """Describe a distillation by its inputs: teachers, training sources and the student's config.

    Parameters
    ----------
    teachers : sequence of Path
        Checkpoint or run directories (a run means its best checkpoint).
    experiment : ExperimentConfig
        The student's config.
    source_file : Path
        The training sources the teacher translates.

    Returns
    -------
    dict of str to Any
        ``teachers`` (SHA-256 of their weights and vocabulary files), ``sources`` (the file's SHA-256),
        ``teacher_pass`` (the ``distill`` settings of the pass and the first teacher's own search) and
        ``student`` (the config without the settings only the judging stages read).

    Raises
    ------
    CheckpointError
        For a teacher that is not a checkpoint or run directory.

    Notes
    -----
    Returned as JSON reads it back (tuples as lists), so it compares equal to the record it was written
    to. Teachers and sources by content, not by path: a moved teacher folder is the same teacher, and the
    built-in corpus is generated into each run's folder, where two folders' copies are the same sources;
    a teacher run that went on training, or a corpus file replaced in place, keeps its path but not its
    contents, and a resumed run must not mix the two.
    """
    resolved = [resolve_checkpoint(Path(teacher)) for teacher in teachers]
    settings = experiment.distill
    student = experiment.to_dict()
    student["distill"] = {
        key: value for key, value in student["distill"].items() if key not in JUDGING_SETTINGS
    }
    identity = {
        "teachers": [
            {
                "weights_sha256": sha256_of_file(path / MODEL_FILE),
                "tokenizer_sha256": (
                    sha256_of_file(path / TOKENIZER_FILE) if (path / TOKENIZER_FILE).is_file() else None
                ),
            }
            for path in resolved
        ],
        "sources": {"sha256": sha256_of_file(source_file)},
        "teacher_pass": {
            "beam_size": settings.teacher_beam_size,
            "precision": settings.teacher_precision,
            "threads": settings.teacher_threads,
            "chunk_lines": settings.chunk_lines,
            "device": experiment.train.device,
            "teacher_search": teacher_search(resolved[0]),
        },
        "student": student,
    }
    return json.loads(json.dumps(identity))  # as the record reads back: tuples become lists


def teacher_pass_identity(identity: dict[str, Any]) -> dict[str, Any]:
    """Keep the part of an identity the teacher's pass depends on.

    Parameters
    ----------
    identity : dict of str to Any
        From :func:`distill_identity` (or another run's record).

    Returns
    -------
    dict of str to Any
        Only :data:`TEACHER_PASS_KEYS`.

    Notes
    -----
    Two runs with equal pass identities translate the same sources with the same teachers and search, so
    one's translations serve the other (students of a sweep share one pass).
    """
    return {key: identity.get(key) for key in TEACHER_PASS_KEYS}


def judging_settings(experiment: ExperimentConfig) -> dict[str, Any]:
    """Pick the ``distill`` settings only the stages after training read.

    Parameters
    ----------
    experiment : ExperimentConfig
        The student's config.

    Returns
    -------
    dict of str to Any
        :data:`~transformer.distillation.run_state.JUDGING_SETTINGS` and their values.

    Notes
    -----
    Stored with the judging stages' records, so changing one reruns them and keeps the trained student.
    """
    values = dataclasses.asdict(experiment.distill)
    return {key: values[key] for key in JUDGING_SETTINGS}


def teacher_search(checkpoint: Path) -> dict[str, Any] | None:
    """Return the search settings a teacher checkpoint carries (its run's ``decode`` section).

    Parameters
    ----------
    checkpoint : Path
        A resolved checkpoint directory.

    Returns
    -------
    dict of str to Any or None
        The settings as JSON values; None for a checkpoint without them (the paper's are used).

    Notes
    -----
    Part of the pass's identity: with ``distill.teacher_beam_size`` null the pass searches as the teacher's
    run did, so a checkpoint whose beam or length penalty changed translates differently.
    """
    search = decode_settings(checkpoint)
    return dataclasses.asdict(search) if search is not None else None
