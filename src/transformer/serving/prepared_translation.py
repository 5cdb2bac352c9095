"""A ``/v1/translate`` request read, checked and ready to run, for the plain answer and the streamed one.

:func:`prepare_translation` does every check that can refuse a request, before any answer starts;
:func:`run_translation` translates it and :func:`translation_reply` builds the JSON answer, which the stream
(:mod:`~transformer.serving.api_stream`) sends as its last event.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from transformer.decoding.alignment import check_alignment_layer
from transformer.decoding.constrained_beam_search import check_term_search
from transformer.decoding.glossary import Glossary, GlossaryError
from transformer.decoding.quality_flags import FlagThresholds
from transformer.serving.inline_markup import parse_runs, run_texts
from transformer.serving.language_routing import model_for_languages
from transformer.serving.markup_translations import html_results
from transformer.serving.request_body import describe_json_type, parse_json_body, refuse_non_text_fields
from transformer.serving.request_context import check_api_key, server_of
from transformer.serving.request_glossary import check_term_counts, glossary_from_field
from transformer.serving.served_model import ServedModel
from transformer.serving.server_state import ServerState
from transformer.serving.translate_request import TEXT_FIELDS, TranslateRequest
from transformer.serving.translation_json import sentences_json, timing_json
from transformer.serving.translation_service import SearchOptions, TextTranslation, translate_texts
from transformer.serving.work_budget import request_work, work_over_budget


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


@dataclass(frozen=True)
class PreparedTranslation:
    """A checked ``/v1/translate`` request, ready to run: what both the plain and the streamed answer need.

    Parameters
    ----------
    start : float
        ``time.perf_counter()`` when the request arrived (for ``timing.total_ms``).
    body : TranslateRequest
        The parsed body.
    model : ServedModel
        The model chosen (by name, or by the languages asked or detected).
    options : SearchOptions
        The search the body asks for.
    prefixes : list of str or None
        A target prefix per text.
    alignment_layer : int or None
        The decoder layer alignments come from; None for none.
    glossary : Glossary or None
        The request's glossary.
    runs : list or None
        Each HTML text's runs (``format: "html"``); None for plain text.
    inputs : list of str
        What is translated: the texts, or the HTML runs' text.
    split : bool
        Whether the texts are split into sentences.
    detected : list or None
        The detected languages with ``source: "auto"``; None otherwise.

    Notes
    -----
    Every check that can refuse a request (JSON, key, languages, search, glossary, work budget) has passed, so
    a streamed answer can start with a 200 and nothing but a model failure can still go wrong.
    """

    start: float
    body: TranslateRequest
    model: ServedModel
    options: SearchOptions
    prefixes: list[str] | None
    alignment_layer: int | None
    glossary: Glossary | None
    runs: list[Any] | None
    inputs: list[str]
    split: bool
    detected: list[Any] | None


async def prepare_translation(
    request: Request, authorization: str | None, x_api_key: str | None
) -> PreparedTranslation:
    """Read and check a translate request: body, key, model, search, glossary and work budget.

    Parameters
    ----------
    request : Request
        The HTTP request.
    authorization, x_api_key : str or None
        API key headers.

    Returns
    -------
    PreparedTranslation
        The checked request.

    Raises
    ------
    HTTPException
        400 broken JSON or text, 403 key, 413 over the work budget, 422 bad field or unknown model.

    Notes
    -----
    Languages are detected here (``source: "auto"``), off the event loop.
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
    return PreparedTranslation(
        start, body, model, options, prefixes, alignment_layer, glossary, runs, inputs, split, detected
    )


def run_translation(
    prepared: PreparedTranslation,
    server: ServerState,
    progress: Callable[[int, int, str], None] | None = None,
) -> Awaitable[list[TextTranslation]]:
    """Start translating a prepared request.

    Parameters
    ----------
    prepared : PreparedTranslation
        The checked request.
    server : ServerState
        The server (worker, metrics, cache, settings).
    progress : callable or None
        Stable-text updates per sentence (:func:`~transformer.serving.translation_service.translate_texts`).

    Returns
    -------
    Awaitable
        The texts' translations, before any HTML is put back.

    Notes
    -----
    HTML needs an alignment layer to put its tags back, so one is asked for even without ``alignments``.
    """
    layer = prepared.alignment_layer
    return translate_texts(
        prepared.inputs,
        prepared.model,
        prepared.options,
        server.worker,
        server.metrics,
        prepared.split,
        prepared.prefixes,
        layer if layer is not None or prepared.runs is None else -1,
        FlagThresholds() if prepared.body.flags else None,
        server.config.retry_omissions,
        server.translation_cache,
        prepared.glossary,
        progress,
    )


def translation_reply(prepared: PreparedTranslation, results: list[TextTranslation]) -> dict[str, Any]:
    """Build the JSON answer of ``/v1/translate`` (and the last event of its stream).

    Parameters
    ----------
    prepared : PreparedTranslation
        The checked request.
    results : list of TextTranslation
        Its translations.

    Returns
    -------
    dict
        ``model``, ``translation``, ``sentences``, ``timing`` and, with detection, ``detected_language``.

    Notes
    -----
    HTML texts get their markup back here.
    """
    body = prepared.body
    if prepared.runs is not None:
        results = html_results(prepared.runs, results, keep_alignments=body.alignments)
    translations = [result.text for result in results]
    reply: dict[str, Any] = {
        "model": prepared.model.name,
        "translation": translations[0] if isinstance(body.text, str) else translations,
        "sentences": [sentences_json(result) for result in results],
        "timing": timing_json(results, prepared.start),
    }
    if prepared.detected is not None:
        languages = [{"language": item.language, "confidence": item.confidence} for item in prepared.detected]
        reply["detected_language"] = languages[0] if isinstance(body.text, str) else languages
    return reply


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
