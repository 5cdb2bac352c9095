"""Score and time a teacher and its student on the validation set, the same way, in the same process."""

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from transformer.decoding.translation_progress import TranslationProgress, open_progress
from transformer.decoding.translator import Translator
from transformer.evaluation.bleu import score_translations

#: Sentences translated before the clock starts: the first batch pays one-off costs (kernel probes, caches).
WARMUP_SENTENCES = 16


@dataclass(frozen=True)
class JudgedModel:
    """One model's quality and speed on the validation set.

    Parameters
    ----------
    role : str
        "teacher" or "student".
    precision : str
        The arithmetic it translated in.
    beam_size : int
        Its search (1: greedy).
    shortlist : bool
        Whether it scored a vocabulary shortlist instead of the whole vocabulary.
    bleu : float
        Corpus BLEU against the references (sacreBLEU, lowercased when the run says so).
    sentences : int
        Validation sentences translated.
    seconds : float
        Wall time of the timed translation (after the warm-up).
    threads : int
        ``torch.get_num_threads()`` while it translated.

    Notes
    -----
    Both models of a run are timed by one process, one after the other, at the same thread count and
    batch budget: a ratio of two rows is a fair speed-up on that machine, a row alone is not a benchmark
    (``python -m benchmarks.pareto`` is).
    """

    role: str
    precision: str
    beam_size: int
    shortlist: bool
    bleu: float
    sentences: int
    seconds: float
    threads: int

    @property
    def sentences_per_second(self) -> float:
        """Translation speed.

        Returns
        -------
        float
            ``sentences / seconds``.

        Notes
        -----
        Includes tokenising and detokenising, as a user of ``translate`` sees it.
        """
        return self.sentences / self.seconds if self.seconds > 0 else float("inf")

    def to_record(self) -> dict[str, Any]:
        """Return the row as JSON values, with the speed.

        Returns
        -------
        dict of str to Any
            The fields and ``sentences_per_second``.

        Notes
        -----
        What ``distill.json`` keeps; :func:`judged_model_from_record` reads it back.
        """
        return {**asdict(self), "sentences_per_second": self.sentences_per_second}


def judged_model_from_record(record: dict[str, Any]) -> JudgedModel:
    """Rebuild a row from its record.

    Parameters
    ----------
    record : dict of str to Any
        From :meth:`JudgedModel.to_record`.

    Returns
    -------
    JudgedModel
        The row.

    Notes
    -----
    The derived speed in the record is ignored and recomputed.
    """
    fields = {key: value for key, value in record.items() if key != "sentences_per_second"}
    return JudgedModel(**fields)


def judge(
    role: str,
    translator: Translator,
    sources: Sequence[str],
    references: Sequence[str],
    lowercase: bool,
    progress: TranslationProgress | None = None,
) -> JudgedModel:
    """Translate the validation sources, timing it, and score the translations.

    Parameters
    ----------
    role : str
        "teacher" or "student".
    translator : Translator
        The model with the search to judge.
    sources, references : sequence of str
        The validation set, line-aligned.
    lowercase : bool
        Case-insensitive BLEU.
    progress : TranslationProgress or None
        A progress display for the timed translation (its cost per batch is negligible next to a batch).

    Returns
    -------
    JudgedModel
        Its row.

    Notes
    -----
    A warm-up of :data:`WARMUP_SENTENCES` sentences runs first, so a one-off cost (the decoder step's
    first call, an allocator's first blocks) does not land on the model timed first.
    """
    translator.translate(list(sources[:WARMUP_SENTENCES]))
    with open_progress(progress, len(sources)) as advance:
        started = time.perf_counter()
        hypotheses = translator.translate(list(sources), advance)
        seconds = time.perf_counter() - started
    bleu = score_translations(hypotheses, list(references), lowercase).bleu
    return JudgedModel(
        role,
        translator.precision,
        translator.decode_config.beam_size,
        translator.shortlist is not None,
        round(bleu, 2),
        len(sources),
        round(seconds, 3),
        torch.get_num_threads(),
    )


def describe_judgement(rows: Sequence[JudgedModel]) -> str:
    """Write the rows as a Markdown table, each model's speed also as a multiple of the first row's.

    Parameters
    ----------
    rows : sequence of JudgedModel
        Teacher rows first.

    Returns
    -------
    str
        A table with a header, one line per row.

    Notes
    -----
    The first row is the teacher as it translated the training data, the reference every speed-up and
    BLEU difference is read against.
    """
    lines = [
        "| model | precision | search | shortlist | BLEU | sentences/s | speed vs first row |",
        "|---|---|---|---|---|---|---|",
    ]
    base = rows[0]
    for row in rows:
        search = "greedy" if row.beam_size == 1 else f"beam {row.beam_size}"
        speedup = row.sentences_per_second / base.sentences_per_second
        lines.append(
            f"| {row.role} | {row.precision} | {search} | {'yes' if row.shortlist else 'no'} | {row.bleu:.2f} "
            f"| {row.sentences_per_second:.1f} | {speedup:.2f}x |"
        )
    return "\n".join(lines)
