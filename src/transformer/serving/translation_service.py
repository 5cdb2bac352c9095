"""From texts to translations on the event loop: split, encode, queue, await the worker, join back.

Nothing here runs the model: sentences go to the :class:`~transformer.serving.model_worker.ModelWorker`
and each result comes back through an asyncio future resolved from the worker thread. A request that ends
early (its client disconnected, the await was cancelled) cancels its handle, so its sentences leave the
queue and the running batch.
"""

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from transformer.architectures import SequenceModel
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.alignment import word_alignments
from transformer.decoding.candidate import Candidate
from transformer.decoding.glossary import Glossary
from transformer.decoding.quality_flags import FlagThresholds, forced_signals, sentence_flags
from transformer.serving.continuous_batching import DecodedSentence
from transformer.serving.metrics import ServingMetrics
from transformer.serving.model_worker import ModelWorker
from transformer.serving.omission_retry import retry_omissions as retry_omissions_of
from transformer.serving.sentence_jobs import RequestHandle, SentenceJob, SentenceTiming
from transformer.serving.sentence_splitting import (
    TextPiece,
    join_translations,
    keep_as_one_sentence,
    split_into_sentences,
)
from transformer.serving.served_model import ServedModel
from transformer.serving.translation_cache import TranslationCache

#: Candidates per forced pass (flags, alignments) handed to the worker at once: the pass of a large request
#: is cut into calls of this many, between which the running batch's decoder steps go on.
FORCED_PASS_ROWS = 64


class TranslationError(RuntimeError):
    """The model failed on a sentence (e.g. NaN scores): HTTP 500 with the reason.

    Notes
    -----
    Only the failing request gets it; the worker keeps serving the others.
    """


@dataclass(frozen=True)
class SearchOptions:
    """The per-request search settings a client may choose; None keeps the model's.

    Parameters
    ----------
    beam : int or None
        Beam size (1: greedy).
    nbest : int or None
        Hypotheses (or samples, or MBR's ranked candidates) returned per sentence; None: 1.
    alpha : float or None
        Length penalty.
    sampling : bool or None
        Draw tokens at random (:attr:`~transformer.config.decode.DecodeConfig.sampling`).
    temperature, top_k, top_p, epsilon, seed : float, int, float, float, int, or None
        Sampling settings, as ``transformer translate --temperature`` etc.
    mbr : int or None
        Minimum Bayes risk decoding over this many candidates (0: off).
    mbr_candidates : {"sampling", "beam"} or None
        Where MBR's candidates come from.
    mbr_utility : {"chrf", "bleu"} or None
        MBR's utility.
    no_repeat_ngram : int or None
        Forbid repeating an n-gram of this size (0: off).
    min_length, max_length : int or None
        Output length bounds in tokens (``max_length`` 0: no cap beyond the source-length rule).

    Notes
    -----
    Applied to the model's :class:`~transformer.config.decode.DecodeConfig` with :func:`dataclasses.replace`, so
    the config's own checks (``nbest <= beam_size``, a positive temperature, ...) apply.
    """

    beam: int | None = None
    nbest: int | None = None
    alpha: float | None = None
    sampling: bool | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    epsilon: float | None = None
    seed: int | None = None
    mbr: int | None = None
    mbr_candidates: str | None = None
    mbr_utility: str | None = None
    no_repeat_ngram: int | None = None
    min_length: int | None = None
    max_length: int | None = None

    def decode_config(self, base: DecodeConfig) -> DecodeConfig:
        """Apply the options to a model's search settings.

        Parameters
        ----------
        base : DecodeConfig
            The model's settings.

        Returns
        -------
        DecodeConfig
            The request's settings.

        Raises
        ------
        ValueError
            From DecodeConfig, for inconsistent values (e.g. ``nbest`` above the beam).

        Notes
        -----
        ``nbest`` defaults to 1 whatever the model's, so a plain request gets one translation per sentence.
        """
        overrides = {
            "beam_size": self.beam,
            "length_penalty": self.alpha,
            "sampling": self.sampling,
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "epsilon": self.epsilon,
            "seed": self.seed,
            "mbr": self.mbr,
            "mbr_candidates": self.mbr_candidates,
            "mbr_utility": self.mbr_utility,
            "no_repeat_ngram": self.no_repeat_ngram,
            "min_length": self.min_length,
        }
        chosen: dict[str, Any] = {name: value for name, value in overrides.items() if value is not None}
        if self.max_length is not None:
            chosen["max_length"] = self.max_length or None
        return dataclasses.replace(base, nbest=self.nbest or 1, **chosen)

    @property
    def needs_pytorch(self) -> bool:
        """Whether the options ask for a search only the PyTorch engine runs.

        Returns
        -------
        bool
            True for sampling, MBR or n-gram blocking.

        Notes
        -----
        CTranslate2 runs beam and greedy search with length bounds; its sampling is not ours (no epsilon,
        no per-sentence seed), so it is refused rather than silently different.
        """
        return bool(self.sampling or self.mbr or self.no_repeat_ngram)


@dataclass(frozen=True)
class SentenceTranslation:
    """One sentence of a text and its translations.

    Parameters
    ----------
    source : str
        The sentence as split from the text.
    candidates : list of Candidate
        Best first; empty when the search found no finite-probability translation.
    timing : SentenceTiming
        Queue and decoding time.

    Notes
    -----
    ``candidates[0].text`` is what goes into the joined translation.
    """

    source: str
    candidates: list[Candidate]
    timing: SentenceTiming


@dataclass(frozen=True)
class TextTranslation:
    """The translation of one text: joined in the text's layout, and per sentence.

    Parameters
    ----------
    text : str
        The translated text, with the source's line breaks and spaces.
    sentences : list of SentenceTranslation
        The sentences in order.
    alternatives : list of str
        The text rebuilt from each sentence's 2nd, 3rd, ... candidate (its best where it has fewer).

    Notes
    -----
    ``alternatives`` has ``nbest - 1`` entries: LibreTranslate's ``alternatives`` field.
    """

    text: str
    sentences: list[SentenceTranslation]
    alternatives: list[str]


async def translate_texts(
    texts: list[str],
    model: ServedModel,
    options: SearchOptions,
    worker: ModelWorker,
    metrics: ServingMetrics,
    split: bool = True,
    prefixes: list[str] | None = None,
    alignment_layer: int | None = None,
    flags: FlagThresholds | None = None,
    retry_omissions: bool = False,
    cache: TranslationCache | None = None,
    glossary: Glossary | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[TextTranslation]:
    """Translate texts through the worker, every sentence its own batch row.

    Parameters
    ----------
    texts : list of str
        Texts (paragraphs, lines or single sentences).
    model : ServedModel
        The model to use.
    options : SearchOptions
        The request's search settings.
    worker : ModelWorker
        Where the sentences are decoded.
    metrics : ServingMetrics
        Sentence and token counters.
    split : bool
        Split each text into sentences (True), or take each text as one sentence the client already split.
    prefixes : list of str or None
        One target prefix per text (blank for none): each text is then one sentence, whose translation
        starts with its prefix (interactive translation).
    alignment_layer : int or None
        Also align each candidate's words to the source's with this decoder layer's cross-attention; None
        skips it.
    flags : FlagThresholds or None
        Also flag each candidate's omissions, hallucinations and loops at these thresholds; None skips it.
    retry_omissions : bool
        Retry each sentence whose best translation omits source words in two pieces, keeping the retry when
        it omits fewer (:mod:`~transformer.serving.omission_retry`); flags are then computed (at ``flags``,
        or the defaults) and reported only if ``flags`` asked. Not with prefixes.
    cache : TranslationCache or None
        Answer sentences seen before with the same model and settings from it, and store the others
        (:mod:`~transformer.serving.translation_cache`); None translates every sentence.
    glossary : Glossary or None
        Target terms: each sentence's matched terms must appear in its translation (the constrained search,
        :mod:`~transformer.decoding.glossary`); sentences that match none decode as without it. Not with
        ``retry_omissions`` (the retried pieces would lose their terms; the option is then ignored).
    progress : callable or None
        ``progress(text_index, sentence_index, stable_text)``, called on the event loop each time a sentence's
        certain words grow (:mod:`~transformer.serving.stable_prefix`; every token under greedy search) and
        once with its whole translation when it ends or comes from the cache; ``sentence_index`` counts the
        text's non-blank sentences. Not called with ``retry_omissions``, which may replace a translation
        after it ends. None: no updates.

    Returns
    -------
    list of TextTranslation
        One per text, in order; an empty or blank text gives an empty translation without a model call.

    Notes
    -----
    All sentences are queued at once (all or none: :class:`~transformer.serving.worker_errors.QueueFullError`
    when they do not fit). If this coroutine is cancelled (client gone), the request's handle is cancelled
    and its sentences are dropped. Raises :class:`TranslationError` when the model fails on a sentence.
    """
    config = options.decode_config(model.decode_config)
    split = split and prefixes is None
    pieces = [
        split_into_sentences(text, model.source_lang) if split else keep_as_one_sentence(text)
        for text in texts
    ]
    sentences = [piece.sentence for text_pieces in pieces for piece in text_pieces if piece.sentence]
    sentence_prefixes = [
        model.encode_prefix(prefix)
        for text_pieces, prefix in zip(pieces, prefixes or [""] * len(texts), strict=True)
        for piece in text_pieces
        if piece.sentence
    ]
    retry = retry_omissions and prefixes is None and glossary is None
    sentence_terms = [
        glossary.constraints(sentence, model.tokenizer) if glossary is not None else []
        for sentence in sentences
    ]
    keys = [
        (model.name, config, tuple(prefix), alignment_layer, flags, retry, _terms_key(terms), sentence)
        for sentence, prefix, terms in zip(sentences, sentence_prefixes, sentence_terms, strict=True)
    ]
    cached = [cache.get(key) for key in keys] if cache is not None else [None] * len(keys)
    missing = [index for index, found in enumerate(cached) if found is None]
    report = _reporter(pieces, model, progress) if progress is not None and not retry else None
    for index, found in enumerate(cached):
        if found and report is not None:
            report(index, found[0].tokens)
    jobs, results = await _decode_sentences(
        [sentences[i] for i in missing],
        [sentence_prefixes[i] for i in missing],
        model,
        config,
        worker,
        [sentence_terms[i] for i in missing],
        (lambda position, tokens: report(missing[position], tokens)) if report is not None else None,
    )
    decoded = [
        _sentence_translation(sentences[i], job, found, timing, model, metrics)
        for i, job, (found, timing) in zip(missing, jobs, results, strict=True)
    ]
    metrics.sentences.labels(model.name).inc(len(sentences))
    candidates = await _forced_passes(
        [item.candidates for item in decoded], [job.src_ids for job in jobs], [sentences[i] for i in missing],
        model, config, worker, metrics, alignment_layer, flags, retry,
    )  # fmt: skip
    translations = [
        SentenceTranslation(sentence, found or [], SentenceTiming(0.0, 0.0))
        for sentence, found in zip(sentences, cached, strict=True)
    ]
    for index, item, found in zip(missing, decoded, candidates, strict=True):
        translations[index] = dataclasses.replace(item, candidates=found)
        if cache is not None:
            cache.put(keys[index], found)
    if cache is not None:
        metrics.record_cache(model.name, len(sentences) - len(missing), len(missing), cache.stats)
    return _assemble(pieces, translations, config.nbest)


def _terms_key(terms: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    """Return a sentence's target phrases as a hashable part of its cache key."""
    return tuple(tuple(phrase) for phrase in terms)


async def _decode_sentences(
    sentences: list[str],
    prefixes: list[list[int]],
    model: ServedModel,
    config: DecodeConfig,
    worker: ModelWorker,
    terms: list[list[list[int]]],
    progress: Callable[[int, list[int]], None] | None = None,
) -> tuple[list[SentenceJob], list[tuple[DecodedSentence, SentenceTiming]]]:
    """Queue every sentence of a request at once and await their results (cancelled with the request).

    ``progress(position, tokens)``, called on the worker thread, gets each sentence's stable tokens as they
    grow and its best hypothesis's tokens when it ends.
    """
    loop = asyncio.get_running_loop()
    handle = RequestHandle()
    futures: list[asyncio.Future[tuple[DecodedSentence, SentenceTiming]]] = []
    jobs = []
    for position, (sentence, prefix_ids, term_ids) in enumerate(zip(sentences, prefixes, terms, strict=True)):
        future: asyncio.Future[tuple[DecodedSentence, SentenceTiming]] = loop.create_future()
        futures.append(future)
        src_ids = model.encode(sentence)
        grown = functools.partial(progress, position) if progress is not None else None
        deliver = _deliverer(loop, future, grown)
        jobs.append(SentenceJob(model.name, src_ids, config, handle, deliver, prefix_ids, term_ids, grown))
    if jobs:
        worker.submit(jobs)
    try:
        return jobs, list(await asyncio.gather(*futures))
    except BaseException:
        handle.cancel()
        raise


def _sentence_translation(
    sentence: str,
    job: SentenceJob,
    decoded: DecodedSentence,
    timing: SentenceTiming,
    model: ServedModel,
    metrics: ServingMetrics,
) -> SentenceTranslation:
    """Detokenise a decoded sentence's hypotheses and count its tokens (TranslationError if it failed)."""
    if decoded.error is not None:
        raise TranslationError(f"model {model.name!r}: {decoded.error}")
    candidates = [Candidate.from_hypothesis(item, model.decode(item.tokens)) for item in decoded.hypotheses]
    metrics.tokens.labels(model.name, "source").inc(len(job.src_ids))
    metrics.tokens.labels(model.name, "target").inc(len(candidates[0].tokens) if candidates else 0)
    return SentenceTranslation(sentence, candidates, timing)


async def _forced_passes(
    candidates: list[list[Candidate]],
    sources: list[list[int]],
    sentences: list[str],
    model: ServedModel,
    config: DecodeConfig,
    worker: ModelWorker,
    metrics: ServingMetrics,
    alignment_layer: int | None,
    flags: FlagThresholds | None,
    retry_omissions: bool,
) -> list[list[Candidate]]:
    """After the search: flags (and the omission retry they drive), then alignments, each a forced pass."""
    thresholds = flags if flags is not None else (FlagThresholds() if retry_omissions else None)
    if thresholds is not None:
        add_flags = functools.partial(_add_flags, model=model, worker=worker, thresholds=thresholds)
        candidates = await add_flags(candidates, sources)
        if retry_omissions:
            translate = functools.partial(
                _translate_pieces, model=model, config=config, worker=worker, metrics=metrics
            )
            candidates, outcomes = await retry_omissions_of(
                sentences, candidates, sources, translate, add_flags
            )
            for outcome, count in outcomes.items():
                metrics.omission_retries.labels(model.name, outcome).inc(count)
        if flags is None:  # computed for the retry only
            candidates = [[dataclasses.replace(item, flags=None) for item in found] for found in candidates]
    if alignment_layer is not None:
        layer = alignment_layer
        candidates = await _add_forced_pass(
            candidates, sources, model, worker, "alignment",
            lambda network, tokenizer, rows, outputs: word_alignments(network, tokenizer, rows, outputs, layer),
        )  # fmt: skip
    return candidates


async def _add_flags(
    candidates: list[list[Candidate]],
    sources: list[list[int]],
    model: ServedModel,
    worker: ModelWorker,
    thresholds: FlagThresholds,
) -> list[list[Candidate]]:
    """Flag every candidate of every sentence (two teacher-forced passes for all, on the worker thread)."""
    return await _add_forced_pass(
        candidates, sources, model, worker, "flags",
        lambda network, tokenizer, rows, outputs: [
            sentence_flags(signals, thresholds) for signals in forced_signals(network, tokenizer, rows, outputs)
        ],
    )  # fmt: skip


async def _translate_pieces(
    texts: list[str], model: ServedModel, config: DecodeConfig, worker: ModelWorker, metrics: ServingMetrics
) -> list[list[Candidate]]:
    """Translate pieces of sentences as sentences of their own (an omission's retry), best candidate only."""
    jobs, results = await _decode_sentences(
        texts, [[] for _ in texts], model, dataclasses.replace(config, nbest=1), worker, [[] for _ in texts]
    )
    return [
        _sentence_translation(text, job, found, timing, model, metrics).candidates
        for text, job, (found, timing) in zip(texts, jobs, results, strict=True)
    ]


async def _add_forced_pass(
    candidates: list[list[Candidate]],
    sources: list[list[int]],
    model: ServedModel,
    worker: ModelWorker,
    field: str,
    compute: Callable[[SequenceModel, TextTokenizer, list[list[int]], list[list[int]]], list[Any]],
) -> list[list[Candidate]]:
    """Set one field of every candidate from teacher-forced passes on the worker thread, a slice per call.

    Each call covers at most :data:`FORCED_PASS_ROWS` candidates, so the other clients' decoder steps run
    between the slices of a large request instead of waiting for its whole pass.
    """
    translator = model.translator
    if translator is None:
        raise TranslationError(f"model {model.name!r}: {field} needs the PyTorch engine")
    rows = [index for index, found in enumerate(candidates) for _ in found]
    outputs = [candidate.tokens for found in candidates for candidate in found]
    row_sources = [sources[index] for index in rows]
    network, tokenizer = translator.model, translator.tokenizer
    computed: list[Any] = []
    for start in range(0, len(outputs), FORCED_PASS_ROWS):
        piece_sources, piece_outputs = (
            row_sources[start : start + FORCED_PASS_ROWS],
            outputs[start : start + FORCED_PASS_ROWS],
        )
        computed += await asyncio.wrap_future(
            worker.call(functools.partial(compute, network, tokenizer, piece_sources, piece_outputs))
        )
    values = iter(computed)
    return [
        [dataclasses.replace(candidate, **{field: next(values)}) for candidate in found]
        for found in candidates
    ]


def _deliverer(
    loop: asyncio.AbstractEventLoop,
    future: "asyncio.Future[tuple[DecodedSentence, SentenceTiming]]",
    progress: Callable[[list[int]], None] | None = None,
) -> Callable[[DecodedSentence, SentenceTiming], None]:
    """Make the worker thread's callback that resolves ``future`` on the event loop (after ``progress``)."""

    def deliver(result: DecodedSentence, timing: SentenceTiming) -> None:
        if progress is not None and result.hypotheses:
            with contextlib.suppress(Exception):  # an update's failure must not lose the result itself
                progress(result.hypotheses[0].tokens)  # the whole translation, before the request can end
        if not loop.is_closed():
            loop.call_soon_threadsafe(_settle, future, (result, timing))

    return deliver


def _reporter(
    pieces: list[list[TextPiece]], model: ServedModel, progress: Callable[[int, int, str], None]
) -> Callable[[int, list[int]], None]:
    """Turn (request sentence, tokens) from any thread into ``progress(text, sentence, text)`` on the loop."""
    loop = asyncio.get_running_loop()
    positions = [
        (text_index, sentence_index)
        for text_index, text_pieces in enumerate(pieces)
        for sentence_index, _ in enumerate(piece for piece in text_pieces if piece.sentence)
    ]

    def report(index: int, tokens: list[int]) -> None:
        text = model.decode(tokens)  # detokenised where it is called: the worker thread, for a running one
        if not loop.is_closed():
            loop.call_soon_threadsafe(progress, *positions[index], text)

    return report


def _settle(
    future: "asyncio.Future[tuple[DecodedSentence, SentenceTiming]]",
    value: tuple[DecodedSentence, SentenceTiming],
) -> None:
    if not future.done():  # cancelled meanwhile: the request is gone
        future.set_result(value)


def _assemble(
    pieces: list[list[TextPiece]], translations: list[SentenceTranslation], nbest: int
) -> list[TextTranslation]:
    """Group sentence translations back by text and join each text in its layout."""
    remaining = iter(translations)
    texts = []
    for text_pieces in pieces:
        sentences = [next(remaining) for piece in text_pieces if piece.sentence]
        best = [item.candidates[0].text if item.candidates else "" for item in sentences]
        alternatives = [
            join_translations(
                text_pieces,
                [
                    item.candidates[rank].text if len(item.candidates) > rank else best[index]
                    for index, item in enumerate(sentences)
                ],
            )
            for rank in range(1, nbest)
        ]
        texts.append(TextTranslation(join_translations(text_pieces, best), sentences, alternatives))
    return texts


def elapsed_ms(start: float) -> float:
    """Milliseconds since ``start`` (a ``time.perf_counter()`` value), rounded to 0.01 ms.

    Parameters
    ----------
    start : float
        The start time.

    Returns
    -------
    float
        Elapsed milliseconds.

    Notes
    -----
    For the ``timing`` field of responses.
    """
    return round((time.perf_counter() - start) * 1000.0, 2)
