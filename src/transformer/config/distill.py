"""The ``distill`` section: how ``transformer distill`` makes a student from a teacher (Kim and Rush, 2016)."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from transformer.typed_fields import POSITIVE, FieldRange, check_choice, check_field_types, check_ranges

#: Precisions the teacher and the student may translate in (those of the Translator).
DISTILL_PRECISIONS = ("fp32", "bf16", "int8")


@dataclass(frozen=True)
class DistillConfig:
    """How a student is distilled: the teacher's pass, the student's data and how both are judged.

    Parameters
    ----------
    teacher_beam_size : int or None
        Beam of the teacher's pass over the training sources; None keeps the teacher checkpoint's own search
        (its run's ``decode`` section: beam 4 with its length penalty for the shipped configs). At least 1.
    teacher_precision : str
        "fp32", "bf16" or "int8": the teacher's arithmetic in its pass over the training sources.
    teacher_threads : int or None
        CPU threads of each process of the teacher's pass; None shares the usable CPUs among the processes on
        the machine. Positive.
    chunk_lines : int
        Source lines translated and written as one unit: a killed pass resumes after the last whole chunk in
        its file. Positive.
    mix_original : bool
        Train the student on the original training pairs as well as on the teacher's (Kim and Rush's
        "seq-KD + original data"); False trains on the teacher's outputs alone.
    average_last : int
        The student's last checkpoints averaged into the shipped student (section 6.1); 1 takes the last
        one as it is. Positive.
    student_beam_size : int
        The student's search when it is scored, timed and shipped (1: greedy, as Bergamot's students
        translate). At least 1.
    student_precision : str
        "fp32", "bf16" or "int8": the precision the student is judged in, and the teacher beside it.
    student_shortlist : bool
        Build the student's vocabulary shortlist from its distilled training pairs and judge it with it.

    Notes
    -----
    The teacher's pass depends only on the teacher, the training sources, the ``teacher_`` values and
    ``chunk_lines``, so students of a sweep can share one pass (``distill --reuse-teacher-pass DIR``).
    Outputs of beam search are more regular than human references, which is why a small student learns
    them better than the original targets (Kim and Rush, 2016, section 5); ``mix_original`` trades some of
    that for the references' variety. One process and several write the same translations when each has
    the same ``teacher_threads`` (a product's summation order can depend on the thread count).
    """

    teacher_beam_size: int | None = None
    teacher_precision: str = "fp32"
    teacher_threads: int | None = None
    chunk_lines: int = 256
    mix_original: bool = False
    average_last: int = 3
    student_beam_size: int = 1
    student_precision: str = "int8"
    student_shortlist: bool = True

    #: The range of every numeric field (:func:`transformer.typed_fields.check_ranges`), as the docstring says.
    FIELD_RANGES: ClassVar[Mapping[str, FieldRange]] = {
        "teacher_beam_size": FieldRange(1),
        "teacher_threads": POSITIVE,
        "chunk_lines": POSITIVE,
        "average_last": POSITIVE,
        "student_beam_size": FieldRange(1),
    }

    def __post_init__(self) -> None:
        check_field_types(self)
        check_ranges(self)
        check_choice(self, "teacher_precision", DISTILL_PRECISIONS)
        check_choice(self, "student_precision", DISTILL_PRECISIONS)
