"""Back-translation in one call: translate target-language text into a synthetic parallel corpus.

A target-to-source :class:`~transformer.decoding.translator.Translator` turns monolingual target sentences
into synthetic sources, and the pairs are written as a folder that ``train`` reads beside the real corpus
(:mod:`transformer.data.corpora.backtranslated_corpus`). Sampling is the default search: Edunov et al. (2018) find
sampled back-translations train better models than beam outputs at scale, because beam search's outputs
are too regular to teach the model much.
"""

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from transformer.config.decode import DecodeConfig
from transformer.data.corpora.backtranslated_corpus import (
    check_backtranslation_output,
    write_backtranslated_corpus,
)
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
