"""One batch's search, whichever engine scores the steps: MBR, constrained beam, sampling, greedy or beam.

:func:`encode_request` also encodes and batches a request's sentences the one way both translators do.

:class:`~transformer.decoding.translator.Translator` (PyTorch) and
:class:`~transformer.interop.onnx_translation.OnnxTranslator` (onnxruntime) differ only in the step model they
build; which search a :class:`~transformer.config.decode.DecodeConfig` and a glossary ask for is decided here
once, so both engines run the same search for the same settings.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.inference_batches import inference_batches
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.beam_search import search
from transformer.decoding.constrained_beam_search import check_term_search, search_with_terms
from transformer.decoding.glossary import Glossary
from transformer.decoding.mbr import mbr_search
from transformer.decoding.prefix_limits import check_prefix_lengths
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


@dataclass(frozen=True)
class EncodedRequest:
    """Sentences encoded for a search and grouped into batches, as both engines' translators group them.

    Parameters
    ----------
    sources : list of list of int
        Each sentence's source ids ending with EOS; empty for a blank sentence.
    prefixes : list of list of int or None
        Each sentence's forced target prefix (ids; empty for none); None when no prefixes were given.
    terms : list of list of list of int
        Each sentence's glossary phrases (ids); empty lists without a glossary.
    batches : list of list of int
        Sentence indices per batch, longest first (:func:`~transformer.data.pipeline.inference_batches.inference_batches`).

    Notes
    -----
    Blank sentences are in no batch: they translate to nothing without a search.
    """

    sources: list[list[int]]
    prefixes: list[list[int]] | None
    terms: list[list[list[int]]]
    batches: list[list[int]]

    def batch(
        self, indices: list[int]
    ) -> tuple[list[list[int]], list[list[int]] | None, list[list[list[int]]]]:
        """Select one batch's sources, prefixes and terms.

        Parameters
        ----------
        indices : list of int
            Sentence indices of the batch.

        Returns
        -------
        tuple
            ``(sources, prefixes or None, terms)`` of those sentences, in that order.

        Notes
        -----
        What a translator's per-batch search takes.
        """
        prefixes = [self.prefixes[index] for index in indices] if self.prefixes is not None else None
        return [self.sources[index] for index in indices], prefixes, [self.terms[index] for index in indices]


def encode_request(
    sentences: Sequence[str],
    encode: Callable[[str], list[int]],
    tokenizer: TextTokenizer,
    config: DecodeConfig,
    batch_tokens: int,
    max_input_tokens: int,
    output_limit: int | None,
    prefixes: Sequence[str] | None = None,
    glossary: Glossary | None = None,
) -> EncodedRequest:
    """Encode sentences, their prefixes and glossary terms, check them, and group the sentences into batches.

    Parameters
    ----------
    sentences : sequence of str
        Raw source sentences.
    encode : callable
        A sentence to its source ids with EOS (the translator's, which counts truncations); "" for blank.
    tokenizer : TextTokenizer
        Encodes prefixes and terms as target text.
    config : DecodeConfig
        The search (a glossary needs beam search; the prefix check reads ``max_length_offset``).
    batch_tokens : int
        Padded source tokens per batch.
    max_input_tokens : int
        The translator's input limit (for the prefix check).
    output_limit : int or None
        The most tokens the step model can output (a position table's size), or None.
    prefixes : sequence of str or None
        One raw target prefix per sentence (blank for none).
    glossary : Glossary or None
        Target terms.

    Returns
    -------
    EncodedRequest
        The encoded request.

    Raises
    ------
    ValueError
        When the prefixes are not one per sentence, or a glossary comes with greedy search, sampling or MBR.
    PrefixTooLongError
        For a prefix of more tokens than its translation may have.

    Notes
    -----
    Every check runs before any search, so a bad prefix costs no model call.
    """
    if prefixes is not None and len(prefixes) != len(sentences):
        raise ValueError(f"{len(prefixes)} prefixes for {len(sentences)} sentences")
    if glossary is not None:
        check_term_search(config)
    sources = [encode(sentence) for sentence in sentences]
    terms = [
        glossary.constraints(sentence, tokenizer) if glossary and ids else []
        for sentence, ids in zip(sentences, sources, strict=True)
    ]
    targets = None
    if prefixes is not None:
        targets = [tokenizer.encode_target(prefix) if prefix.strip() else [] for prefix in prefixes]
        check_prefix_lengths(sources, targets, max_input_tokens, config.max_length_offset, output_limit)
    return EncodedRequest(
        sources, targets, terms, inference_batches([len(ids) for ids in sources], batch_tokens)
    )


def batch_budget(max_tokens: int, config: DecodeConfig) -> int:
    """Source tokens per batch for a search: ``max_tokens``, cut for searches with many rows per sentence.

    Parameters
    ----------
    max_tokens : int
        The translator's budget for greedy and beam search.
    config : DecodeConfig
        The search.

    Returns
    -------
    int
        ``max_tokens`` for greedy and beam search; for sampling and MBR, scaled down so a batch decodes
        about as many rows as beam search of size 4 would.

    Notes
    -----
    Sampling decodes ``nbest`` rows per sentence and MBR ``mbr``; at N = 32 an unscaled batch would hold
    eight times beam 4's rows, each with its own self-attention cache (gigabytes for a 4,096-token batch of a
    4-layer model). Both engines' translators batch by it.
    """
    rows = config.mbr or (config.nbest if config.sampling else 0)
    return max(1, max_tokens * 4 // rows) if rows > 4 else max_tokens
