"""Which served model translates a text: by name, by language pair, or by the text's detected language.

Shared by ``/v1/translate`` and LibreTranslate's ``/translate``, so both read languages the same way. A model
whose checkpoint records no languages is ``und`` (:data:`~transformer.serving.served_model.UNKNOWN_LANGUAGE`)
and fits any.
"""

from collections.abc import Sequence

from fastapi import HTTPException

from transformer.serving.language_detection import UNDETERMINED, DetectedLanguage
from transformer.serving.served_model import UNKNOWN_LANGUAGE, ServedModel
from transformer.serving.server_state import ServerState


def _fits(language: str | None, model_language: str) -> bool:
    return language in (None, "auto", model_language) or model_language == UNKNOWN_LANGUAGE


def choose_model(server: ServerState, source: str, target: str | None) -> ServedModel | str:
    """Pick the served model for a language pair, or say why none fits.

    Parameters
    ----------
    server : ServerState
        The server.
    source : str
        Source language code, or "auto" (any).
    target : str or None
        Target language code; None: any.

    Returns
    -------
    ServedModel or str
        The first model whose languages match, else a message in LibreTranslate's wording ("fr is not
        supported"), naming the source when no model reads it, else the target.

    Notes
    -----
    "auto" here matches any source: callers that detect pass the detected language instead.
    """
    for model in server.models.values():
        if _fits(source, model.source_lang) and _fits(target, model.target_lang):
            return model
    if not any(_fits(source, model.source_lang) for model in server.models.values()):
        return f"{source} is not supported"
    return f"{target} is not supported"


def model_for_languages(
    server: ServerState,
    name: str | None,
    source: str | None,
    target: str | None,
    texts: Sequence[str],
    detected: Sequence[DetectedLanguage] | None,
) -> ServedModel:
    """Choose ``/v1/translate``'s model from its ``model``, ``source`` and ``target`` and the detections.

    Parameters
    ----------
    server : ServerState
        The server.
    name : str or None
        The request's ``model``.
    source, target : str or None
        The request's languages (``source`` may be "auto").
    texts : sequence of str
        The texts.
    detected : sequence of DetectedLanguage or None
        Each text's detected language, when the request detects.

    Returns
    -------
    ServedModel
        The model every text goes to.

    Raises
    ------
    HTTPException
        422 for an unknown model, a ``source``/``target`` the named model does not translate, a pair no
        model translates, or texts needing different models; 400 naming a detected language that no model
        (or not the named one) translates.

    Notes
    -----
    One model per request on this endpoint (its reply names one model); LibreTranslate's ``/translate``
    splits a mixed list between models. Blank texts and texts with no letters (``und``) fit any model.
    """
    found_languages = [item.language for item in detected] if detected is not None else [source] * len(texts)
    # A blank text, or one with no letters (und), goes by the others.
    languages = [
        None if not text.strip() or language == UNDETERMINED else language
        for text, language in zip(texts, found_languages, strict=True)
    ]
    if name is not None:
        if name not in server.models:
            raise HTTPException(422, f"model: unknown model {name!r}; served: {', '.join(server.models)}")
        model = server.models[name]
        for field, value, model_language in (
            ("source", source, model.source_lang),
            ("target", target, model.target_lang),
        ):
            if not _fits(value, model_language):
                raise HTTPException(
                    422, f"{field}: model {name!r} translates {model.source_lang} to {model.target_lang}"
                )
        for index, language in enumerate(languages):
            if detected is not None and not _fits(language, model.source_lang):
                raise HTTPException(
                    400, f"text[{index}]: detected {language}, which model {name!r} does not translate (it reads "
                    f"{model.source_lang})",
                )  # fmt: skip
        return model
    if source is None and target is None:
        return server.default_model
    chosen: dict[str, ServedModel] = {}
    for index, language in enumerate(languages):
        found = choose_model(server, language or "auto", target)
        if isinstance(found, str):
            if detected is not None and language is not None and found.startswith(f"{language} is"):
                raise HTTPException(
                    400, f"text[{index}]: detected {language}, which no served model translates"
                )
            raise HTTPException(422, f"source/target: {found} (served: {_pairs(server)})")
        chosen.setdefault(found.name, found)
    if len(chosen) > 1:
        raise HTTPException(
            422, f"text: the texts need {len(chosen)} models ({', '.join(chosen)}); send one request per language, "
            "or use LibreTranslate's /translate, which splits a list between models",
        )  # fmt: skip
    return next(iter(chosen.values())) if chosen else server.default_model


def _pairs(server: ServerState) -> str:
    return ", ".join(f"{model.source_lang}-{model.target_lang}" for model in server.models.values())
