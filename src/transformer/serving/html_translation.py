"""``transformer translate --format html``: each input line an HTML fragment, translated with its tags kept.

The offline side of :mod:`transformer.serving.inline_markup`: each run of text (the text between block-level
tags) is translated as one sentence, as ``translate`` translates each line, with its word alignment, and its
inline tags are put back around the aligned words.
"""

from transformer.data.text_lines import read_input_lines, write_output_lines
from transformer.decoding.translation_progress import TranslationProgress, open_progress
from transformer.decoding.translator import Translator
from transformer.serving.inline_markup import parse_runs, rebuild_fragment, run_texts, translate_run_markup

#: The decoder layer whose cross-attention aligns the words the tags follow (the last, as ``--alignments``).
MARKUP_ALIGNMENT_LAYER = -1


def translate_html_lines(
    translator: Translator, lines: list[str], progress: TranslationProgress | None = None
) -> list[str]:
    """Translate HTML fragments, keeping their markup and putting their inline tags back.

    Parameters
    ----------
    translator : Translator
        The model and its search (its best candidate is used).
    lines : list of str
        One HTML fragment per line.
    progress : TranslationProgress or None
        A progress display, counting runs of text.

    Returns
    -------
    list of str
        One translated fragment per line.

    Notes
    -----
    All runs of all lines are translated in one call, so they are batched together. A run with no translation
    (no finite-probability output) becomes empty, its tags kept as empty elements.
    """
    runs_per_line = [parse_runs(line) for line in lines]
    texts = run_texts(runs_per_line)
    with open_progress(progress, len(texts)) as advance:
        found = translator.translate_nbest(texts, advance, alignment_layer=MARKUP_ALIGNMENT_LAYER)
    remaining = iter(found)
    translated = []
    for runs in runs_per_line:
        pieces = []
        for run in (run for run in runs if not run.markup):
            candidates = next(remaining)
            best = candidates[0] if candidates else None
            text, alignment = (best.text, best.alignment or []) if best is not None else ("", [])
            # The search strips its output; the run's own edge spaces go back ("Press <b>OK</b> now").
            stripped = run.text.strip()
            lead, trail = (
                run.text[: run.text.index(stripped)],
                run.text[run.text.index(stripped) + len(stripped) :],
            )
            pieces.append(translate_run_markup(run, lead + text + trail, alignment))
        translated.append(rebuild_fragment(runs, pieces))
    return translated


def translate_html_file(
    translator: Translator,
    input_path: str | None,
    output_path: str | None,
    progress: TranslationProgress | None = None,
) -> int:
    """Translate a file (or standard input) of HTML fragments, one per line, into a file (or standard output).

    Parameters
    ----------
    translator : Translator
        The model and its search.
    input_path, output_path : str or None
        As ``transformer translate``'s ``--input`` and ``--output`` (None or "-": the standard streams).
    progress : TranslationProgress or None
        A progress display.

    Returns
    -------
    int
        Inputs cut at the translator's ``max_input_tokens`` so far, for the caller to mention.

    Raises
    ------
    ValueError
        For bad input text (control characters, naming the line) or an output that is a directory.
    CorpusError
        When the input is unreadable or not UTF-8.

    Notes
    -----
    Nothing is written before every line is translated (the output is written atomically).
    """
    lines = read_input_lines(input_path)
    write_output_lines(translate_html_lines(translator, lines, progress), output_path)
    return translator.truncated_count
