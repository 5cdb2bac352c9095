"""Translate raw text with a trained checkpoint: BPE-encode, search, decode, keep the input order."""

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from transformer.architectures import SequenceModel
from transformer.autotune.linear_probe import check_fp32_kernels
from transformer.checkpoint.layout import MODEL_FILE
from transformer.checkpoint.model_checkpoint import load_checkpoint, load_checkpoint_tokenizer
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.batch import pad_sequences
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.data.shortlist import Shortlist
from transformer.decoding.alignment import align_candidates, check_alignment_layer
from transformer.decoding.batch_search import batch_budget, encode_request, search_batch
from transformer.decoding.batch_workers import run_batches
from transformer.decoding.candidate import Candidate
from transformer.decoding.ensemble import EnsembleStepModel, check_ensemble, check_ensemble_vocabularies
from transformer.decoding.glossary import Glossary, word_continuation_ids
from transformer.decoding.inference_models import (
    TRANSLATION_PRECISIONS,
    check_precision,
    checkpoint_shortlist,
    input_token_limit,
    prepare_for_inference,
)
from transformer.decoding.pausing_step_model import PausingStepModel
from transformer.decoding.quality_flags import FlagThresholds, flag_candidates
from transformer.decoding.search import Hypothesis, NonFiniteScoresError
from transformer.decoding.shortlist import ShortlistStepModel, check_shortlist
from transformer.decoding.step_model import StepModel, TransformerStepModel, as_step_model
from transformer.device import resolve_device
from transformer.evaluation.perplexity import PerplexityResult, corpus_perplexity
from transformer.kernels.native_step import NativeDecoderStep, native_decoder_step
from transformer.model.transformer import Transformer


class Translator:
    """Turn sentences into translations with a model, its tokenizer and search settings.

    Parameters
    ----------
    model : Transformer or RNNEncoderDecoder
        A trained model (moved to ``device`` and put in eval mode).
    tokenizer : TextTokenizer
        Its tokenizer (this project's joint BPE, or a converted Marian vocabulary).
    decode_config : DecodeConfig or None
        Search settings; the paper's (beam 4, alpha 0.6, input length + 50) by default.
    device : str
        "auto", "cpu", "cuda" or "cuda:N".
    precision : {"fp32", "bf16", "int8"}
        "fp32"; "bf16" (weights cast to bf16: faster on CPUs with AMX and on GPUs, slower on CPUs with
        AVX-512 BF16 alone, refused on CPUs without native bf16, where it is only emulated);
        or "int8" (CPU only: linear layers, the output projection included, with int8 weights and
        activations, see :func:`transformer.model.quantization.quantize_for_inference`; Transformers only).
    max_tokens : int
        Source-token budget per batch (times the beam size in rows decoded together).
    max_input_tokens : int or None
        Longer inputs are truncated to this many BPE tokens (EOS included); defaults to the learned position
        table's size, or 1,024 with sinusoidal encodings. ``truncated_count`` tells how many were cut.
    ensemble : sequence of model
        More models decoded together with ``model`` (an ensemble), each placed and quantised like it; they
        must have its target vocabulary and special ids.
    ensemble_mode : {"prob", "logprob"}
        How the ensemble averages (:class:`~transformer.decoding.ensemble.EnsembleStepModel`).
    shortlist : Shortlist or None
        A vocabulary shortlist (:func:`~transformer.decoding.checkpoint_shortlist.load_checkpoint_shortlist`):
        every search scores each sentence over its shortlist only; None scores the whole vocabulary.
    fp32_kernels : {"auto", "mkl", "onednn"}
        At fp32 on the CPU, the kernel of each Transformer linear layer: "auto" times MKL's sgemm against
        oneDNN's packed linear per product shape (cached per machine,
        :func:`~transformer.autotune.linear_probe.prepare_fp32_kernels`); the others force one kernel
        ("onednn" only at fp32 on the CPU). ``kernel_notes`` says what was chosen, and whether each model's
        encoder and decoder step run in C++ (:mod:`transformer.kernels.native_step`, on the CPU: the same
        bits, less time) or in Python, and why.
    workers : int
        Batches searched at once, each in its own thread (:mod:`~transformer.decoding.batch_workers`); the
        caller gives each its share of PyTorch's threads (``torch.set_num_threads(cpus // workers)``). The
        translations do not depend on it.

    Raises
    ------
    ValueError
        For a shortlist built for another vocabulary (naming both fingerprints) or with a recurrent model,
        an unknown precision, "bf16" where the device has no native bf16, or "int8" on a GPU or for a
        model other than a Transformer (the recurrent baseline's LSTMs have no int8 kernels here).

    Notes
    -----
    Inputs are sorted by length for batching and the outputs put back in input order. An empty or
    whitespace-only line translates to an empty line without running the model. ``model`` itself is cast
    (bf16) or has its linear layers replaced (int8); pass a copy to keep the original.
    """

    def __init__(
        self,
        model: SequenceModel,
        tokenizer: TextTokenizer,
        decode_config: DecodeConfig | None = None,
        device: str = "auto",
        precision: str = "fp32",
        max_tokens: int = 4096,
        max_input_tokens: int | None = None,
        ensemble: Sequence[SequenceModel] = (),
        ensemble_mode: str = "prob",
        shortlist: Shortlist | None = None,
        fp32_kernels: str = "auto",
        workers: int = 1,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers={workers} must be at least 1")
        if precision not in TRANSLATION_PRECISIONS:
            raise ValueError(f"precision={precision!r} is not one of {TRANSLATION_PRECISIONS}")
        check_fp32_kernels(fp32_kernels)
        if tokenizer.vocab_size != model.config.tgt_vocab_size:
            raise ValueError(
                f"tokenizer has {tokenizer.vocab_size} pieces, the model {model.config.tgt_vocab_size} outputs"
            )
        self.device = resolve_device(device, option="device")
        check_precision(precision, self.device, [model, *ensemble])
        check_ensemble(model, ensemble, ensemble_mode)
        if shortlist is not None:
            check_shortlist(shortlist, [model, *ensemble], tokenizer)
        #: The vocabulary shortlist every search scores over (:mod:`transformer.decoding.shortlist`), or None.
        self.shortlist = shortlist
        if fp32_kernels == "onednn" and (precision != "fp32" or self.device.type != "cpu"):
            raise ValueError(
                f"fp32_kernels 'onednn' applies to precision 'fp32' on the CPU, not {precision!r} on {self.device}"
            )
        self.precision = precision
        self.fp32_kernels = fp32_kernels
        #: What ``fp32_kernels`` chose, one line per product shape (empty where it does not apply).
        self.kernel_notes: list[str] = []
        #: The C++ decoder step of each model it covers on the CPU, by ``id`` of the prepared model.
        self.native_steps: dict[int, NativeDecoderStep] = {}
        self.model: SequenceModel = self._prepare(model)
        #: Every model decoded, ``model`` first; one model alone is not wrapped in an ensemble.
        self.models: list[SequenceModel] = [self.model, *(self._prepare(member) for member in ensemble)]
        self.ensemble_mode = ensemble_mode
        self.tokenizer = tokenizer
        self.decode_config = decode_config or DecodeConfig()
        self.max_tokens = max_tokens
        self.workers = workers
        self.max_input_tokens = input_token_limit([model, *ensemble], max_input_tokens)
        self.truncated_count = 0
        #: The weights file the model came from, named when its scores turn out NaN (set by from_checkpoint).
        self.weights_file: Path | None = None
        self._word_continuations: list[int] | None = None  # the pieces a glossary's term may not be glued to

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        decode_config: DecodeConfig | None = None,
        device: str = "auto",
        precision: str = "fp32",
        shortlist: bool | str | Path = False,
        fp32_kernels: str = "auto",
    ) -> "Translator":
        """Load a translator from a checkpoint directory or a run directory (its best checkpoint).

        Parameters
        ----------
        path : str or Path
            Checkpoint or run directory.
        decode_config : DecodeConfig or None
            Search settings; None takes the checkpoint's (its run's ``decode`` section), else the paper's.
        device : str
            Device setting.
        precision : {"fp32", "bf16", "int8"}
            See :class:`Translator`; "int8" quantises the loaded float32 weights.
        shortlist : bool, str or Path
            True decodes with the checkpoint's vocabulary shortlist (``shortlist.safetensors`` beside its
            weights, built by ``transformer shortlist``); a path reads that shortlist file; False (the
            default) scores the whole vocabulary.
        fp32_kernels : {"auto", "mkl", "onednn"}
            See :class:`Translator`.

        Returns
        -------
        Translator
            Ready to translate.

        Notes
        -----
        Uses the tokenizer stored in the checkpoint, so ids always match the weights. Damaged weights are
        refused when loaded (:func:`~transformer.checkpoint.model_checkpoint.load_checkpoint`); a model that still computes NaN
        scores stops translating with an error naming its weights file.
        """
        checkpoint = load_checkpoint(Path(path))
        tokenizer = load_checkpoint_tokenizer(checkpoint.path)
        decode_config = decode_config or checkpoint.decode_config
        table = checkpoint_shortlist(
            checkpoint.path, tokenizer, checkpoint.model_config.src_vocab_size, shortlist
        )
        model = checkpoint.build_model()
        translator = cls(
            model, tokenizer, decode_config, device, precision, shortlist=table, fp32_kernels=fp32_kernels
        )
        translator.weights_file = checkpoint.path / MODEL_FILE
        return translator

    @classmethod
    def from_checkpoints(
        cls,
        paths: Sequence[str | Path],
        decode_config: DecodeConfig | None = None,
        device: str = "auto",
        precision: str = "fp32",
        ensemble_mode: str = "prob",
        shortlist: bool | str | Path = False,
        fp32_kernels: str = "auto",
    ) -> "Translator":
        """Load an ensemble of checkpoints (one path is the same as :meth:`from_checkpoint`).

        Parameters
        ----------
        paths : sequence of str or Path
            Checkpoint or run directories, at least one; the first one's tokenizer and search settings are
            used.
        decode_config : DecodeConfig or None
            Search settings; None takes the first checkpoint's.
        device : str
            Device setting.
        precision : {"fp32", "bf16", "int8"}
            Applied to every model.
        ensemble_mode : {"prob", "logprob"}
            How the models' distributions are averaged.
        shortlist : bool, str or Path
            As for :meth:`from_checkpoint`: the first checkpoint's shortlist (True) or a file, or none.
        fp32_kernels : {"auto", "mkl", "onednn"}
            See :class:`Translator`; applied to every model.

        Returns
        -------
        Translator
            Ready to translate with every model.

        Raises
        ------
        ValueError
            For no checkpoint, or naming the checkpoint and the first piece that differs when the tokenizers
            differ.

        Notes
        -----
        Every model reads the same source ids and must output the same target ids, so the checkpoints'
        tokenizers must have the same vocabulary. Models may otherwise differ (sizes, layers, training runs).
        """
        if not paths:
            raise ValueError("an ensemble needs at least one checkpoint")
        checkpoints = [load_checkpoint(Path(path)) for path in paths]
        tokenizers = [load_checkpoint_tokenizer(checkpoint.path) for checkpoint in checkpoints]
        models = [checkpoint.build_model() for checkpoint in checkpoints]
        check_ensemble_vocabularies(paths, tokenizers, models)
        settings = decode_config or checkpoints[0].decode_config
        source_size = checkpoints[0].model_config.src_vocab_size
        table = checkpoint_shortlist(checkpoints[0].path, tokenizers[0], source_size, shortlist)
        translator = cls(
            models[0],
            tokenizers[0],
            settings,
            device,
            precision,
            ensemble=models[1:],
            ensemble_mode=ensemble_mode,
            shortlist=table,
            fp32_kernels=fp32_kernels,
        )
        translator.weights_file = checkpoints[0].path / MODEL_FILE
        return translator

    def _prepare(self, model: SequenceModel) -> SequenceModel:
        """Move a model to the device, cast or quantise it for ``precision``, and put it in eval mode."""
        prepared, notes = prepare_for_inference(model, self.device, self.precision, self.fp32_kernels)
        self.kernel_notes += notes
        if isinstance(prepared, Transformer) and self.device.type == "cpu":
            native_step, note = native_decoder_step(prepared)
            self.kernel_notes.append(note)
            if native_step is not None:
                self.native_steps[id(prepared)] = native_step
        return prepared

    def batch_budget(self) -> int:
        """Source tokens per batch: ``max_tokens``, cut for searches with many rows per sentence.

        Returns
        -------
        int
            ``max_tokens`` for greedy and beam search; for sampling and MBR, scaled down so a batch decodes
            about as many rows as beam search of size 4 would.

        Notes
        -----
        Sampling and MBR decode ``nbest`` or ``mbr`` rows per sentence, each with its own self-attention cache,
        so their batches hold fewer sentences (:func:`~transformer.decoding.batch_search.batch_budget`, which
        the ONNX engine's translator uses too).
        """
        return batch_budget(self.max_tokens, self.decode_config)

    def step_model(
        self, use_cache: bool | None = None, extra_tokens: Sequence[Sequence[int]] | None = None
    ) -> StepModel[Any]:
        """Return what the searches decode: the model's step model, or the ensemble of every model's.

        Parameters
        ----------
        use_cache : bool or None
            Incremental decoding; None follows ``decode_config.use_cache``.
        extra_tokens : sequence of sequence of int or None
            With a shortlist, per sentence of the search, target ids its shortlist must also hold (a
            glossary's terms); ignored without one.

        Returns
        -------
        StepModel
            A :class:`~transformer.decoding.step_model.TransformerStepModel` (or the model's own), or an
            :class:`~transformer.decoding.ensemble.EnsembleStepModel` when there are several models.

        Notes
        -----
        Built per call, so changing the settings takes effect at once; the step model holds no state between
        searches.
        """
        use_cache = self.decode_config.use_cache if use_cache is None else use_cache
        members = [self._member_step_model(model, use_cache, extra_tokens) for model in self.models]
        return members[0] if len(members) == 1 else EnsembleStepModel(members, self.ensemble_mode)

    def _member_step_model(
        self, model: SequenceModel, use_cache: bool, extra_tokens: Sequence[Sequence[int]] | None = None
    ) -> StepModel[Any]:
        """One model's step model: restricted to the shortlist when there is one (Transformers only)."""
        if self.shortlist is not None and isinstance(model, Transformer):
            native = self.native_steps.get(id(model))
            return ShortlistStepModel(model, self.shortlist, use_cache, native, extra_tokens)
        if isinstance(model, Transformer):
            return TransformerStepModel(model, use_cache, self.native_steps.get(id(model)))
        return as_step_model(model, use_cache)

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
            Raw (untokenised) source sentences.
        progress : callable or None
            Called with the number of sentences each finished batch held (see :meth:`translate_nbest`).
        prefixes : sequence of str or None
            A target prefix per sentence (see :meth:`translate_nbest`).
        glossary : Glossary or None
            Target terms the translations must use (see :meth:`translate_nbest`).

        Returns
        -------
        list of str
            Detokenised translations; empty for empty inputs.

        Notes
        -----
        An empty string also stands for a sentence the search found no finite-probability translation for;
        :meth:`translate_nbest` tells the two apart (an empty candidate list) and gives scores.
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
            Called after each batch with the number of sentences it held (empty lines, which need no search,
            are counted before the first), so a caller can show progress; the library itself never prints.
        prefixes : sequence of str or None
            One raw target prefix per sentence (an empty string for none): each translation starts with it
            and the search continues from there (interactive translation).
        alignment_layer : int or None
            Also compute each candidate's word alignment from this decoder layer's cross-attention
            (negative counts from the end; :mod:`~transformer.decoding.alignment`); None skips it.
        flags : FlagThresholds or None
            Also flag each candidate's omissions, hallucinations and loops at these thresholds
            (:mod:`~transformer.decoding.quality_flags`: two teacher-forced passes per batch); None skips it.
        glossary : Glossary or None
            Each sentence's matched terms' targets must appear in its translation
            (:mod:`~transformer.decoding.glossary`; the constrained search runs only for sentences that
            match a term). Needs beam search.

        Returns
        -------
        list of list of Candidate
            Per input sentence in input order; an empty list for an empty input.

        Raises
        ------
        ValueError
            Naming its weights file when a model's scores are NaN; when the prefixes are not one per sentence,
            the alignment layer does not exist, or a glossary comes with greedy search, sampling or MBR.
        PrefixTooLongError
            Before any search, for a prefix of more tokens than any translation may have:
            ``max_input_tokens + max_length_offset``, or a learned position table's size when smaller.

        Notes
        -----
        Batches hold sentences of similar length, at most ``max_tokens`` source tokens (padded) each, so a
        long input does not pad a batch of short ones. Inputs longer than ``max_input_tokens`` are cut
        silently; ``truncated_count`` adds them up over every call on this translator. A model whose scores
        are NaN (damaged or overflowing weights) is an error, never empty translations. A prefix is encoded as
        target text on its own, so a prefix ending in the middle of a word may be split into other subwords
        than the whole word would be; end prefixes at a word boundary. An empty source line stays empty
        whatever its prefix.
        """
        if alignment_layer is not None:
            check_alignment_layer(self.model, alignment_layer)
        output_limit = getattr(self.step_model(), "max_output_length", None) if prefixes is not None else None
        request = encode_request(
            sentences, self._encode, self.tokenizer, self.decode_config, self.batch_budget(),
            self.max_input_tokens, output_limit, prefixes, glossary,
        )  # fmt: skip
        if progress is not None:
            progress(len(sentences) - sum(len(batch) for batch in request.batches))  # empty lines: no search

        def translate_batch(batch_indices: list[int]) -> list[list[Candidate]]:
            sources, batch_prefixes, terms = request.batch(batch_indices)
            return self._translate_batch(sources, batch_prefixes, alignment_layer, flags, terms)

        results: list[list[Candidate]] = [[] for _ in sentences]
        found = run_batches(
            request.batches, translate_batch, self.workers, progress
        )  # in the order of batches
        for batch_indices, candidates in zip(request.batches, found, strict=True):
            for index, sentence_candidates in zip(batch_indices, candidates, strict=True):
                results[index] = sentence_candidates
        return results

    def _translate_batch(
        self,
        sources: list[list[int]],
        prefixes: list[list[int]] | None,
        alignment_layer: int | None,
        flags: FlagThresholds | None,
        terms: list[list[list[int]]],
    ) -> list[list[Candidate]]:
        """Search one batch of encoded sentences and detokenise it (a worker's job in translate_nbest)."""
        src_tokens = pad_sequences(sources, self.model.config.pad_id).to(self.device)
        hypotheses = self.search_tokens(src_tokens, prefixes, terms=terms if any(terms) else None)
        candidates = [
            [Candidate.from_hypothesis(item, self._detokenize(item.tokens)) for item in sentence]
            for sentence in hypotheses
        ]
        if alignment_layer is not None:
            candidates = align_candidates(self.model, self.tokenizer, src_tokens, candidates, alignment_layer)
        if flags is not None:
            candidates = flag_candidates(self.model, self.tokenizer, src_tokens, candidates, flags)
        return candidates

    def reference_perplexity(self, pairs: Sequence[tuple[str, str]]) -> PerplexityResult:
        """Score reference translations by teacher forcing (``transformer evaluate``'s perplexity).

        Parameters
        ----------
        pairs : sequence of (str, str)
            Source sentence and reference translation.

        Returns
        -------
        PerplexityResult
            The first model's NLL per target token and perplexity.

        Notes
        -----
        An ensemble translates together, but its perplexity is the first model's alone: teacher-forced
        scoring of an ensemble is another quantity (:func:`~transformer.evaluation.perplexity.corpus_perplexity`).
        """
        return corpus_perplexity(self.model, self.tokenizer, pairs)

    def search_tokens(
        self,
        src_tokens: torch.Tensor,
        prefixes: Sequence[Sequence[int]] | None = None,
        config: DecodeConfig | None = None,
        between_steps: Callable[[], None] | None = None,
        terms: Sequence[Sequence[Sequence[int]]] | None = None,
    ) -> list[list[Hypothesis]]:
        """Search one batch of encoded sentences: MBR when ``config.mbr``, else sampling, greedy or beam.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids ending with EOS, right-padded with the pad id, on the translator's device.
        prefixes : sequence of sequence of int, optional
            A forced target prefix per sentence (token ids; empty for none).
        config : DecodeConfig, optional
            The search; None uses ``decode_config``.
        between_steps : callable or None
            Called before the encoder, before every decoder step and before each MBR sentence's utilities
            (:class:`~transformer.decoding.pausing_step_model.PausingStepModel`); it may raise to abandon the
            search. None calls nothing.
        terms : sequence of sequence of sequence of int or None
            Per sentence, target phrases (token ids) its output must contain
            (:func:`~transformer.decoding.constrained_beam_search.search_with_terms`); None for none.

        Returns
        -------
        list of list of Hypothesis
            Per sentence, ``config.nbest`` hypotheses, best first (MBR: by expected utility).

        Raises
        ------
        ValueError
            Naming the weights file when a model's scores are NaN.

        Notes
        -----
        What :meth:`translate_nbest` runs per batch, for callers that batch and encode themselves: the
        server runs the searches its step-level batching does not (sampling, MBR, prefixes, n-gram blocking,
        ensembles) through here, so each gives the translation ``transformer translate`` gives, and its
        ``between_steps`` runs the other clients' decoder steps, so such a search does not stall them.
        """
        config = config if config is not None else self.decode_config

        def make_step_model(extra_tokens: Sequence[Sequence[int]] | None = None) -> StepModel[Any]:
            step_model = self.step_model(config.use_cache, extra_tokens)
            return PausingStepModel(step_model, between_steps) if between_steps is not None else step_model

        try:
            return search_batch(
                make_step_model, src_tokens, config, self._detokenize, prefixes, terms, self._continuations,
                between_steps,
            )  # fmt: skip
        except NonFiniteScoresError as error:
            raise ValueError(f"{self.weights_file or 'the model'}: {error}") from None

    def _continuations(self) -> list[int]:
        """List the pieces a glossary's completed term may not be glued to (a pass over the vocabulary, once)."""
        if self._word_continuations is None:
            self._word_continuations = word_continuation_ids(self.tokenizer)
        return self._word_continuations

    def _detokenize(self, tokens: list[int]) -> str:
        """Turn output ids into the text a user sees (what MBR's utilities compare)."""
        return self.tokenizer.decode(tokens).strip()

    def _encode(self, sentence: str) -> list[int]:
        if not sentence.strip():
            return []
        ids = self.tokenizer.encode(sentence.strip())
        if len(ids) + 1 > self.max_input_tokens:
            ids = ids[: self.max_input_tokens - 1]
            self.truncated_count += 1
        return [*ids, self.model.config.eos_id]
