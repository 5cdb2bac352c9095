"""Translate raw text with an ONNX export: our tokenizer and searches, onnxruntime's arithmetic.

``transformer translate|evaluate|serve --engine onnxruntime --checkpoint EXPORT_DIR``. The searches are the
PyTorch engine's own (:func:`~transformer.decoding.batch_search.search_batch`), so every setting of a
:class:`~transformer.config.decode.DecodeConfig` means the same here: beam, greedy, sampling, MBR, length
penalties of both forms, n-best lists, prefixes and glossaries. What needs the PyTorch model's attention
(alignments, quality flags) is refused.
"""

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from transformer.checkpoint.model_checkpoint import load_checkpoint_tokenizer
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.batch import pad_sequences
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.batch_search import batch_budget, encode_request, search_batch
from transformer.decoding.candidate import Candidate
from transformer.decoding.glossary import Glossary, word_continuation_ids
from transformer.decoding.inference_models import DEFAULT_MAX_INPUT_TOKENS
from transformer.decoding.pausing_step_model import PausingStepModel
from transformer.decoding.quality_flags import FlagThresholds
from transformer.decoding.search import Hypothesis, NonFiniteScoresError
from transformer.decoding.step_model import StepModel
from transformer.decoding.step_perplexity import step_model_perplexity
from transformer.evaluation.perplexity import PerplexityResult
from transformer.interop.onnx_step_model import OnnxModel, OnnxStepModel
from transformer.model.config import TransformerConfig
from transformer.typed_fields import build_dataclass


class OnnxTranslator:
    """Turn sentences into translations with an ONNX export and our searches.

    Parameters
    ----------
    model : OnnxModel
        The loaded export.
    tokenizer : TextTokenizer
        The tokenizer stored beside it.
    decode_config : DecodeConfig or None
        Search settings; the paper's by default (:meth:`from_directory` passes the checkpoint's).
    max_tokens : int
        Source tokens per batch (padded), as for the PyTorch translator.

    Notes
    -----
    Inputs are cut at ``max_input_tokens`` (the PyTorch translator's default, or the exported position
    table when smaller), counted in ``truncated_count``, so both engines translate the same ids. Implements
    :class:`~transformer.decoding.text_translator.TextTranslator`.
    """

    def __init__(
        self,
        model: OnnxModel,
        tokenizer: TextTokenizer,
        decode_config: DecodeConfig | None = None,
        max_tokens: int = 4096,
    ) -> None:
        if tokenizer.vocab_size != model.config.tgt_vocab_size:
            raise ValueError(
                f"tokenizer has {tokenizer.vocab_size} pieces, the model {model.config.tgt_vocab_size} outputs"
            )
        self.model = model
        self.step_model = OnnxStepModel(model)
        self.tokenizer = tokenizer
        self.decode_config = decode_config or DecodeConfig()
        self.max_tokens = max_tokens
        self.max_input_tokens = min(DEFAULT_MAX_INPUT_TOKENS, model.max_positions)
        self.truncated_count = 0
        self._word_continuations: list[int] | None = None

    @property
    def config(self) -> TransformerConfig:
        """The exported model's config.

        Returns
        -------
        TransformerConfig
            Special ids, layers and vocabulary sizes, as the checkpoint stored them.

        Notes
        -----
        What the server reads from any engine's model (``engine_model.config.eos_id``).
        """
        return self.model.config

    @classmethod
    def from_directory(
        cls, directory: str | Path, precision: str = "fp32", threads: int = 0, spin: bool = False
    ) -> "OnnxTranslator":
        """Load an export written by ``transformer convert --to onnx``, with its checkpoint's search settings.

        Parameters
        ----------
        directory : str or Path
            The export.
        precision : {"fp32", "int8"}
            Which graphs to run (:meth:`OnnxModel.from_directory`).
        threads : int
            onnxruntime's intra-op threads; 0 takes PyTorch's count.
        spin : bool
            Let those threads spin-wait (onnxruntime's default; off here, see :meth:`OnnxModel.from_directory`).

        Returns
        -------
        OnnxTranslator
            Ready to translate.

        Raises
        ------
        ValueError
            Naming the directory when it is not an ONNX export, or the precision it lacks.
        ImportError
            When the ``onnx`` extra is not installed.

        Notes
        -----
        The search settings are those the checkpoint's run decoded with (the paper's when it kept none), as
        ``Translator.from_checkpoint`` takes them; command-line flags apply over them.
        """
        directory = Path(directory)
        model = OnnxModel.from_directory(directory, precision, threads, spin)  # reads onnx_export.json once
        decode_values = model.description.get("decode")
        decode_config = build_dataclass(DecodeConfig, decode_values) if decode_values else None
        return cls(model, load_checkpoint_tokenizer(directory), decode_config)

    def translate(
        self,
        sentences: Sequence[str],
        progress: Callable[[int], None] | None = None,
        prefixes: Sequence[str] | None = None,
        glossary: Glossary | None = None,
    ) -> list[str]:
        """Translate sentences, returning the best translation of each in input order.

        Parameters
        ----------
        sentences : sequence of str
            Raw source sentences.
        progress : callable or None
            Called with the number of sentences each finished batch held.
        prefixes : sequence of str or None
            A target prefix per sentence (an empty string for none).
        glossary : Glossary or None
            Target terms the translations must use (beam search only).

        Returns
        -------
        list of str
            Detokenised translations; empty for empty inputs.

        Notes
        -----
        An empty string also stands for a sentence with no finite-probability translation, as in
        ``Translator.translate``.
        """
        return [
            candidates[0].text if candidates else ""
            for candidates in self.translate_nbest(sentences, progress, prefixes, glossary=glossary)
        ]

    def translate_nbest(
        self,
        sentences: Sequence[str],
        progress: Callable[[int], None] | None = None,
        prefixes: Sequence[str] | None = None,
        alignment_layer: int | None = None,
        flags: FlagThresholds | None = None,
        glossary: Glossary | None = None,
    ) -> list[list[Candidate]]:
        """Translate sentences, returning ``decode_config.nbest`` candidates each, best first.

        Parameters
        ----------
        sentences : sequence of str
            Raw source sentences.
        progress : callable or None
            Called with the number of sentences each batch held (empty lines counted first).
        prefixes : sequence of str or None
            One raw target prefix per sentence (an empty string for none).
        alignment_layer : int or None
            Must be None: alignments read the PyTorch model's cross-attention.
        flags : FlagThresholds or None
            Must be None: flags read the PyTorch model's attention and teacher-forced passes.
        glossary : Glossary or None
            Each sentence's matched terms must appear in its translation (beam search only).

        Returns
        -------
        list of list of Candidate
            Per input sentence in input order; an empty list for an empty input.

        Raises
        ------
        ValueError
            For alignments or flags, prefixes not one per sentence, a glossary with greedy search, sampling
            or MBR, or NaN scores.
        PrefixTooLongError
            For a prefix longer than any translation may be.

        Notes
        -----
        Batches are formed as the PyTorch translator forms them (longest first, ``max_tokens`` padded source
        tokens each, less for sampling and MBR: :func:`~transformer.decoding.batch_search.batch_budget`) and
        run one after another on onnxruntime's threads.
        """
        if alignment_layer is not None or flags is not None:
            raise ValueError(
                "--alignments and --flags read the PyTorch model's attention: use --engine pytorch"
            )
        output_limit = self.step_model.max_output_length
        request = encode_request(
            sentences, self.encode, self.tokenizer, self.decode_config, batch_budget(self.max_tokens, self.decode_config),
            self.max_input_tokens,
            output_limit, prefixes, glossary,
        )  # fmt: skip
        if progress is not None:
            progress(len(sentences) - sum(len(batch) for batch in request.batches))
        results: list[list[Candidate]] = [[] for _ in sentences]
        for batch in request.batches:
            sources, batch_prefixes, terms = request.batch(batch)
            hypotheses = self.search_tokens(
                pad_sequences(sources, self.model.config.pad_id), batch_prefixes, terms=terms
            )
            for index, sentence in zip(batch, hypotheses, strict=True):
                results[index] = [
                    Candidate.from_hypothesis(item, self._detokenize(item.tokens)) for item in sentence
                ]
            if progress is not None:
                progress(len(batch))
        return results

    def search_tokens(
        self,
        src_tokens: torch.Tensor,
        prefixes: Sequence[Sequence[int]] | None = None,
        config: DecodeConfig | None = None,
        between_steps: Callable[[], None] | None = None,
        terms: Sequence[Sequence[Sequence[int]]] | None = None,
    ) -> list[list[Hypothesis]]:
        """Search one batch of encoded sentences, as ``Translator.search_tokens`` does.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source ids ending with EOS, right-padded with the pad id.
        prefixes : sequence of sequence of int or None
            A forced target prefix per sentence (token ids; empty for none).
        config : DecodeConfig or None
            The search; None uses ``decode_config``.
        between_steps : callable or None
            Called before the encoder and every decoder step (a server's other work); may raise to abandon.
        terms : sequence of sequence of sequence of int or None
            Per sentence, target phrases its output must contain.

        Returns
        -------
        list of list of Hypothesis
            Per sentence, ``config.nbest`` hypotheses, best first.

        Raises
        ------
        ValueError
            When the export's scores are NaN (naming the export's precision).

        Notes
        -----
        The server's request batches call this, so a request gets the translation ``translate`` gives.
        """
        config = config if config is not None else self.decode_config

        def make_step_model(extra_tokens: Sequence[Sequence[int]] | None = None) -> StepModel[Any]:
            return PausingStepModel(self.step_model, between_steps) if between_steps else self.step_model

        try:
            return search_batch(
                make_step_model, src_tokens, config, self._detokenize, prefixes, terms, self._continuations,
                between_steps,
            )  # fmt: skip
        except NonFiniteScoresError as error:
            raise ValueError(f"the ONNX export ({self.model.precision}): {error}") from None

    def reference_perplexity(self, pairs: Sequence[tuple[str, str]]) -> PerplexityResult:
        """Score reference translations by teacher forcing through the decoder-step graph.

        Parameters
        ----------
        pairs : sequence of (str, str)
            Source sentence and reference translation.

        Returns
        -------
        PerplexityResult
            NLL per target token and perplexity.

        Notes
        -----
        :func:`~transformer.decoding.step_perplexity.step_model_perplexity`; pairs beyond the exported position
        table are left out (``num_pairs`` says).
        """
        return step_model_perplexity(self.step_model, self.tokenizer, pairs, self.model.max_positions)

    def encode(self, sentence: str) -> list[int]:
        """Encode one sentence as source ids, EOS appended, as the PyTorch translator encodes it.

        Parameters
        ----------
        sentence : str
            Raw source sentence.

        Returns
        -------
        list of int
            Source ids ending with EOS, cut to ``max_input_tokens`` (counted in ``truncated_count``); empty
            for a blank sentence.

        Notes
        -----
        The same ids as ``Translator``'s, so a parity test compares searches, not tokenisations.
        """
        if not sentence.strip():
            return []
        ids = self.tokenizer.encode(sentence.strip())
        if len(ids) + 1 > self.max_input_tokens:
            ids = ids[: self.max_input_tokens - 1]
            self.truncated_count += 1
        return [*ids, self.model.config.eos_id]

    def _detokenize(self, tokens: list[int]) -> str:
        """Turn output ids into the text a user sees."""
        return self.tokenizer.decode(tokens).strip()

    def _continuations(self) -> list[int]:
        """List the pieces a glossary's completed term may not be glued to (a pass over the vocabulary, once)."""
        if self._word_continuations is None:
            self._word_continuations = word_continuation_ids(self.tokenizer)
        return self._word_continuations
