"""From texts to translations on the event loop: split, encode, queue, await the worker, join back.

Nothing here runs the model: sentences go to the :class:`~transformer.serving.model_worker.ModelWorker`
and each result comes back through an asyncio future resolved from the worker thread. A request that ends
early (its client disconnected, the await was cancelled) cancels its handle, so its sentences leave the
queue and the running batch.
"""

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from transformer.config.decode import DecodeConfig
from transformer.decoding.translator import Candidate
from transformer.serving.continuous_batching import DecodedSentence
from transformer.serving.metrics import ServingMetrics
from transformer.serving.model_worker import ModelWorker, RequestHandle, SentenceJob, SentenceTiming
from transformer.serving.sentence_splitting import (
    TextPiece,
    join_translations,
    keep_as_one_sentence,
    split_into_sentences,
)
from transformer.serving.served_model import ServedModel


class TranslationError(RuntimeError):
    """The model failed on a sentence (e.g. NaN scores): HTTP 500 with the reason.

    Notes
    -----
    Only the failing request gets it; the worker keeps serving the others.
    """


@dataclass(frozen=True)
class SearchOptions:
    """The per-request search settings a client may choose.

    Parameters
    ----------
    beam : int or None
        Beam size (1: greedy); None keeps the model's.
    nbest : int or None
        Hypotheses returned per sentence (at most ``beam``); None: 1.
    alpha : float or None
        Length penalty; None keeps the model's.

    Notes
    -----
    Applied to the model's :class:`~transformer.config.decode.DecodeConfig` with :func:`dataclasses.replace`, so
    the config's own checks (``nbest <= beam_size``) apply.
    """

    beam: int | None = None
    nbest: int | None = None
    alpha: float | None = None

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

        Notes
        -----
        Raises ValueError (from DecodeConfig) for inconsistent values, e.g. ``nbest`` above the beam.
        """
        return dataclasses.replace(
            base,
            beam_size=base.beam_size if self.beam is None else self.beam,
            length_penalty=base.length_penalty if self.alpha is None else self.alpha,
            nbest=self.nbest or 1,
        )


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

    Returns
    -------
    list of TextTranslation
        One per text, in order; an empty or blank text gives an empty translation without a model call.

    Notes
    -----
    All sentences are queued at once (all or none: :class:`~transformer.serving.model_worker.QueueFullError`
    when they do not fit). If this coroutine is cancelled (client gone), the request's handle is cancelled
    and its sentences are dropped. Raises :class:`TranslationError` when the model fails on a sentence.
    """
    config = options.decode_config(model.decode_config)
    pieces = [
        split_into_sentences(text, model.source_lang) if split else keep_as_one_sentence(text)
        for text in texts
    ]
    sentences = [piece.sentence for text_pieces in pieces for piece in text_pieces if piece.sentence]
    loop = asyncio.get_running_loop()
    handle = RequestHandle()
    futures: list[asyncio.Future[tuple[DecodedSentence, SentenceTiming]]] = []
    jobs = []
    for sentence in sentences:
        future: asyncio.Future[tuple[DecodedSentence, SentenceTiming]] = loop.create_future()
        futures.append(future)
        jobs.append(SentenceJob(model.name, model.encode(sentence), config, handle, _deliverer(loop, future)))
    if jobs:
        worker.submit(jobs)
    try:
        results = await asyncio.gather(*futures)
    except BaseException:
        handle.cancel()
        raise
    translations = []
    for sentence, job, (decoded, timing) in zip(sentences, jobs, results, strict=True):
        if decoded.error is not None:
            raise TranslationError(f"model {model.name!r}: {decoded.error}")
        candidates = [
            Candidate(model.decode(item.tokens), item.score, item.log_prob, item.tokens)
            for item in decoded.hypotheses
        ]
        metrics.tokens.labels(model.name, "source").inc(len(job.src_ids))
        metrics.tokens.labels(model.name, "target").inc(len(candidates[0].tokens) if candidates else 0)
        translations.append(SentenceTranslation(sentence, candidates, timing))
    metrics.sentences.labels(model.name).inc(len(sentences))
    return _assemble(pieces, translations, config.nbest)


def _deliverer(
    loop: asyncio.AbstractEventLoop, future: "asyncio.Future[tuple[DecodedSentence, SentenceTiming]]"
) -> Callable[[DecodedSentence, SentenceTiming], None]:
    """Make the worker thread's callback that resolves ``future`` on the event loop."""

    def deliver(result: DecodedSentence, timing: SentenceTiming) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(_settle, future, (result, timing))

    return deliver


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
