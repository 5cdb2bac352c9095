"""What the file-level workflows need of a translator, whichever engine it runs on.

``transformer translate`` (:func:`~transformer.decoding.file_translation.translate_file`) and ``transformer
evaluate`` (:func:`~transformer.decoding.translation_evaluation.evaluate_translator`) take any
:class:`TextTranslator`: the PyTorch :class:`~transformer.decoding.translator.Translator` or the onnxruntime
:class:`~transformer.interop.onnx_translation.OnnxTranslator`.
"""

from collections.abc import Callable, Sequence
from typing import Protocol

from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.candidate import Candidate
from transformer.decoding.glossary import Glossary
from transformer.decoding.quality_flags import FlagThresholds
from transformer.evaluation.perplexity import PerplexityResult


class TextTranslator(Protocol):
    """Raw sentences in, candidates out, and the model's perplexity of references.

    Notes
    -----
    The two implementations document each method; this protocol only fixes their shared signatures, so a
    workflow typed with it runs on either engine. An engine that cannot produce an output (alignments or
    flags from onnxruntime, which exposes no attention) refuses it naming the option.
    """

    decode_config: DecodeConfig
    tokenizer: TextTokenizer
    truncated_count: int
    max_input_tokens: int

    def translate(
        self,
        sentences: Sequence[str],
        progress: Callable[[int], None] | None = None,
        prefixes: Sequence[str] | None = None,
        glossary: Glossary | None = None,
    ) -> list[str]:
        """Translate sentences, the best translation of each in input order.

        Parameters
        ----------
        sentences : sequence of str
            Raw source sentences.
        progress : callable or None
            Called with the number of sentences each finished batch held.
        prefixes : sequence of str or None
            A target prefix per sentence.
        glossary : Glossary or None
            Target terms the translations must use.

        Returns
        -------
        list of str
            Detokenised translations; empty for empty inputs.

        Notes
        -----
        An empty string also stands for a sentence with no finite-probability translation;
        :meth:`translate_nbest` tells the two apart.
        """
        ...

    def translate_nbest(
        self,
        sentences: Sequence[str],
        progress: Callable[[int], None] | None = None,
        prefixes: Sequence[str] | None = None,
        alignment_layer: int | None = None,
        flags: FlagThresholds | None = None,
        glossary: Glossary | None = None,
    ) -> list[list[Candidate]]:
        """Translate sentences, ``decode_config.nbest`` candidates each, best first.

        Parameters
        ----------
        sentences : sequence of str
            Raw source sentences.
        progress : callable or None
            Called with the number of sentences each finished batch held.
        prefixes : sequence of str or None
            A target prefix per sentence.
        alignment_layer : int or None
            Also align each candidate with this decoder layer's cross-attention.
        flags : FlagThresholds or None
            Also flag omissions, hallucinations and loops.
        glossary : Glossary or None
            Target terms the translations must use.

        Returns
        -------
        list of list of Candidate
            Per input sentence in input order; an empty list for an empty input.

        Notes
        -----
        Inputs longer than ``max_input_tokens`` are cut, counted in ``truncated_count``, so both engines
        translate the same ids.
        """
        ...

    def reference_perplexity(self, pairs: Sequence[tuple[str, str]]) -> PerplexityResult:
        """Score reference translations by teacher forcing.

        Parameters
        ----------
        pairs : sequence of (str, str)
            Source sentence and reference translation.

        Returns
        -------
        PerplexityResult
            NLL per target token and perplexity (of the first model of an ensemble).

        Notes
        -----
        Per target BPE token, so it compares models with the same vocabulary only.
        """
        ...
