"""Back-translation in one call: translate target-language text into a synthetic parallel corpus.

A target-to-source :class:`~transformer.decoding.translator.Translator` turns monolingual target sentences
into synthetic sources, and the pairs are written as a folder that ``train`` reads beside the real corpus
(:mod:`transformer.data.corpora.backtranslated_corpus`). Sampling is the default search: Edunov et al. (2018) find
sampled back-translations train better models than beam outputs at scale, because beam search's outputs
are too regular to teach the model much.
"""

import dataclasses
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from transformer.config.decode import DecodeConfig
from transformer.data.corpora.backtranslated_corpus import (
    check_backtranslation_output,
    write_backtranslated_corpus,
)
from transformer.data.text_lines import read_input_lines
from transformer.decoding.translation_progress import TranslationProgress, open_progress
from transformer.decoding.translator import Translator


def backtranslation_settings(base: DecodeConfig, beam_size: int | None) -> DecodeConfig:
    """Choose the search of a back-translation: sampling, or beam search when a beam size is given.

    Parameters
    ----------
    base : DecodeConfig
        The checkpoint's settings (length limits and the like are kept).
    beam_size : int or None
        A beam size asks for beam search (1 is greedy); None samples.

    Returns
    -------
    DecodeConfig
        ``base`` with ``sampling`` on and ``nbest`` 1, or with ``beam_size`` and sampling off.

    Notes
    -----
    One output per input line: a corpus needs exactly one synthetic source per target sentence.
    """
    if beam_size is None:
        return dataclasses.replace(base, sampling=True, nbest=1, mbr=0)
    return dataclasses.replace(base, sampling=False, beam_size=beam_size, nbest=1, mbr=0)


def backtranslate(
    translator: Translator,
    targets: Sequence[str],
    output_dir: Path,
    languages: tuple[str, str],
    provenance: dict[str, str],
    progress: Callable[[int], None] | None = None,
) -> int:
    """Translate monolingual target sentences and write them as a synthetic corpus.

    Parameters
    ----------
    translator : Translator
        A target-to-source model (or ensemble) with the search to use (:func:`backtranslation_settings`).
    targets : sequence of str
        Monolingual sentences in the target language of the model to be trained.
    output_dir : Path
        The corpus folder: missing, empty, or an earlier back-translation (it is replaced).
    languages : (str, str)
        Source and target language suffixes of the corpus files, e.g. ("en", "de").
    provenance : dict of str to str
        Where the inputs came from (checkpoint, input file), kept in ``backtranslation.json``.
    progress : callable or None
        Called with the number of sentences each finished batch held.

    Returns
    -------
    int
        Synthetic pairs written (pairs with an empty side are dropped and counted in the record).

    Raises
    ------
    ValueError
        When ``output_dir`` holds something else, or when the translator's search would return several outputs
        per line.

    Notes
    -----
    Both checks run before translating, so a wrong output directory or search setting never costs a
    translation pass.
    """
    check_backtranslation_output(output_dir)
    if translator.decode_config.nbest != 1:
        raise ValueError(
            f"back-translation writes one source per line, got nbest={translator.decode_config.nbest}"
        )
    sources = translator.translate(targets, progress)
    record = {
        **provenance,
        "source_lang": languages[0],
        "target_lang": languages[1],
        "search": dataclasses.asdict(translator.decode_config),
        "ensemble_size": len(translator.models),
        "precision": translator.precision,
    }
    return write_backtranslated_corpus(output_dir, sources, list(targets), languages, record)


def check_backtranslation_request(
    output_dir: Path, languages: tuple[str, str], beam_size: int | None, sampling: bool | None
) -> None:
    """Refuse a back-translation's output folder, language suffixes or search before a model is loaded.

    Parameters
    ----------
    output_dir : Path
        The corpus folder (``--output``).
    languages : (str, str)
        ``--source-lang`` and ``--target-lang``: the suffixes of the corpus files.
    beam_size : int or None
        ``--beam``: beam search instead of sampling.
    sampling : bool or None
        ``--sampling`` as given.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the option: an output folder holding anything but an earlier back-translation, a suffix that
        is not letters, digits, ``-`` or ``_``, the same suffix twice, or ``--beam`` with ``--sampling``.

    Notes
    -----
    A suffix becomes part of a file name (``train.en``), so one with a space or a slash would write
    somewhere unexpected; both searches asked for at once would leave one silently ignored.
    """
    check_backtranslation_output(output_dir)
    for option, language in zip(("--source-lang", "--target-lang"), languages, strict=True):
        if not re.fullmatch(r"[A-Za-z0-9_-]+", language):
            raise ValueError(
                f"{option} {language!r}: expected a file suffix such as en (letters, digits, - or _)"
            )
    if languages[0] == languages[1]:
        raise ValueError(f"--source-lang and --target-lang are both {languages[0]!r}")
    if beam_size is not None and sampling:
        raise ValueError("--beam and --sampling: back-translation samples unless --beam asks for beam search")


def backtranslate_file(
    translator: Translator,
    input_path: str | None,
    output_dir: Path,
    languages: tuple[str, str],
    beam_size: int | None,
    checkpoint_label: str,
    progress: TranslationProgress | None = None,
) -> tuple[int, int]:
    """Back-translate a file (or standard input) of target-language lines into a synthetic corpus folder.

    Parameters
    ----------
    translator : Translator
        A target-to-source model (or ensemble); its ``decode_config`` is replaced by the back-translation
        search (:func:`backtranslation_settings`).
    input_path : str or None
        Monolingual target-language text (plain or gzipped); None or "-" reads standard input.
    output_dir : Path
        The corpus folder: missing, empty, or an earlier back-translation (it is replaced).
    languages : (str, str)
        Source and target language suffixes of the corpus files, e.g. ("en", "de").
    beam_size : int or None
        Beam search with this beam; None samples.
    checkpoint_label : str
        The checkpoint(s) the model came from, recorded in ``backtranslation.json``.
    progress : TranslationProgress or None
        A progress display for the translation.

    Returns
    -------
    written : int
        Synthetic pairs written.
    read : int
        Input lines read (the difference, pairs with an empty side, was dropped).

    Raises
    ------
    ValueError
        For bad input text or an output folder holding something else (see :func:`backtranslate`).
    CorpusError
        When the input is unreadable or not UTF-8.

    Notes
    -----
    The input is read after the model is loaded, so a wrong checkpoint fails before anyone types into
    standard input; the record names the input file, or standard input.
    """
    translator.decode_config = backtranslation_settings(translator.decode_config, beam_size)
    targets = read_input_lines(input_path)
    provenance = {"checkpoint": checkpoint_label, "input": input_path or "standard input"}
    with open_progress(progress, len(targets)) as advance:
        written = backtranslate(translator, targets, output_dir, languages, provenance, advance)
    return written, len(targets)
