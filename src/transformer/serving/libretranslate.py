"""LibreTranslate's HTTP API: ``POST /translate`` and ``GET /languages``, for the clients that speak it.

Weblate, browser extensions and chat bots call LibreTranslate; answering in its shapes lets them use a
model trained here unchanged. Requests come as JSON, as a form or in the query string (deep-translator sends
its fields there); replies are ``{"translatedText": ...}`` (a string for a string ``q``, a list for a list)
with ``alternatives`` when asked, and errors are ``{"error": "..."}`` with LibreTranslate's codes: 400 for a
bad or missing parameter (the work budget included, as LibreTranslate answers its character and batch
limits), 403 for a missing or wrong key, 500 when translation fails; a full queue is 503 with
``Retry-After``.
"""

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from transformer.serving.api_v1 import CLIENT_CLOSED_REQUEST, server_of, until_disconnected
from transformer.serving.config import MAX_BEAM_SIZE
from transformer.serving.html_text import HtmlPiece, join_html, split_html
from transformer.serving.request_body import parse_json_body, refuse_non_text_fields
from transformer.serving.served_model import UNKNOWN_LANGUAGE, ServedModel
from transformer.serving.server_state import ServerState
from transformer.serving.translation_service import (
    SearchOptions,
    TextTranslation,
    TranslationError,
    translate_texts,
)
from transformer.serving.work_budget import request_work, work_over_budget
from transformer.serving.worker_errors import QueueFullError, WorkerStoppedError

#: English names of the languages the LibreTranslate clients show; other codes are shown as they are.
LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "de": "German", "en": "English", "es": "Spanish", "fi": "Finnish",
    "fr": "French", "it": "Italian", "ja": "Japanese", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese",
    "ro": "Romanian", "ru": "Russian", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip

router = APIRouter(tags=["LibreTranslate"])


def lt_error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """Build a LibreTranslate error reply.

    Parameters
    ----------
    status : int
        HTTP status.
    message : str
        One line saying what is wrong.
    headers : dict or None
        Extra headers (``Retry-After``).

    Returns
    -------
    JSONResponse
        ``{"error": message}``.

    Notes
    -----
    LibreTranslate clients read ``error`` to show the user; FastAPI's ``detail`` would be ignored.
    """
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def read_parameters(request: Request) -> dict[str, Any]:
    """Read a LibreTranslate request's parameters from its JSON body, its form or its query string.

    Parameters
    ----------
    request : Request
        The request.

    Returns
    -------
    dict
        Parameter name to value (a repeated ``q`` in a form or the query string becomes a list).

    Raises
    ------
    ValueError
        For a body that is not a JSON object (nor a form), or a string that is not text (naming the field).

    Notes
    -----
    As LibreTranslate (``libretranslate/app.py``): a JSON body is read alone; a form is read with the query
    string, which wins where both give a field (Flask's ``request.values``). A request with no body is read
    from its query string alone, as deep-translator sends it. A body that is neither a form nor declared JSON is
    parsed as JSON all the same, as LibreTranslate's clients are not all careful with the content type.
    """
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    query = _multi_values(request.query_params.keys(), request.query_params.getlist)
    if content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.form()
        values = {**_multi_values(form.keys(), form.getlist), **query}
    else:
        raw = await request.body()
        values = query if not raw.strip() else _json_object(raw)
    refuse_non_text_fields(values, frozenset({"q"}))
    return values


def _multi_values(names: Any, getlist: Any) -> dict[str, Any]:
    """Collect each name's value from a form or a query string; a ``q`` given more than once as a list."""
    values: dict[str, Any] = {}
    for name in names:
        items = getlist(name)
        values[name] = items if name == "q" and len(items) > 1 else items[-1]
    return values


def _json_object(raw: bytes) -> dict[str, Any]:
    """Parse a JSON body that must be an object (ValueError in LibreTranslate's wording otherwise)."""
    try:
        values = parse_json_body(raw)
    except ValueError as error:
        raise ValueError(
            f"Invalid request: the body is not valid JSON ({str(error).removeprefix('invalid JSON: ')})"
        ) from None
    if not isinstance(values, dict):
        raise ValueError("Invalid request: the JSON body must be an object")
    return values


def choose_model(server: ServerState, source: str, target: str) -> ServedModel | str:
    """Pick the served model for a language pair, or say why none fits.

    Parameters
    ----------
    server : ServerState
        The server.
    source : str
        Source language code, or "auto".
    target : str
        Target language code.

    Returns
    -------
    ServedModel or str
        The first model whose languages match (a model of unknown languages matches any), else an error
        message in LibreTranslate's wording.

    Notes
    -----
    "auto" detects nothing: it matches any source, so the model is chosen by its target alone.
    """
    for model in server.models.values():
        source_fits = source in ("auto", model.source_lang) or model.source_lang == UNKNOWN_LANGUAGE
        target_fits = target == model.target_lang or model.target_lang == UNKNOWN_LANGUAGE
        if source_fits and target_fits:
            return model
    if not any(source in ("auto", model.source_lang) for model in server.models.values()):
        return f"{source} is not supported"
    return f"{target} is not supported"


@router.post("/translate")
async def translate(request: Request) -> Response:
    """Translate ``q`` from ``source`` to ``target`` (LibreTranslate's endpoint).

    Parameters
    ----------
    request : Request
        JSON or form with ``q`` (string or list), ``source``, ``target``, ``format`` ("text" or "html"),
        ``alternatives`` (int) and ``api_key``.

    Returns
    -------
    Response
        ``{"translatedText": ...}``, plus ``alternatives`` when asked and ``detectedLanguage`` for "auto";
        or ``{"error": ...}``.

    Notes
    -----
    ``format: html`` keeps the markup: each text node is translated on its own and put back between the same
    tags (:mod:`transformer.serving.html_text`), so a sentence cut by inline tags is translated in pieces.
    """
    server = server_of(request)
    try:
        values = await read_parameters(request)
    except ValueError as error:
        message = str(error)
        return lt_error(400, message if message.startswith("Invalid") else f"Invalid request: {message}")
    if not server.key_is_valid(_string_or_none(values.get("api_key"))):
        return lt_error(403, "Invalid API key")
    problem = _check_parameters(values)
    if problem is not None:
        return lt_error(400, problem)
    source, target = str(values["source"]), str(values["target"])
    model = choose_model(server, source, target)
    if isinstance(model, str):
        return lt_error(400, model)
    alternatives = _alternatives(values)
    assert isinstance(alternatives, int)  # _check_parameters refused the others
    beam = max(model.decode_config.beam_size, alternatives + 1)
    options = SearchOptions(beam=beam, nbest=alternatives + 1)
    query = values["q"]
    texts = [query] if isinstance(query, str) else list(query)
    markup = [split_html(text) for text in texts] if values.get("format") == "html" else None
    inputs = [piece.text for pieces in markup for piece in pieces if not piece.markup] if markup else texts
    work = request_work(
        inputs,
        options.decode_config(model.decode_config),
        model.source_lang,
        markup_chars=sum(map(len, texts)) - sum(map(len, inputs)),  # counted, as LibreTranslate counts it
    )
    problem = work_over_budget(work, server.config.max_chars, server.config.max_queue, "libretranslate")
    if problem is not None:
        return lt_error(400, problem)
    try:
        results = await until_disconnected(
            request, translate_texts(inputs, model, options, server.worker, server.metrics)
        )
    except QueueFullError as error:
        return lt_error(503, f"Slowdown: {error}", {"Retry-After": "1"})
    except WorkerStoppedError as error:
        return lt_error(503, str(error), {"Retry-After": "5"})
    except TranslationError as error:
        return lt_error(500, f"Cannot translate text: {error}")
    if results is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    translated = _rebuild(results, markup, alternatives)  # per text: best, then the alternatives
    reply: dict[str, Any] = {
        "translatedText": translated[0][0] if isinstance(query, str) else [item[0] for item in translated]
    }
    if alternatives:
        reply["alternatives"] = (
            translated[0][1:] if isinstance(query, str) else [item[1:] for item in translated]
        )
    if source == "auto":
        reply["detectedLanguage"] = {"confidence": 0.0, "language": model.source_lang}
    return JSONResponse(reply)


def _rebuild(
    results: list[TextTranslation], markup: list[list[HtmlPiece]] | None, alternatives: int
) -> list[list[str]]:
    """Per text, its best translation then its alternatives; HTML texts rebuilt around their markup."""
    if markup is None:
        return [[result.text, *result.alternatives] for result in results]
    remaining = iter(results)
    rebuilt = []
    for pieces in markup:
        nodes = [next(remaining) for piece in pieces if not piece.markup]
        ranks = [[node.text for node in nodes]]
        ranks += [[node.alternatives[rank] for node in nodes] for rank in range(alternatives)]
        rebuilt.append([join_html(pieces, translations) for translations in ranks])
    return rebuilt


def _string_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _check_parameters(values: dict[str, Any]) -> str | None:
    """LibreTranslate's parameter checks, in its order and wording; None when all pass."""
    for name in ("q", "source", "target"):
        if values.get(name) in (None, ""):
            if name == "q" and values.get(name) == "":
                continue  # an empty text is valid: it translates to an empty text
            return f"Invalid request: missing {name} parameter"
    query = values["q"]
    if not (isinstance(query, str) or (isinstance(query, list) and all(isinstance(q, str) for q in query))):
        return "Invalid request: q must be a string or a list of strings"
    for name in ("source", "target"):
        if not isinstance(values[name], str):
            return f"Invalid request: {name} must be a string"
    text_format = values.get("format") or "text"
    if text_format not in ("text", "html"):
        return f"Invalid request: format must be 'text' or 'html', got {text_format!r}"
    alternatives = _alternatives(values)
    return alternatives if isinstance(alternatives, str) else None


def _alternatives(values: dict[str, Any]) -> int | str:
    """Read ``alternatives`` as a count (0 when absent), or say why it is refused."""
    value = values.get("alternatives") or 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON 2.0; 1e400 (infinity) and 2.5 are refused below
    # Strictly ASCII digits: str.isdigit() accepts "²", and "+-3" passes an lstrip("+-"); int() raises on both.
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value, re.ASCII):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return f"Invalid request: alternatives must be an integer, got {value!r}"
    if not 0 <= value < MAX_BEAM_SIZE:
        return f"Invalid request: alternatives must be between 0 and {MAX_BEAM_SIZE - 1}"
    return value


@router.get("/languages")
async def languages(request: Request) -> list[dict[str, Any]]:
    """List the source languages and the targets each translates to (LibreTranslate's endpoint).

    Parameters
    ----------
    request : Request
        The HTTP request.

    Returns
    -------
    list of dict
        ``{"code", "name", "targets"}`` per source language.

    Notes
    -----
    A model of unknown languages is listed as "und".
    """
    server = server_of(request)
    targets: dict[str, list[str]] = {}
    for model in server.models.values():
        codes = targets.setdefault(model.source_lang, [])
        if model.target_lang not in codes:
            codes.append(model.target_lang)
    return [
        {"code": code, "name": LANGUAGE_NAMES.get(code, code), "targets": codes}
        for code, codes in targets.items()
    ]
