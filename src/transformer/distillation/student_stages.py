"""The student's stages of a distillation: train it on the distilled corpus, average, shortlist and judge it."""

import dataclasses
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from transformer.averaging import select_last_checkpoints, write_average
from transformer.checkpoint.layout import resolve_checkpoint
from transformer.checkpoint.model_checkpoint import load_checkpoint_tokenizer
from transformer.config.data import DataConfig
from transformer.config.experiment import ExperimentConfig
from transformer.data.pipeline.text_files import read_lines
from transformer.data.prepare import TOKENIZER_FILE, corpus_files
from transformer.decoding.checkpoint_shortlist import build_checkpoint_shortlist
from transformer.decoding.translation_progress import TranslationProgress
from transformer.decoding.translator import Translator
from transformer.device import bf16_unsupported_reason
from transformer.distillation.identity import judging_settings
from transformer.distillation.judging import JudgedModel, judge, judged_model_from_record
from transformer.distillation.run_state import DistillState
from transformer.distillation.teacher_pass import teacher_translator
from transformer.training.distributed import DistributedContext, broadcast_from_main
from transformer.training.launch import claim_run_dir_if_main, train_experiment

CORPUS_DIR = "corpus"
STUDENT_DIR = "student"
#: The shipped student: the average of the student run's last checkpoints, inside its run directory.
AVERAGED_DIR = "averaged"


def student_experiment(experiment: ExperimentConfig, output_dir: Path, vocab_size: int) -> ExperimentConfig:
    """Make the student's config as it trains: on the distilled corpus, with the teacher's vocabulary size.

    Parameters
    ----------
    experiment : ExperimentConfig
        The student's config as given (its ``data`` names the original corpus).
    output_dir : Path
        The distill run's folder (its ``corpus/`` is the distilled corpus).
    vocab_size : int
        The teacher's vocabulary size.

    Returns
    -------
    ExperimentConfig
        ``data`` reading ``corpus/`` as a ``directory`` corpus, ``model.vocab_size`` the teacher's.

    Raises
    ------
    ValueError
        When the student's model asks for a separate target vocabulary (the teacher's is joint).

    Notes
    -----
    Length filtering, languages and the rest of ``data`` are kept; only where the text comes from changes.
    """
    model = experiment.model
    if getattr(model, "target_vocab_size", None) not in (None, vocab_size):
        raise ValueError(
            f"model.target_vocab_size={model.target_vocab_size}: a student shares the teacher's joint "
            f"vocabulary of {vocab_size} pieces; drop target_vocab_size"
        )
    data = distilled_data(experiment, output_dir)
    return dataclasses.replace(experiment, data=data, model=dataclasses.replace(model, vocab_size=vocab_size))


def distilled_data(experiment: ExperimentConfig, output_dir: Path) -> DataConfig:
    """Make the ``data`` section that reads the distilled corpus instead of the original one.

    Parameters
    ----------
    experiment : ExperimentConfig
        The student's config as given.
    output_dir : Path
        The distill run's folder.

    Returns
    -------
    DataConfig
        ``corpus="directory"`` with ``data_dir`` the run's ``corpus/``; languages, length filter and the rest
        kept.

    Notes
    -----
    The student trains on it and is judged on its validation split, the original one copied there.
    """
    return dataclasses.replace(
        experiment.data, corpus="directory", data_dir=str(output_dir / CORPUS_DIR), mirror=None
    )


def teacher_vocabulary(teacher: Path) -> tuple[Path, int]:
    """Find the teacher's joint vocabulary file and its size.

    Parameters
    ----------
    teacher : Path
        The first teacher's checkpoint or run directory.

    Returns
    -------
    (Path, int)
        Its ``tokenizer.model`` and the number of pieces.

    Raises
    ------
    ValueError
        Naming ``--teacher`` when it has no ``tokenizer.model`` (a converted Marian model's two
        vocabularies).

    Notes
    -----
    A student shares its teacher's vocabulary, which is what lets the student's shortlist and the teacher's
    outputs line up piece for piece; a teacher with separate source and target vocabularies cannot give one.
    """
    checkpoint = resolve_checkpoint(teacher)
    source = checkpoint / TOKENIZER_FILE
    if not source.is_file():
        raise ValueError(
            f"--teacher {teacher}: no {TOKENIZER_FILE} (a converted model with separate vocabularies?); "
            "distill needs a teacher trained by this project, whose joint vocabulary the student shares"
        )
    return source, load_checkpoint_tokenizer(checkpoint).vocab_size


def check_student_request(
    experiment: ExperimentConfig, teacher: Path, output_dir: Path, split_files: dict[str, tuple[Path, Path]]
) -> None:
    """Refuse, before the teacher's pass, what would otherwise fail after it or after training.

    Parameters
    ----------
    experiment : ExperimentConfig
        The student's config.
    teacher : Path
        The first teacher.
    output_dir : Path
        The distill run's folder.
    split_files : dict of str to (Path, Path)
        The corpus's files per split.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For a teacher without a joint vocabulary, a student asking for a separate target vocabulary, a corpus
        without a validation split, or bf16 judging on a CPU without native bf16 (each naming its option).

    Notes
    -----
    The teacher's pass takes hours on a large corpus and the training longer; a setting that only the
    judging reads must not be found wrong at the end of them.
    """
    _, vocab_size = teacher_vocabulary(teacher)
    student_experiment(experiment, output_dir, vocab_size)
    if "valid" not in split_files:
        raise ValueError(
            f"--config: the corpus (data.corpus={experiment.data.corpus!r}) has no validation split to judge "
            "the student on"
        )
    reason = bf16_unsupported_reason(torch.device("cpu"))
    for name in ("teacher_precision", "student_precision"):
        if getattr(experiment.distill, name) == "bf16" and reason is not None:
            raise ValueError(f"distill.{name}='bf16': the judging runs on the CPU, and {reason}")


def copy_teacher_tokenizer(teacher: Path, student_dir: Path) -> int:
    """Give the student run the teacher's vocabulary, so both read and write the same ids.

    Parameters
    ----------
    teacher : Path
        The first teacher's checkpoint or run directory.
    student_dir : Path
        The student's run directory.

    Returns
    -------
    int
        The vocabulary's size.

    Raises
    ------
    ValueError
        As :func:`teacher_vocabulary`, or when the student run holds another vocabulary.

    Notes
    -----
    The data pipeline reuses a run directory's ``tokenizer.model`` instead of learning one, so copying it
    in before training is all it takes.
    """
    source, size = teacher_vocabulary(teacher)
    destination = student_dir / TOKENIZER_FILE
    if destination.is_file():
        if destination.read_bytes() != source.read_bytes():
            raise ValueError(f"{destination}: another vocabulary than the teacher's {source}")
        return size
    student_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, destination)
    return size


def train_student(
    experiment: ExperimentConfig,
    teacher: Path,
    output_dir: Path,
    context: DistributedContext,
    state: DistillState | None,
    message: Callable[[str], None],
) -> None:
    """Train (or resume, or skip) the student on the distilled corpus, on every rank of the job.

    Parameters
    ----------
    experiment : ExperimentConfig
        The student's config as given.
    teacher : Path
        The first teacher (whose vocabulary the student takes).
    output_dir : Path
        The distill run's folder.
    context : DistributedContext
        This process in the job.
    state : DistillState or None
        The run's record on rank 0; None on the other ranks.
    message : callable
        Receives one-line notes (rank 0).

    Returns
    -------
    None

    Notes
    -----
    The trainer resumes its latest checkpoint, so a killed training loses at most ``checkpoint_every``
    steps; a finished one is returned as it is. Every rank calls the trainer, which shares the batches
    between them (DistributedDataParallel) and leaves the process group at its end.
    """
    student_dir = output_dir / STUDENT_DIR
    done = state is not None and state.finished("student") is not None
    if broadcast_from_main(done, context):
        return
    started = time.monotonic()
    with claim_run_dir_if_main(student_dir):
        vocab_size = copy_teacher_tokenizer(teacher, student_dir) if context.is_main else 0
        vocab_size = broadcast_from_main(vocab_size, context)
        student = student_experiment(experiment, output_dir, vocab_size)
        if context.is_main and vocab_size != experiment.model.vocab_size:
            message(f"student: model.vocab_size {experiment.model.vocab_size} -> {vocab_size}, the teacher's")
        resume = broadcast_from_main((student_dir / "checkpoints" / "index.json").is_file(), context)
        result, _ = train_experiment(student, student_dir, resume=resume, reuse_finished=True)
    if state is not None:
        message(result.describe())
        this_run = time.monotonic() - started
        state.finish(
            "student",
            {
                # A resumed training's time is the trainer's own clock over all its runs (the steps a stop
                # lost not counted), where this invocation's would hide the runs before it.
                "seconds": round(max(this_run, result.elapsed_seconds) if resume else this_run, 1),
                "this_run_seconds": round(this_run, 1),
                "steps": result.step,
                "valid_perplexity": result.valid_perplexity,
                "stop_reason": result.stop_reason,
                "resumed": resume,
            },
        )


def average_and_shortlist(experiment: ExperimentConfig, output_dir: Path, state: DistillState) -> Path:
    """Average the student's last checkpoints and build its shortlist from the distilled pairs (rank 0).

    Parameters
    ----------
    experiment : ExperimentConfig
        The student's config (``distill.average_last``, ``distill.student_shortlist``).
    output_dir : Path
        The distill run's folder.
    state : DistillState
        The run's record.

    Returns
    -------
    Path
        The shipped student: ``student/averaged``.

    Notes
    -----
    The shortlist counts the distilled pairs, the student's own training data: a student learns the
    teacher's regular outputs, so the table of what the teacher wrote for each source piece is the one it
    decodes best with.
    """
    settings = judging_settings(experiment)
    student_dir = output_dir / STUDENT_DIR
    averaged = student_dir / AVERAGED_DIR
    if state.finished("average", settings) is None:
        started = time.monotonic()
        paths = select_last_checkpoints(student_dir, experiment.distill.average_last)
        write_average(paths, averaged)
        state.finish(
            "average",
            {
                "seconds": round(time.monotonic() - started, 1),
                "settings": settings,
                "checkpoints": [str(path) for path in paths],
            },
        )
    if experiment.distill.student_shortlist and state.finished("shortlist", settings) is None:
        started = time.monotonic()
        data = experiment.data
        corpus = output_dir / CORPUS_DIR
        built = build_checkpoint_shortlist(
            averaged, corpus / f"train.{data.source_lang}", corpus / f"train.{data.target_lang}"
        )
        state.finish(
            "shortlist",
            {
                "seconds": round(time.monotonic() - started, 1),
                "settings": settings,
                "path": str(built.path),
                "pairs": built.pairs,
            },
        )
    return averaged


def judge_student(
    experiment: ExperimentConfig,
    teachers: tuple[Path, ...],
    output_dir: Path,
    state: DistillState,
    device: str,
    progress: TranslationProgress | None = None,
) -> list[JudgedModel]:
    """Score and time the teacher and the student on the validation set (rank 0).

    Parameters
    ----------
    experiment : ExperimentConfig
        The student's config (its ``distill`` section says how the student translates).
    teachers : tuple of Path
        The teacher(s).
    output_dir : Path
        The distill run's folder.
    state : DistillState
        The run's record; the rows are stored in its ``evaluation`` stage.
    device : str
        Where to translate.
    progress : TranslationProgress or None
        A progress display for each model's translation.

    Returns
    -------
    list of JudgedModel
        The teacher in the precision of its pass, the teacher in the student's precision (when it differs),
        the student on the whole vocabulary, and with its shortlist (when built); all on ``device``.

    Raises
    ------
    ValueError
        When the corpus has no validation split.

    Notes
    -----
    BLEU is lowercased, as the issue's and the paper-replication records report Multi30k. The rows are
    read back from the record on a rerun with the same judging settings.
    """
    settings = judging_settings(experiment)
    recorded = state.finished("evaluation", settings)
    if recorded is not None:
        return [judged_model_from_record(row) for row in recorded["rows"]]
    averaged = average_and_shortlist(experiment, output_dir, state)
    started = time.monotonic()
    split = corpus_files(distilled_data(experiment, output_dir), output_dir)
    if "valid" not in split:
        raise ValueError(
            f"{output_dir / CORPUS_DIR}: the corpus has no validation split to judge the student on"
        )
    sources, references = read_lines(split["valid"][0]), read_lines(split["valid"][1])
    distill = experiment.distill
    teacher = teacher_translator(teachers, distill, device)
    rows = [judge("teacher", teacher, sources, references, True, progress)]
    if distill.student_precision != distill.teacher_precision:
        teacher = teacher_translator(
            teachers, dataclasses.replace(distill, teacher_precision=distill.student_precision), device
        )
        rows.append(judge("teacher", teacher, sources, references, True, progress))
    for shortlist in (False, True) if distill.student_shortlist else (False,):
        student = Translator.from_checkpoint(
            averaged, None, device, distill.student_precision, shortlist=shortlist
        )
        student.decode_config = dataclasses.replace(
            student.decode_config, beam_size=distill.student_beam_size, nbest=1
        )
        rows.append(judge("student", student, sources, references, True, progress))
    record: dict[str, Any] = {
        "seconds": round(time.monotonic() - started, 1),
        "settings": settings,
        "rows": [row.to_record() for row in rows],
    }
    state.finish("evaluation", record)
    return rows
