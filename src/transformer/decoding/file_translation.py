"""Translate a text file (or standard input) line by line into a file (or standard output): ``transformer translate``.

Line i of the output is sentence i's translation (or, with n-best, its candidates), in the columns of
:mod:`~transformer.decoding.translation_lines`; an empty input line gives an empty output line. A long
translation reports its progress through a caller's display
(:data:`~transformer.decoding.translation_progress.TranslationProgress`), since the library never prints.
"""

from transformer.data.text_lines import read_input_lines, write_output_lines
from transformer.decoding.glossary import Glossary
from transformer.decoding.prefix_limits import PrefixTooLongError
from transformer.decoding.quality_flags import FlagThresholds
from transformer.decoding.text_translator import TextTranslator
from transformer.decoding.translation_lines import format_translations
from transformer.decoding.translation_progress import TranslationProgress, open_progress


def read_prefixes(prefix_path: str | None, input_path: str | None, num_sentences: int) -> list[str] | None:
    """Read a file of target prefixes, one per input line, or None without one.

    Parameters
    ----------
    prefix_path : str or None
        The ``--prefix-file``; None for no prefixes.
    input_path : str or None
        The input it must match, for the message (None or "-" is standard input).
    num_sentences : int
        Lines of the input, which the prefixes must match.

    Returns
    -------
    list of str or None
        The prefixes (an empty line means no prefix for that sentence).

    Raises
    ------
    ValueError
        When ``prefix_path`` is "-" (standard input holds the text to translate), or when the line counts
        differ, naming both files.
    CorpusError
        When the file is unreadable or not UTF-8 (see :func:`~transformer.data.text_lines.read_input_lines`).

    Notes
    -----
    A prefix paired with the wrong sentence would be forced on it silently, so a count that differs is an
    error rather than a truncation.
    """
    if prefix_path is None:
        return None
    if prefix_path == "-":
        raise ValueError(
            "--prefix-file -: standard input holds the text to translate; give a file of prefixes"
        )
    prefixes = read_input_lines(prefix_path)
    if len(prefixes) != num_sentences:
        source = input_path if input_path not in (None, "-") else "standard input"
        raise ValueError(
            f"--prefix-file {prefix_path} has {len(prefixes)} lines but {source} has {num_sentences}"
        )
    return prefixes


def translate_file(
    translator: TextTranslator,
    input_path: str | None,
    output_path: str | None,
    prefix_path: str | None = None,
    alignment_layer: int | None = None,
    scores: bool = False,
    progress: TranslationProgress | None = None,
    confidence: bool = False,
    flags: FlagThresholds | None = None,
    glossary: Glossary | None = None,
) -> int:
    """Translate the lines of a file (or standard input) into a file (or standard output).

    Parameters
    ----------
    translator : TextTranslator
        The model(s) and search settings; ``decode_config.nbest > 1`` writes n-best lines.
    input_path : str or None
        Plain or gzipped text; None or "-" reads standard input.
    output_path : str or None
        The file to write (atomically); None or "-" writes standard output.
    prefix_path : str or None
        A file of target prefixes, one per input line (:func:`read_prefixes`).
    alignment_layer : int or None
        Add each translation's word alignment from this decoder layer; None leaves the column out.
    scores : bool
        Start each line with the translation's log-probability.
    progress : TranslationProgress or None
        A progress display for the translation.
    confidence : bool
        Add each translation's confidence column (:mod:`~transformer.decoding.confidence`).
    flags : FlagThresholds or None
        Add each translation's quality flags column at these thresholds
        (:mod:`~transformer.decoding.quality_flags`); None leaves it out.
    glossary : Glossary or None
        Target terms the translations must use (:mod:`~transformer.decoding.glossary`).

    Returns
    -------
    int
        Inputs cut at the translator's ``max_input_tokens`` over every call so far
        (:attr:`Translator.truncated_count`), for the caller to mention.

    Raises
    ------
    ValueError
        For bad input text (control characters), a prefix file that does not match the input or has a prefix
        longer than its line's translation may be (naming the file and line), an output that is a directory,
        or a model whose scores are NaN.
    CorpusError
        When the input or prefix file is unreadable or not UTF-8.

    Notes
    -----
    Nothing is written before every sentence is translated, so a failure leaves no partial output file.
    """
    sentences = read_input_lines(input_path)
    prefixes = read_prefixes(prefix_path, input_path, len(sentences))
    with open_progress(progress, len(sentences)) as advance:
        try:
            results = translator.translate_nbest(
                sentences, advance, prefixes, alignment_layer, flags, glossary
            )
        except PrefixTooLongError as error:
            raise ValueError(f"--prefix-file {prefix_path}:{error.index + 1}: {error}") from None
    nbest = translator.decode_config.nbest > 1
    lines = format_translations(
        results, nbest, scores, alignment_layer is not None, confidence, flags is not None
    )
    write_output_lines(lines, output_path)
    return translator.truncated_count
