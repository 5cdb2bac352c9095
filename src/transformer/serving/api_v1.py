"""The server's own API: ``POST /v1/translate``, ``GET /v1/models`` and ``GET /v1/attention``."""

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import ValidationError

from transformer.decoding.alignment import check_alignment_layer
from transformer.decoding.constrained_beam_search import check_term_search
from transformer.decoding.glossary import Glossary, GlossaryError
from transformer.decoding.quality_flags import FlagThresholds
from transformer.model.transformer import Transformer
from transformer.serving.inline_markup import parse_runs, run_texts
from transformer.serving.language_routing import model_for_languages
from transformer.serving.markup_translations import html_results
from transformer.serving.request_body import (
    describe_json_type,
    parse_json_body,
    refuse_non_text,
    refuse_non_text_fields,
)
from transformer.serving.request_glossary import check_term_counts, glossary_from_field
from transformer.serving.served_model import ServedModel
from transformer.serving.server_state import ServerState
from transformer.serving.translate_request import TEXT_FIELDS, TranslateRequest
from transformer.serving.translation_json import sentences_json, timing_json
from transformer.serving.translation_service import (
    SearchOptions,
    translate_texts,
)
from transformer.serving.work_budget import request_work, work_over_budget
from transformer.visualization.attention_html import build_attention_payload
from transformer.visualization.attention_inputs import sentence_attention
from transformer.visualization.attention_page import render_attention_page

#: HTTP status of a request whose client went away before its answer (nginx's convention; nobody reads it).
CLIENT_CLOSED_REQUEST = 499

ResultT = TypeVar("ResultT")

router = APIRouter()

#: The body of ``POST /v1/translate`` for the OpenAPI page: the route parses the body itself (any content
#: type, a nesting limit, text checks), so FastAPI would not otherwise know its schema.
_TRANSLATE_BODY_SCHEMA = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": TranslateRequest.model_json_schema()}},
    }
}


def server_of(request: Request) -> ServerState:
    """Find the :class:`ServerState` of the app serving ``request``.

    Parameters
    ----------
    request : Request
        The current request.

    Returns
    -------
    ServerState
        ``request.app.state.server``.

    Notes
    -----
    Kept on the app, not in a module global, so tests can run several servers in one process.
    """
    state: ServerState = request.app.state.server
    return state


def check_api_key(server: ServerState, authorization: str | None, api_key: str | None) -> None:
    """Refuse a request without a valid key (403) when keys are configured.

    Parameters
    ----------
    server : ServerState
        The server.
    authorization : str or None
        The ``Authorization`` header (``Bearer KEY``; the scheme in any case).
    api_key : str or None
        The ``X-API-Key`` header or ``api_key`` query parameter.

    Returns
    -------
    None

    Notes
    -----
    Raises HTTPException(403) for a missing or wrong key. The scheme name is case-insensitive (RFC 7235,
    section 2.1), so ``bearer KEY`` is accepted as ``Bearer KEY``; the key itself is compared exactly.
    """
    key = api_key
    scheme, _, credentials = (authorization or "").strip().partition(" ")
    if scheme.lower() == "bearer":
        key = credentials.strip()
    if not server.key_is_valid(key):
        raise HTTPException(403, "missing or invalid API key (send 'Authorization: Bearer KEY')")


def find_model(server: ServerState, name: str | None) -> ServedModel:
    """Look up a served model by name (None: the default).

    Parameters
    ----------
    server : ServerState
        The server.
    name : str or None
        The request's ``model``.

    Returns
    -------
    ServedModel
        The model.

    Notes
    -----
    Raises HTTPException(422) naming the field and the served models for an unknown name.
    """
    if name is None:
        return server.default_model
    if name not in server.models:
        raise HTTPException(422, f"model: unknown model {name!r}; served: {', '.join(server.models)}")
    return server.models[name]


async def until_disconnected(request: Request, work: Awaitable[ResultT]) -> ResultT | None:
    """Await ``work`` unless the client disconnects first; then cancel it and return None.

    Parameters
    ----------
    request : Request
        The request whose connection to watch.
    work : awaitable
        The request's translation.

    Returns
    -------
    object or None
        The result of ``work``; None when the client went away.

    Notes
    -----
    Starlette does not cancel a handler whose client disconnects, so without this its sentences would
    keep their batch rows until they finished for nobody. After the body has been read, the ASGI
    ``receive`` returns only when the connection closes.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_for_disconnect(request))
    done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        watcher.cancel()
        return task.result()
    task.cancel()  # translate_texts cancels the request's handle: its sentences leave queue and batch
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


async def _wait_for_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def read_translate_request(request: Request) -> TranslateRequest:
    """Read and check the body of ``POST /v1/translate``.

    Parameters
    ----------
    request : Request
        The HTTP request.

    Returns
    -------
    TranslateRequest
        The parsed, typed and bounded request.

    Raises
    ------
    HTTPException
        400 for a body that is not JSON (or nested too deeply) and for a text field holding control
        characters or unpaired surrogates; 422 for JSON that is not an object.
    RequestValidationError
        For a missing, mistyped, unknown or out-of-range field: the 422 of FastAPI's own validation.

    Notes
    -----
    The body is parsed here rather than by FastAPI so that a JSON object sent as ``text/plain`` or as curl's
    default form type is read as JSON, a JSON string or ``null`` is named as such, and no string that cannot
    be encoded reaches the tokenizer or the reply.
    """
    try:
        values = parse_json_body(await request.body())
    except ValueError as error:
        raise HTTPException(400, str(error)) from None
    if not isinstance(values, dict):
        raise HTTPException(
            422, f"body: expected a JSON object with a 'text' field, got {describe_json_type(values)}"
        )
    try:
        refuse_non_text_fields(values, TEXT_FIELDS)
    except ValueError as error:
        raise HTTPException(400, str(error)) from None
    try:
        return TranslateRequest.model_validate(values)
    except ValidationError as error:
        errors = [{**item, "loc": ("body", *item["loc"])} for item in error.errors()]
        raise RequestValidationError(errors, body=values) from None


@router.post("/v1/translate", tags=["translation"], openapi_extra=_TRANSLATE_BODY_SCHEMA)
async def translate(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Response:
    """Translate a text or a list of texts.

    Parameters
    ----------
    request : Request
        The HTTP request; its body is a :class:`TranslateRequest` (:func:`read_translate_request`).
    authorization, x_api_key : str or None
        API key headers (when the server has keys).

    Returns
    -------
    Response
        JSON: ``model``, ``translation`` (a string for a string ``text``, else a list), ``sentences`` (per
        text, per sentence: ``source``, ``translation``, ``score``, ``log_prob``, ``nbest``) and ``timing``
        (``total_ms``, and the slowest sentence's ``queue_ms`` and ``decode_ms``).

    Notes
    -----
    Errors: 400 broken JSON or text, 403 key, 413 over the work budget (``--max-chars`` counting texts,
    prefixes and a minimum per sentence, or more sentences than ``--max-queue`` holds), 422 bad field or
    unknown model, 503 queue full for now (with ``Retry-After``) or shutting down, 500 model failure.
    """
    start = time.perf_counter()
    server = server_of(request)
    body = await read_translate_request(request)
    check_api_key(server, authorization, x_api_key)
    texts = [body.text] if isinstance(body.text, str) else body.text
    runs = [parse_runs(text) for text in texts] if body.format == "html" else None
    detected = None
    if body.source == "auto" or (body.source is None and body.target is not None):
        plain = [" ".join(run_texts([text_runs])) for text_runs in runs] if runs is not None else texts
        detected = await asyncio.to_thread(server.language_detector.detect_each, plain)
    model = model_for_languages(server, body.model, body.source, body.target, texts, detected)
    options, prefixes, alignment_layer, glossary = _checked_search(body, model)
    try:
        check_term_counts(
            glossary, [" ".join(run_texts([item])) for item in runs] if runs is not None else texts
        )
    except GlossaryError as error:
        raise HTTPException(422, str(error)) from None
    inputs = run_texts(runs) if runs is not None else texts
    split = isinstance(body.text, str) or runs is not None  # a run of HTML is split as a string text is
    markup_chars = sum(map(len, texts)) - sum(map(len, inputs))
    work = request_work(
        inputs, options.decode_config(model.decode_config), model.source_lang, split, prefixes, markup_chars
    )
    problem = work_over_budget(work, server.config.max_chars, server.config.max_queue)
    if problem is not None:
        raise HTTPException(413, problem)
    results = await until_disconnected(
        request,
        translate_texts(
            inputs,
            model,
            options,
            server.worker,
            server.metrics,
            split,
            prefixes,
            alignment_layer if alignment_layer is not None or runs is None else -1,  # HTML's tags need one
            FlagThresholds() if body.flags else None,
            server.config.retry_omissions,
            server.translation_cache,
            glossary,
        ),
    )
    if results is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    if runs is not None:
        results = html_results(runs, results, keep_alignments=body.alignments)
    translations = [result.text for result in results]
    reply: dict[str, Any] = {
        "model": model.name,
        "translation": translations[0] if isinstance(body.text, str) else translations,
        "sentences": [sentences_json(result) for result in results],
        "timing": timing_json(results, start),
    }
    if detected is not None:
        languages = [{"language": item.language, "confidence": item.confidence} for item in detected]
        reply["detected_language"] = languages[0] if isinstance(body.text, str) else languages
    return JSONResponse(reply)


def _checked_search(
    body: TranslateRequest, model: ServedModel
) -> tuple[SearchOptions, list[str] | None, int | None, Glossary | None]:
    """Check the request's search against the model: options, prefixes, alignment layer, glossary (422 if bad)."""
    options = body.search_options()
    try:
        config = options.decode_config(model.decode_config)
        prefixes = body.prefixes()
        glossary = glossary_from_field(body.glossary)
    except ValueError as error:
        raise HTTPException(422, str(error).removeprefix("DecodeConfig.")) from None
    html = body.format == "html"  # its tags go back through the alignment
    pytorch_only = options.needs_pytorch or prefixes is not None or body.alignments or body.flags or html
    if model.translator is None and (pytorch_only or glossary is not None):
        raise HTTPException(
            422,
            f"model {model.name!r} runs on {model.engine_name}: sampling, mbr, no_repeat_ngram, prefix, "
            "alignments, flags, glossary and format html need a model served with --engine pytorch",
        )
    if glossary is not None:
        try:
            check_term_search(config)
        except ValueError as error:
            raise HTTPException(422, f"glossary: {error} (set beam to 2 or more)") from None
    if body.alignment_layer is not None and not body.alignments:
        raise HTTPException(422, "alignment_layer: only used with alignments: true")
    if body.format == "html" and prefixes is not None:
        raise HTTPException(
            422, "prefix: not with format html (a prefix is plain text, the texts are markup)"
        )
    layer = None
    if body.alignments:
        layer = -1 if body.alignment_layer is None else body.alignment_layer
        try:
            check_alignment_layer(model.engine_model, layer)  # type: ignore[arg-type]
        except ValueError as error:
            raise HTTPException(422, f"alignment_layer: {error}") from None
    return options, prefixes, layer, glossary


@router.get("/v1/models", tags=["translation"])
async def list_models(request: Request) -> dict[str, Any]:
    """Describe the served models.

    Parameters
    ----------
    request : Request
        The HTTP request.

    Returns
    -------
    dict
        ``models``: per model its ``name``, ``source``, ``target`` language, ``beam`` and ``alpha``
        defaults and whether attention maps are available; ``default``: the default model's name.

    Notes
    -----
    Open without a key: it names models, it translates nothing. The page builds its model menu from it.
    """
    server = server_of(request)
    return {
        "default": server.default_model.name,
        "models": [
            {
                "name": model.name,
                "source": model.source_lang,
                "target": model.target_lang,
                "beam": model.decode_config.beam_size,
                "alpha": model.decode_config.length_penalty,
                "attention": attention_unavailable_reason(model) is None,
                "flags": model.translator is not None,
            }
            for model in server.models.values()
        ],
    }


def attention_unavailable_reason(model: ServedModel) -> str | None:
    """Why a model cannot show attention maps, or None when it can.

    Parameters
    ----------
    model : ServedModel
        A served model.

    Returns
    -------
    str or None
        The reason, for a 400 answer.

    Notes
    -----
    The maps come from the float32 Transformer's explicit attention; int8 layers and the recurrent
    baseline do not provide them.
    """
    if not isinstance(model.engine_model, Transformer):
        return f"model {model.name!r} is not a Transformer: no attention maps"
    if model.precision != "fp32":
        return f"model {model.name!r} is served in {model.precision}; attention maps need fp32"
    return None


@router.get("/v1/attention", tags=["translation"], response_class=HTMLResponse)
async def attention_page(
    request: Request,
    source: Annotated[str, Query(min_length=1)],
    translation: Annotated[str, Query()],
    model: Annotated[str | None, Query()] = None,
    api_key: Annotated[str | None, Query()] = None,
    authorization: Annotated[str | None, Header()] = None,
) -> HTMLResponse:
    """Show the attention viewer of one sentence and its translation (every layer and head).

    Parameters
    ----------
    request : Request
        The HTTP request.
    source : str
        The source sentence.
    translation : str
        Its translation (the decoder input is the start token and this text).
    model : str or None
        Served model name.
    api_key, authorization : str or None
        API key (query parameter, so the page can load it in a frame).

    Returns
    -------
    HTMLResponse
        The page of :mod:`transformer.visualization.attention_html`.

    Notes
    -----
    The forward pass runs on the model worker between decoder steps. 400 when the model cannot show maps or
    a text holds control characters, 413 over ``--max-chars``.
    """
    server = server_of(request)
    try:
        refuse_non_text(source, "source", line_breaks=True)
        refuse_non_text(translation, "translation", line_breaks=True)
    except ValueError as error:
        raise HTTPException(400, str(error)) from None
    check_api_key(server, authorization, api_key)
    served = find_model(server, model)
    reason = attention_unavailable_reason(served)
    if reason is not None:
        raise HTTPException(400, reason)
    if len(source) + len(translation) > server.config.max_chars:
        raise HTTPException(
            413, f"source and translation: over the limit of {server.config.max_chars} characters"
        )
    transformer = served.engine_model
    assert isinstance(transformer, Transformer)
    tokenizer = served.tokenizer
    maps = await asyncio.wrap_future(
        server.worker.call(lambda: sentence_attention(transformer, tokenizer, source, translation))
    )
    payload = build_attention_payload(maps.attention, maps.source_tokens, maps.target_tokens, source)
    return HTMLResponse(render_attention_page(payload))
