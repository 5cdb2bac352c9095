"""``POST /v1/translate/stream``: a translation as Server-Sent Events, words as they become certain.

The body is ``/v1/translate``'s. The answer is ``text/event-stream`` (FastAPI's ``EventSourceResponse``, which
also sends keep-alive comments): a ``piece`` event each time a sentence's certain words grow, then one ``done``
event whose data is exactly the JSON ``/v1/translate`` answers. A ``piece``'s data is ``{"text": i,
"sentence": j, "translation": the sentence's certain words so far, "delta": what they added}`` (``delta`` is
null when the words were replaced rather than extended, which only a retried sentence can do). Under greedy
search every token is certain once chosen; under beam search the words every beam and finished hypothesis
share (:mod:`~transformer.serving.stable_prefix`). Searches that run to their end in one call (sampling, MBR,
prefixes, glossaries, other engines) and cached sentences send their sentence whole when it ends.

Every refusal happens before the stream starts, with ``/v1/translate``'s status codes (a full queue included:
the sentences are queued before the answer begins); a model failure after it is an ``error`` event. A client
that disconnects ends the stream, which cancels the request: its sentences leave the queue and the batch.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent

from transformer.serving.prepared_translation import (
    PreparedTranslation,
    prepare_translation,
    run_translation,
    translation_reply,
)
from transformer.serving.request_context import server_of
from transformer.serving.translate_request import TranslateRequest
from transformer.serving.translation_service import TextTranslation, TranslationError

router = APIRouter()

_STREAM_BODY_SCHEMA = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": TranslateRequest.model_json_schema()}},
    }
}


@dataclass
class StartedStream:
    """A checked request whose sentences are queued, and the updates they send.

    Parameters
    ----------
    prepared : PreparedTranslation
        The checked request.
    task : asyncio.Task
        Its translation.
    updates : asyncio.Queue
        ``(text, sentence, certain words)`` as the worker reports them.
    sent : dict
        The certain words already sent per ``(text, sentence)``.

    Notes
    -----
    Made by the route's dependency, so that everything that can refuse the request does so before the 200.
    """

    prepared: PreparedTranslation
    task: "asyncio.Task[list[TextTranslation]]"
    updates: "asyncio.Queue[tuple[int, int, str]]"
    sent: dict[tuple[int, int], str] = field(default_factory=dict)


async def start_stream(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> StartedStream:
    """Check the request and queue its sentences, before the stream's first byte.

    Parameters
    ----------
    request : Request
        The HTTP request (a ``/v1/translate`` body).
    authorization, x_api_key : str or None
        API key headers.

    Returns
    -------
    StartedStream
        The running translation and its update queue.

    Raises
    ------
    HTTPException
        As ``/v1/translate`` (400, 403, 413, 422), and 422 for ``format: "html"``.
    QueueFullError
        When the queue cannot take the sentences now (503 with ``Retry-After``, by the app's handler).
    WorkerStoppedError
        When the server is shutting down (503).

    Notes
    -----
    The translation task is given one turn of the event loop, which queues its sentences (all or none), so a
    full queue is a 503 with ``Retry-After`` rather than an event in a 200 stream.
    """
    prepared = await prepare_translation(request, authorization, x_api_key)
    if prepared.runs is not None:
        raise HTTPException(
            422, "format html is not streamed: its tags are put back once a sentence's alignment is known; "
            "use /v1/translate"
        )  # fmt: skip
    updates: asyncio.Queue[tuple[int, int, str]] = asyncio.Queue()
    task = asyncio.ensure_future(
        run_translation(prepared, server_of(request), lambda *update: updates.put_nowait(update))
    )
    await asyncio.sleep(0)  # let it queue its sentences: a refusal is still an HTTP status here
    if task.done() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
    return StartedStream(prepared, task, updates)


@router.post(
    "/v1/translate/stream",
    tags=["translation"],
    response_class=EventSourceResponse,
    openapi_extra=_STREAM_BODY_SCHEMA,
)
async def translate_stream(
    started: Annotated[StartedStream, Depends(start_stream)],
) -> AsyncIterator[ServerSentEvent]:
    """Stream a translation: ``piece`` events as words become certain, then ``done`` with the whole answer.

    Parameters
    ----------
    started : StartedStream
        The checked, queued request (:func:`start_stream`).

    Returns
    -------
    AsyncIterator[ServerSentEvent]
        The events.

    Notes
    -----
    Before ``done``, every sentence gets a last ``piece`` if its final translation differs from what was sent,
    so the pieces of each sentence always add up to its translation in ``done``. When the client disconnects,
    the generator is closed and the translation cancelled.
    """
    task, updates = started.task, started.updates
    try:
        while not task.done() or not updates.empty():
            if updates.empty():
                getter = asyncio.ensure_future(updates.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    continue
                update = getter.result()
            else:
                update = updates.get_nowait()
            event = piece_event(started.sent, *update)
            if event is not None:
                yield event
        try:
            results = task.result()
        except TranslationError as error:  # the model failed on a sentence
            yield ServerSentEvent(event="error", data={"detail": str(error)})
            return
        except Exception as error:  # after the 200 a failure can only be told as an event
            yield ServerSentEvent(event="error", data={"detail": f"{type(error).__name__}: {error}"})
            return
        reply = translation_reply(started.prepared, results)
        for text_index, text in enumerate(reply["sentences"]):
            for sentence_index, sentence in enumerate(text):
                event = piece_event(started.sent, text_index, sentence_index, sentence["translation"])
                if event is not None:
                    yield event
        yield ServerSentEvent(event="done", data=reply)
    finally:
        if not task.done():  # the client went away: its sentences leave queue and batch
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def piece_event(
    sent: dict[tuple[int, int], str], text_index: int, sentence_index: int, translation: str
) -> ServerSentEvent | None:
    """Make the ``piece`` event of a sentence's new certain words, or None when nothing is new.

    Parameters
    ----------
    sent : dict
        What was sent per ``(text, sentence)``; updated.
    text_index, sentence_index : int
        Which sentence (its text's index in the request; the sentence's among the text's non-blank ones).
    translation : str
        Its certain words now.

    Returns
    -------
    ServerSentEvent or None
        ``event: piece`` with ``text``, ``sentence``, ``translation`` and ``delta``.

    Notes
    -----
    ``delta`` is the added text when the new words extend the old, else None (the client replaces the
    sentence's text with ``translation``).
    """
    before = sent.get((text_index, sentence_index), "")
    if translation == before:
        return None
    sent[(text_index, sentence_index)] = translation
    delta: Any = translation[len(before) :] if translation.startswith(before) else None
    data = {"text": text_index, "sentence": sentence_index, "translation": translation, "delta": delta}
    return ServerSentEvent(event="piece", data=data)
