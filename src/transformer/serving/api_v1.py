"""The server's own API: ``POST /v1/translate``, ``GET /v1/models`` and ``GET /v1/attention``."""

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from transformer.model.transformer import Transformer
from transformer.serving.prepared_translation import prepare_translation, run_translation, translation_reply
from transformer.serving.request_body import (
    refuse_non_text,
)
from transformer.serving.request_context import (
    CLIENT_CLOSED_REQUEST,
    check_api_key,
    find_model,
    server_of,
    until_disconnected,
)
from transformer.serving.served_model import ServedModel
from transformer.serving.translate_request import TranslateRequest
from transformer.visualization.attention_html import build_attention_payload
from transformer.visualization.attention_inputs import sentence_attention
from transformer.visualization.attention_page import render_attention_page

router = APIRouter()

#: The body of ``POST /v1/translate`` for the OpenAPI page: the route parses the body itself (any content
#: type, a nesting limit, text checks), so FastAPI would not otherwise know its schema.
_TRANSLATE_BODY_SCHEMA = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": TranslateRequest.model_json_schema()}},
    }
}


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
    prepared = await prepare_translation(request, authorization, x_api_key)
    results = await until_disconnected(request, run_translation(prepared, server_of(request)))
    if results is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    return JSONResponse(translation_reply(prepared, results))


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
