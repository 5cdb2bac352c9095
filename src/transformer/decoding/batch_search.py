"""One batch's search, whichever engine scores the steps: MBR, constrained beam, sampling, greedy or beam.

:class:`~transformer.decoding.translator.Translator` (PyTorch) and
:class:`~transformer.interop.onnx_translation.OnnxTranslator` (onnxruntime) differ only in the step model they
build; which search a :class:`~transformer.config.decode.DecodeConfig` and a glossary ask for is decided here
once, so both engines run the same search for the same settings.
"""

from collections.abc import Callable, Sequence
from typing import Any

from torch import Tensor

from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.decoding.constrained_beam_search import search_with_terms
from transformer.decoding.mbr import mbr_search
from transformer.decoding.search import Hypothesis
from transformer.decoding.step_model import StepModel

#: Builds the step model of one search; ``extra_tokens`` are target phrases a shortlist must keep scoring.
StepModelFactory = Callable[[Sequence[Sequence[int]] | None], StepModel[Any]]


def search_batch(
    make_step_model: StepModelFactory,
    src_tokens: Tensor,
    config: DecodeConfig,
    detokenize: Callable[[list[int]], str],
    prefixes: Sequence[Sequence[int]] | None = None,
    terms: Sequence[Sequence[Sequence[int]]] | None = None,
    word_continuations: Callable[[], list[int]] | None = None,
    between_steps: Callable[[], None] | None = None,
) -> list[list[Hypothesis]]:
    """Run the search ``config`` and ``terms`` ask for over one encoded batch.

    Parameters
    ----------
    make_step_model : callable
        ``make_step_model(extra_tokens)`` returns the step model to drive (``extra_tokens`` None, or the
        batch's glossary phrases).
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source ids ending with EOS, right-padded with the pad id.
    config : DecodeConfig
        The search settings.
    detokenize : callable
        Output ids to the text a user sees (what MBR's utilities compare).
    prefixes : sequence of sequence of int or None
        A forced target prefix per sentence (token ids; empty for none).
    terms : sequence of sequence of sequence of int or None
        Per sentence, target phrases its output must contain; None or all empty for none.
    word_continuations : callable or None
        Returns the pieces a completed term may not be glued to
        (:func:`~transformer.decoding.glossary.word_continuation_ids`); called only when there are terms.
    between_steps : callable or None
        Passed to MBR, which calls it before each sentence's utilities.

    Returns
    -------
    list of list of Hypothesis
        Per sentence, ``config.nbest`` hypotheses, best first (MBR: by expected utility).

    Notes
    -----
    Terms take the constrained beam search (:func:`~transformer.decoding.constrained_beam_search.search_with_terms`,
    which sends only the sentences with terms to it); else MBR when ``config.mbr``; else
    :func:`~transformer.decoding.beam_search.search` (sampling, greedy or beam).
    """
    if terms is not None and any(terms):
        continuations = word_continuations() if word_continuations is not None else []
        return search_with_terms(make_step_model, src_tokens, terms, config, prefixes, continuations)
    step_model = make_step_model(None)
    if config.mbr:
        return mbr_search(step_model, src_tokens, config, detokenize, prefixes, between_steps)
    return search(step_model, src_tokens, config, prefixes)
