"""LibreTranslate's HTTP API: ``POST /translate``, ``POST /detect`` and ``GET /languages``, for its clients.

Weblate, browser extensions and chat bots call LibreTranslate; answering in its shapes lets them use a
model trained here unchanged. Requests come as JSON, as a form or in the query string (deep-translator sends
its fields there); replies are ``{"translatedText": ...}`` (a string for a string ``q``, a list for a list)
with ``alternatives`` when asked, and errors are ``{"error": "..."}`` with LibreTranslate's codes: 400 for a
bad or missing parameter (the work budget included, as LibreTranslate answers its character and batch
limits), 403 for a missing or wrong key, 500 when translation fails; a full queue is 503 with
``Retry-After``.
"""

import asyncio
import re
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from transformer.config.decode import DecodeConfig
from transformer.decoding.glossary import Glossary, GlossaryError
from transformer.serving.config import MAX_BEAM_SIZE
from transformer.serving.inline_markup import MarkupRun, parse_runs, run_texts
from transformer.serving.language_detection import UNDETERMINED, DetectedLanguage
from transformer.serving.language_routing import choose_model
from transformer.serving.markup_translations import rebuild_text_markup
from transformer.serving.request_body import parse_json_body, refuse_non_text_fields
from transformer.serving.request_context import CLIENT_CLOSED_REQUEST, server_of, until_disconnected
from transformer.serving.request_glossary import check_term_counts, glossary_from_field
from transformer.serving.served_model import UNKNOWN_LANGUAGE, ServedModel
from transformer.serving.server_state import ServerState
from transformer.serving.translation_service import (
    SearchOptions,
    TextTranslation,
    TranslationError,
    translate_texts,
)
from transformer.serving.work_budget import RequestWork, combined_work, request_work, work_over_budget
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
    refuse_non_text_fields(values, frozenset({"q", "glossary"}))
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


@router.post("/translate")
async def translate(request: Request) -> Response:
    """Translate ``q`` from ``source`` to ``target`` (LibreTranslate's endpoint).

    Parameters
    ----------
    request : Request
        JSON or form with ``q`` (string or list), ``source``, ``target``, ``format`` ("text" or "html"),
        ``alternatives`` (int), ``api_key`` and this server's ``glossary`` (an object of source term: target
        term, a list of pairs, or ``--glossary`` file lines as one string).

    Returns
    -------
    Response
        ``{"translatedText": ...}``, plus ``alternatives`` when asked and ``detectedLanguage`` for "auto";
        or ``{"error": ...}``.

    Notes
    -----
    ``format: html`` keeps the markup: the text between block-level tags is translated sentence by sentence and
    its inline tags put back around the aligned words (:mod:`transformer.serving.inline_markup`), so "The
    <b>dog</b> sleeps." is translated as one sentence.
    ``source: "auto"`` detects each text's language on its own
    (:mod:`~transformer.serving.language_detection`; the markup left out) and translates it with the model of
    that language and the target, several models sharing one request when the texts differ; a detected
    language no model translates is 400 naming it. ``detectedLanguage`` is then one detection (a string
    ``q``) or one per text.
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
    query = values["q"]
    texts = [query] if isinstance(query, str) else list(query)
    markup = [parse_runs(text) for text in texts] if values.get("format") == "html" else None
    plain = [" ".join(run.text for run in runs if not run.markup) for runs in markup] if markup else texts
    detected = await _detected_languages(server, plain) if source == "auto" else None
    chosen = _models_per_text(server, source, target, plain, detected)
    if isinstance(chosen, str):
        return lt_error(400, chosen)
    alternatives = _alternatives(values)
    assert isinstance(alternatives, int)  # _check_parameters refused the others
    if markup is not None and any(model.translator is None for model in chosen):
        return lt_error(400, "Invalid request: format html needs a model served with --engine pytorch")
    glossary = _glossary(values.get("glossary"), chosen, alternatives)
    if isinstance(glossary, str):
        return lt_error(400, glossary)
    try:
        check_term_counts(glossary, plain)
    except GlossaryError as error:
        return lt_error(400, f"Invalid request: {error}")
    jobs = _group_jobs(chosen, texts, markup, alternatives)
    problem = work_over_budget(
        combined_work([job.work for job in jobs]), server.config.max_chars, server.config.max_queue,
        "libretranslate",
    )  # fmt: skip
    if problem is not None:
        return lt_error(400, problem)
    layer = -1 if markup is not None else None  # HTML's tags go back through the alignment
    retry = server.config.retry_omissions
    try:
        results = await until_disconnected(
            request,
            _all_or_none([
                translate_texts(job.inputs, job.model, job.options, server.worker, server.metrics,
                                alignment_layer=layer, retry_omissions=retry, cache=server.translation_cache,
                                glossary=glossary)
                for job in jobs
            ]),
        )  # fmt: skip
    except QueueFullError as error:
        return lt_error(503, f"Slowdown: {error}", {"Retry-After": "1"})
    except WorkerStoppedError as error:
        return lt_error(503, str(error), {"Retry-After": "5"})
    except TranslationError as error:
        return lt_error(500, f"Cannot translate text: {error}")
    if results is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    translated: list[list[str]] = [[] for _ in texts]  # per text: best, then the alternatives
    for job, group_results in zip(jobs, results, strict=True):
        for index, rebuilt in zip(
            job.indices, _rebuild(group_results, job.markup, alternatives), strict=True
        ):
            translated[index] = rebuilt
    return JSONResponse(_reply(translated, isinstance(query, str), alternatives, detected))


async def _all_or_none(work: list[Coroutine[Any, Any, list[TextTranslation]]]) -> list[list[TextTranslation]]:
    """Await every group's translation; when one fails, cancel the others (their rows leave the batch)."""
    tasks = [asyncio.ensure_future(item) for item in work]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


@dataclass(frozen=True)
class _GroupJob:
    """The texts of one request that one model translates, with that model's search and their work."""

    indices: list[int]
    markup: list[list[MarkupRun]] | None
    inputs: list[str]
    model: ServedModel
    options: SearchOptions
    work: RequestWork


def _group_jobs(
    chosen: list[ServedModel], texts: list[str], markup: list[list[MarkupRun]] | None, alternatives: int
) -> list[_GroupJob]:
    """Group a request's texts by their model (several with ``source: "auto"``), in first-seen order."""
    groups: dict[str, list[int]] = {}
    for index, model in enumerate(chosen):
        groups.setdefault(model.name, []).append(index)
    jobs = []
    for indices in groups.values():
        model = chosen[indices[0]]
        options = SearchOptions(
            beam=max(model.decode_config.beam_size, alternatives + 1), nbest=alternatives + 1
        )
        group_markup = [markup[i] for i in indices] if markup else None
        inputs = run_texts(group_markup) if group_markup else [texts[i] for i in indices]
        markup_chars = sum(len(texts[i]) for i in indices) - sum(map(len, inputs))
        config = options.decode_config(model.decode_config)
        work = request_work(inputs, config, model.source_lang, markup_chars=markup_chars)
        jobs.append(_GroupJob(indices, group_markup, inputs, model, options, work))
    return jobs


def _reply(
    translated: list[list[str]], single: bool, alternatives: int, detected: list[DetectedLanguage] | None
) -> dict[str, Any]:
    """LibreTranslate's answer: ``translatedText``, ``alternatives`` when asked, ``detectedLanguage`` for "auto"."""
    reply: dict[str, Any] = {
        "translatedText": translated[0][0] if single else [item[0] for item in translated]
    }
    if alternatives:
        reply["alternatives"] = translated[0][1:] if single else [item[1:] for item in translated]
    if detected is not None:
        languages = [_detection_json(item) for item in detected]
        reply["detectedLanguage"] = languages[0] if single else languages
    return reply


async def _detected_languages(server: ServerState, texts: list[str]) -> list[DetectedLanguage]:
    """Detect each text's language off the event loop (the detector's models load on first use)."""
    return await asyncio.to_thread(server.language_detector.detect_each, texts)


def _detection_json(detected: DetectedLanguage) -> dict[str, Any]:
    """LibreTranslate's shape of a detection: confidence in percent."""
    return {"confidence": round(100.0 * detected.confidence, 2), "language": detected.language}


def _models_per_text(
    server: ServerState, source: str, target: str, texts: list[str], detected: list[DetectedLanguage] | None
) -> list[ServedModel] | str:
    """Choose the model of each text (by its detected language for "auto"), or say why one has none."""
    if detected is None:
        model = choose_model(server, source, target)
        return model if isinstance(model, str) else [model] * len(texts)
    models = []
    for text, found in zip(texts, detected, strict=True):
        if not text.strip() or found.language == UNDETERMINED:  # nothing to go by: any model for the target
            model = choose_model(server, "auto", target)
        else:
            model = choose_model(server, found.language, target)
            if isinstance(model, str) and model.startswith(f"{found.language} is"):
                return f"{found.language} (detected) is not supported"
        if isinstance(model, str):
            return model
        models.append(model)
    return models


@router.post("/detect")
async def detect(request: Request) -> Response:
    """Detect the language of ``q`` (LibreTranslate's endpoint).

    Parameters
    ----------
    request : Request
        JSON or form with ``q`` (a string, or a list of strings) and ``api_key``.

    Returns
    -------
    Response
        For a string, ``[{"confidence": 0-100, "language": "en"}, ...]``: the likeliest languages first (up to
        three); for a list, one such list per text. Or ``{"error": ...}`` (400 for a missing or non-text
        ``q``, 403 for the key).

    Notes
    -----
    Detects among every language the detector knows, served or not. A text with no letters is ``und``.
    """
    server = server_of(request)
    try:
        values = await read_parameters(request)
    except ValueError as error:
        message = str(error)
        return lt_error(400, message if message.startswith("Invalid") else f"Invalid request: {message}")
    if not server.key_is_valid(_string_or_none(values.get("api_key"))):
        return lt_error(403, "Invalid API key")
    query = values.get("q")
    if query in (None, "", []):
        return lt_error(400, "Invalid request: missing q parameter")
    if not (isinstance(query, str) or (isinstance(query, list) and all(isinstance(q, str) for q in query))):
        return lt_error(400, "Invalid request: q must be a string or a list of strings")
    texts = [query] if isinstance(query, str) else query
    problem = work_over_budget(
        request_work(texts, DecodeConfig(), UNKNOWN_LANGUAGE), server.config.max_chars, server.config.max_queue,
        "libretranslate",
    )  # fmt: skip
    if problem is not None:
        return lt_error(400, problem)
    found = await asyncio.to_thread(lambda: [server.language_detector.detect(text) for text in texts])
    answers = [[_detection_json(item) for item in candidates] for candidates in found]
    return JSONResponse(answers[0] if isinstance(query, str) else answers)


def _rebuild(
    results: list[TextTranslation], markup: list[list[MarkupRun]] | None, alternatives: int
) -> list[list[str]]:
    """Per text, its best translation then its alternatives; HTML texts rebuilt with their tags put back."""
    if markup is None:
        return [[result.text, *result.alternatives] for result in results]
    remaining = iter(results)
    rebuilt = []
    for runs in markup:
        translated = [(run, next(remaining)) for run in runs if not run.markup]
        rebuilt.append([rebuild_text_markup(runs, translated, rank) for rank in range(alternatives + 1)])
    return rebuilt


def _glossary(value: Any, chosen: list[ServedModel], alternatives: int) -> Glossary | str | None:
    """Read the ``glossary`` parameter and check the models can take it; a string says why not."""
    try:
        glossary = glossary_from_field(value)
    except GlossaryError as error:
        return f"Invalid request: {error}"
    if glossary is None:
        return None
    for model in chosen:
        if model.translator is None:
            return "Invalid request: glossary needs a model served with --engine pytorch"
        beam = max(model.decode_config.beam_size, alternatives + 1)
        if beam < 2:
            return f"Invalid request: glossary needs beam search; model {model.name!r} is served with greedy search"
    return glossary


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
