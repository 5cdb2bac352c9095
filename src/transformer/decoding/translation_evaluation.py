"""Translate a test set with a model and score it: BLEU/chrF of the translations, perplexity of the references.

``transformer evaluate --checkpoint ... --source ... --reference ...``. Scoring translations made elsewhere
(``--hypotheses``) needs no model: :func:`~transformer.evaluation.bleu.score_files`.
"""

from dataclasses import dataclass

from transformer.data.text_lines import read_input_lines, write_output_lines
from transformer.decoding.glossary import Glossary
from transformer.decoding.text_translator import TextTranslator
from transformer.decoding.translation_progress import TranslationProgress, open_progress
from transformer.evaluation.bleu import TranslationScores, score_translations
from transformer.evaluation.perplexity import PerplexityResult


@dataclass(frozen=True)
class TranslatorEvaluation:
    """What a model scored on a test set.

    Parameters
    ----------
    hypotheses : list of str
        The model's translations, in input order.
    perplexity : PerplexityResult
        The first model's perplexity on the references (teacher forcing).
    scores : TranslationScores
        BLEU and chrF of the translations, with their signatures.

    Notes
    -----
    An ensemble translates together, but perplexity is the first model's alone: teacher-forced scoring of
    an ensemble's averaged distribution is not what Table 2's "PPL (dev)" measures.
    """

    hypotheses: list[str]
    perplexity: PerplexityResult
    scores: TranslationScores


def evaluate_translator(
    translator: TextTranslator,
    source_path: str,
    reference_path: str,
    output_path: str | None = None,
    lowercase: bool = False,
    progress: TranslationProgress | None = None,
    glossary: Glossary | None = None,
) -> TranslatorEvaluation:
    """Translate a source file, write the translations if asked, and score them and the references.

    Parameters
    ----------
    translator : TextTranslator
        The model(s) with the search to evaluate.
    source_path : str
        Source sentences, one per line (plain or gzipped; "-" is standard input).
    reference_path : str
        Reference translations, line-aligned with the sources.
    output_path : str or None
        Also write the translations here (atomically; "-" is standard output).
    lowercase : bool
        Case-insensitive BLEU.
    progress : TranslationProgress or None
        A progress display for the translation.
    glossary : Glossary or None
        Target terms the translations must use (:mod:`~transformer.decoding.glossary`).

    Returns
    -------
    TranslatorEvaluation
        Translations, perplexity and scores.

    Raises
    ------
    ValueError
        When the two files' line counts differ (naming both), for bad input text, or an output that is a
        directory.
    CorpusError
        When a file is unreadable or not UTF-8.

    Notes
    -----
    The references are read first and the line counts compared before translating, so a mismatched pair of
    files costs no translation pass. Perplexity is per target BPE token, so it compares models with the same
    vocabulary only.
    """
    references = read_input_lines(reference_path)
    sources = read_input_lines(source_path)
    if len(sources) != len(references):
        raise ValueError(f"{source_path} has {len(sources)} lines but {reference_path} has {len(references)}")
    with open_progress(progress, len(sources)) as advance:
        hypotheses = translator.translate(sources, advance, glossary=glossary)
    if output_path:
        write_output_lines(hypotheses, output_path)
    perplexity = translator.reference_perplexity(list(zip(sources, references, strict=True)))
    return TranslatorEvaluation(hypotheses, perplexity, score_translations(hypotheses, references, lowercase))
