"""``transformer distill``: sequence-level knowledge distillation (Kim and Rush, 2016) in one resumable run.

The stages, each recorded in ``distill.json`` when it finishes and skipped when the command is run again:

1. ``teacher``: the teacher (a checkpoint, an average or an ensemble) translates the training sources with its
   beam search, each ``torchrun`` process a contiguous slice (:mod:`~transformer.distillation.teacher_pass`);
2. ``corpus``: the student's corpus, the sources with the teacher's outputs (:mod:`.distilled_corpus`);
3. ``student``: the student trains on it through the ordinary trainer (DistributedDataParallel under
   ``torchrun``), with the teacher's vocabulary;
4. ``average``, ``shortlist``, ``evaluation``: its last checkpoints averaged, its vocabulary shortlist built
   from the distilled pairs, and teacher and student scored and timed on the validation set
   (:mod:`.judging`).

The folder: ``teacher/`` (the pass), ``corpus/``, ``student/`` (a run directory; the shipped student is
``student/averaged``), ``distill.json`` and ``report.md``.
"""

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from transformer.atomic_files import atomic_write, write_text_atomically
from transformer.autotune.thread_probe import usable_cpus
from transformer.checkpoint.layout import resolve_checkpoint
from transformer.config.experiment import ExperimentConfig
from transformer.data.pipeline.text_files import read_lines
from transformer.data.prepare import corpus_files
from transformer.decoding.translation_progress import TranslationProgress, open_progress
from transformer.distillation.distilled_corpus import write_distilled_corpus
from transformer.distillation.identity import distill_identity, teacher_pass_identity
from transformer.distillation.judging import JudgedModel, describe_judgement
from transformer.distillation.run_state import (
    DistillState,
    check_distill_output,
    claim_distill_output,
    first_difference,
    open_distill_state,
    read_distill_state,
)
from transformer.distillation.student_stages import (
    AVERAGED_DIR,
    CORPUS_DIR,
    STUDENT_DIR,
    check_student_request,
    judge_student,
    teacher_vocabulary,
    train_student,
)
from transformer.distillation.teacher_pass import (
    merge_parts,
    teacher_slices,
    teacher_translator,
    translate_slice,
)
from transformer.training.distributed import (
    DistributedContext,
    broadcast_from_main,
    init_distributed,
    shutdown_distributed,
    wait_for_data_preparation,
)
from transformer.training.run_lock import hold_run_lock

TEACHER_DIR = "teacher"
#: The teacher's translation of every training source, one per line, written once every part is in.
TRANSLATIONS_FILE = "translations.txt"
REPORT_FILE = "report.md"


@dataclass(frozen=True)
class DistillRequest:
    """What to distil, and where.

    Parameters
    ----------
    teachers : tuple of Path
        Checkpoint or run directories: one teacher, or an ensemble translating together.
    experiment : ExperimentConfig
        The student's config; its ``data`` section names the training corpus, its ``distill`` section the
        teacher's pass and how the student is judged.
    output_dir : Path
        The run's folder: new, empty, or an earlier run of the same distillation (resumed).
    reuse_teacher_pass : Path or None
        Another run's folder whose finished teacher's pass (same teachers, sources and pass settings) is
        copied instead of translating again, for a sweep of students.

    Notes
    -----
    Checked by :func:`distill` before anything is translated or trained.
    """

    teachers: tuple[Path, ...]
    experiment: ExperimentConfig
    output_dir: Path
    reuse_teacher_pass: Path | None = None


@dataclass(frozen=True)
class DistillResult:
    """What a distillation run made and measured.

    Parameters
    ----------
    output_dir : Path
        The run's folder.
    student : Path
        The shipped student checkpoint (``student/averaged``).
    stages : dict of str to dict
        Every stage's record from ``distill.json`` (seconds, counts).
    rows : list of JudgedModel
        Teacher and student on the validation set.

    Notes
    -----
    Returned by rank 0; the other ranks of a ``torchrun`` job get None from :func:`distill`.
    """

    output_dir: Path
    student: Path
    stages: dict[str, dict[str, Any]]
    rows: list[JudgedModel]

    def describe(self) -> str:
        """Summarise the run: each stage's time, then the table of teacher and student.

        Returns
        -------
        str
            Lines for the terminal (and ``report.md``).

        Notes
        -----
        A stage done by an earlier invocation shows the time it took then, marked as such.
        """
        lines = [f"distilled into {self.student} ({self.output_dir / REPORT_FILE})", "stages:"]
        for name, record in self.stages.items():
            note = _stage_note(name, record)
            lines.append(f"  {name:<11} {_minutes(record['seconds'])}{note}")
        lines.append(f"  {'in all':<11} {_minutes(sum(r['seconds'] for r in self.stages.values()))}")
        lines.append(describe_judgement(self.rows))
        return "\n".join(lines)


def _stage_note(name: str, record: dict[str, Any]) -> str:
    """Say how a stage's time was made up: reused from another run, or resumed after a stop."""
    if "reused_from" in record:
        return f" (reused from {record['reused_from']})"
    if not record.get("resumed"):
        return ""
    if name == "student" and "this_run_seconds" in record:
        last = _minutes(record["this_run_seconds"]).strip()
        return f" (resumed: the trainer's time over all its runs; {last} in the last)"
    if name == "teacher":
        return (
            f" (resumed: this run's time only, rank 0 translating {record['translated_by_rank_0']:,} lines)"
        )
    return " (resumed: this run's time only)"


def _minutes(seconds: float) -> str:
    """Write a duration as minutes and seconds, e.g. ``12 min 05 s``."""
    return f"{int(seconds // 60):3d} min {int(seconds % 60):02d} s"


def distill(
    request: DistillRequest,
    message: Callable[[str], None] = print,
    progress: TranslationProgress | None = None,
) -> DistillResult | None:
    """Run (or resume) every stage of a distillation, as one process or one rank of a ``torchrun`` job.

    Parameters
    ----------
    request : DistillRequest
        What to distil and where.
    message : callable
        Receives one-line notes (rank 0 only).
    progress : TranslationProgress or None
        A progress display for the teacher's pass (rank 0's slice) and the judging translations.

    Returns
    -------
    DistillResult or None
        The result on rank 0; None on the other ranks.

    Raises
    ------
    ValueError
        For an output folder holding something else or another run, a teacher without this project's
        vocabulary file, or a ``reuse_teacher_pass`` folder of another pass (each naming the option).

    Notes
    -----
    Rank 0 checks the folder and the teachers, fetches the corpus and writes every shared file; the other
    ranks wait for it at the points where they read what it wrote. Each rank translates with
    ``usable CPUs / processes on the machine`` threads on a CPU (``distill.teacher_threads`` if set). The
    judging stages run on the CPU with all its threads, also after a GPU job: a student's speed is a CPU
    figure here, and int8 runs on the CPU only.
    """
    context = init_distributed(request.experiment.train.device)
    try:
        with contextlib.ExitStack() as stack:
            state = None
            if context.is_main:
                _check_inputs(request)
                check_distill_output(request.output_dir)
                request.output_dir.mkdir(parents=True, exist_ok=True)
                stack.enter_context(hold_run_lock(request.output_dir))
                claim_distill_output(request.output_dir)
            else:
                wait_for_data_preparation(context)
            notes = message if context.is_main else None
            split_files = corpus_files(request.experiment.data, request.output_dir, notes)
            if context.is_main:
                check_student_request(
                    request.experiment, request.teachers[0], request.output_dir, split_files
                )
                identity = distill_identity(request.teachers, request.experiment, split_files["train"][0])
                state = open_distill_state(request.output_dir, identity)
                wait_for_data_preparation(context)
            _set_translation_threads(context, request.experiment.distill.teacher_threads)
            translations = _teacher_stage(request, context, state, split_files["train"][0], message, progress)
            if state is not None and translations is not None and state.finished("corpus") is None:
                _corpus_stage(request, state, split_files, translations, message)
            wait_for_data_preparation(context)
            train_student(
                request.experiment, request.teachers[0], request.output_dir, context, state, message
            )
            if state is None:
                return None
            # On the CPU, with all of it (the other ranks ended with the training): where a student's speed
            # matters, and where int8 and the shortlist's fast paths run.
            torch.set_num_threads(usable_cpus())
            rows = judge_student(
                request.experiment, request.teachers, request.output_dir, state, "cpu", progress
            )
            result = DistillResult(
                request.output_dir, request.output_dir / STUDENT_DIR / AVERAGED_DIR, dict(state.stages), rows
            )
            write_text_atomically(
                request.output_dir / REPORT_FILE, f"# Distillation\n\n{result.describe()}\n"
            )
            return result
    finally:
        shutdown_distributed(context)


def _check_inputs(request: DistillRequest) -> None:
    """Refuse a missing teacher, one without a joint vocabulary, or an unreadable pass to reuse, writing nothing."""
    for teacher in request.teachers:
        resolve_checkpoint(teacher)
    teacher_vocabulary(request.teachers[0])
    if request.reuse_teacher_pass is not None:
        read_distill_state(request.reuse_teacher_pass, "--reuse-teacher-pass")


def _set_translation_threads(context: DistributedContext, threads: int | None) -> None:
    """Use ``distill.teacher_threads``, else share the machine's CPUs among its processes (a CPU job only)."""
    if context.device.type == "cpu":
        local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        torch.set_num_threads(threads or max(1, usable_cpus() // local_processes))


def _teacher_stage(
    request: DistillRequest,
    context: DistributedContext,
    state: DistillState | None,
    source_file: Path,
    message: Callable[[str], None],
    progress: TranslationProgress | None,
) -> list[str] | None:
    """Translate (or reuse) the teacher's pass; rank 0 returns every translation (None once the corpus is written)."""
    teacher_dir = request.output_dir / TEACHER_DIR
    translations_file = teacher_dir / TRANSLATIONS_FILE
    done = state is not None and state.finished("teacher") is not None and translations_file.is_file()
    if state is not None and not done and request.reuse_teacher_pass is not None:
        _reuse_teacher_pass(request.reuse_teacher_pass, state, translations_file, message)
        done = True
    if broadcast_from_main(done, context):
        if state is None or state.finished("corpus") is not None:
            return None  # the corpus made from them is written: no need to read a large pass again
        return read_lines(translations_file)
    started = time.monotonic()
    settings = request.experiment.distill
    sources = read_lines(source_file)
    slices = teacher_slices(len(sources), settings.chunk_lines, context.world_size)
    _refuse_other_slicing(teacher_dir, context.world_size)
    translator = teacher_translator(request.teachers, settings, str(context.device))
    mine = slices[context.rank]
    if state is not None:
        message(
            f"teacher's pass: {len(sources):,} sources, {context.world_size} process(es), beam "
            f"{translator.decode_config.beam_size}, {translator.precision}, {torch.get_num_threads()} thread(s) "
            f"each; rank 0 translates lines {mine.start + 1}-{mine.stop} into {teacher_dir / mine.part_name}"
        )
    total = mine.line_count if state is not None else 0
    with open_progress(progress if state is not None else None, total) as advance:
        translated = translate_slice(translator, sources, mine, teacher_dir / mine.part_name, advance)
    # Every part written: a barrier with a long timeout, as slices can finish minutes apart.
    wait_for_data_preparation(context)
    if state is None:
        return None
    translations = merge_parts(teacher_dir, slices)
    write_text_atomically(translations_file, "".join(line + "\n" for line in translations))
    state.finish(
        "teacher",
        {
            "seconds": round(time.monotonic() - started, 1),
            "lines": len(translations),
            "sources": str(source_file),
            "processes": context.world_size,
            "translated_by_rank_0": translated,
            "resumed": translated < mine.line_count,
        },
    )
    for teacher_slice in slices:  # only once the stage is recorded: a kill before keeps the parts to merge
        (teacher_dir / teacher_slice.part_name).unlink(missing_ok=True)
    return translations


def _refuse_other_slicing(teacher_dir: Path, world_size: int) -> None:
    """Refuse to resume a pass started by another number of processes (its parts are cut differently)."""
    if not teacher_dir.is_dir():
        return
    for part in sorted(teacher_dir.glob("part-*-of-*.txt")):
        started_with = int(part.stem.rpartition("-of-")[2])
        if started_with != world_size:
            raise ValueError(
                f"{part}: the teacher's pass was started by {started_with} process(es), this job has "
                f"{world_size}; resume it with torchrun --nproc-per-node {started_with} (or as many in all), "
                f"or delete {teacher_dir} to start the pass again"
            )


def _reuse_teacher_pass(
    other_dir: Path, state: DistillState, translations_file: Path, message: Callable[[str], None]
) -> None:
    """Copy another run's finished teacher's pass after checking that it is the same pass."""
    other = read_distill_state(other_dir, "--reuse-teacher-pass")
    difference = first_difference(
        teacher_pass_identity(other.identity), teacher_pass_identity(state.identity)
    )
    if difference is not None:
        raise ValueError(f"--reuse-teacher-pass {other_dir}: its teacher's pass differs in {difference}")
    source = other_dir / TEACHER_DIR / TRANSLATIONS_FILE
    if other.finished("teacher") is None or not source.is_file():
        raise ValueError(f"--reuse-teacher-pass {other_dir}: its teacher's pass has not finished")
    started = time.monotonic()
    with source.open("rb") as original, atomic_write(translations_file, "wb") as copy:
        shutil.copyfileobj(original, copy)  # streamed: a large corpus's pass need not fit in memory
    record = dict(other.stages["teacher"])
    message(f"teacher's pass: reused {source} ({record['lines']:,} lines)")
    state.finish(
        "teacher", {**record, "reused_from": str(other_dir), "copy_seconds": time.monotonic() - started}
    )


def _corpus_stage(
    request: DistillRequest,
    state: DistillState,
    split_files: dict[str, tuple[Path, Path]],
    translations: list[str],
    message: Callable[[str], None],
) -> None:
    """Write the student's corpus from the teacher's translations (rank 0)."""
    started = time.monotonic()
    data = request.experiment.data
    corpus = write_distilled_corpus(
        request.output_dir / CORPUS_DIR,
        split_files,
        translations,
        (data.source_lang, data.target_lang),
        request.experiment.distill.mix_original,
    )
    message(
        f"student's corpus: {corpus.teacher_pairs:,} teacher pairs, {corpus.original_pairs:,} original pairs, "
        f"{corpus.dropped} dropped (empty) in {corpus.directory}"
    )
    state.finish(
        "corpus",
        {
            "seconds": round(time.monotonic() - started, 1),
            "teacher_pairs": corpus.teacher_pairs,
            "original_pairs": corpus.original_pairs,
            "dropped": corpus.dropped,
        },
    )
