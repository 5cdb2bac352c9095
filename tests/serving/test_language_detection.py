"""Language detection: the detector on short sentences, LibreTranslate's /detect and ``source: "auto"``
(per item, refusing a language no model translates), and /v1/translate's ``source``/``target``."""

from types import SimpleNamespace

import pytest
from fastapi import HTTPException

from transformer.decoding.translator import Translator
from transformer.serving.language_detection import DetectedLanguage, LanguageDetector
from transformer.serving.language_routing import choose_model, model_for_languages

FRENCH = "Une femme lit un livre dans le parc."
GERMAN = "Zwei Hunde spielen im Schnee."


@pytest.fixture(scope="module")
def detector() -> LanguageDetector:
    return LanguageDetector()


def test_short_sentences_are_detected_with_a_probability(detector: LanguageDetector) -> None:
    [english, german, french] = detector.detect_each(
        ["A man is riding a bike down the street.", GERMAN, FRENCH]
    )
    assert (english.language, german.language, french.language) == ("en", "de", "fr")
    assert all(0.5 < item.confidence <= 1.0 for item in (english, german, french))
    ranked = detector.detect("Guten Morgen, wie geht es dir?", candidates=3)
    assert ranked[0].language == "de" and len(ranked) == 3
    assert [item.confidence for item in ranked] == sorted((item.confidence for item in ranked), reverse=True)
    assert detector.detect("12345 !!!") == [DetectedLanguage("und", 0.0)]
    assert detector.detect_each([]) == []


def test_detect_answers_in_libretranslates_shape(make_client) -> None:
    client = make_client()
    reply = client.post("/detect", json={"q": GERMAN})
    assert reply.status_code == 200, reply.text
    [first, *rest] = reply.json()
    assert first["language"] == "de" and 50 < first["confidence"] <= 100 and len(rest) <= 2
    both = client.post("/detect", data={"q": [FRENCH, "42"]}).json()
    assert [answers[0]["language"] for answers in both] == ["fr", "und"]
    for body, message in (({}, "missing q"), ({"q": 3}, "q must be a string"), ({"q": ""}, "missing q")):
        refused = client.post("/detect", json=body)
        assert refused.status_code == 400 and message in refused.json()["error"]
    keyed = make_client(api_keys=frozenset({"secret"}))
    assert keyed.post("/detect", json={"q": GERMAN}).status_code == 403
    assert keyed.post("/detect", json={"q": GERMAN, "api_key": "secret"}).status_code == 200


def test_auto_detects_each_item_and_refuses_a_language_no_model_translates(
    make_client, served_run, valid_sentences
) -> None:
    client = make_client()
    offline = Translator.from_checkpoint(served_run, device="cpu")
    texts = [valid_sentences[0], "", valid_sentences[3]]
    reply = client.post("/translate", json={"q": texts, "source": "auto", "target": "de"})
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert data["translatedText"] == offline.translate(texts)
    assert [item["language"] for item in data["detectedLanguage"]] == ["en", "und", "en"]
    refused = client.post(
        "/translate", json={"q": [valid_sentences[0], FRENCH], "source": "auto", "target": "de"}
    )
    assert refused.status_code == 400 and refused.json() == {"error": "fr (detected) is not supported"}
    named = client.post("/translate", json={"q": FRENCH, "source": "fr", "target": "de"})
    assert named.status_code == 400 and named.json() == {"error": "fr is not supported"}


def test_v1_translate_reads_source_and_target(make_client, valid_sentences) -> None:
    client = make_client()
    reply = client.post("/v1/translate", json={"text": valid_sentences[1], "source": "auto"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["detected_language"]["language"] == "en" and reply.json()["model"] == "default"
    listed = client.post("/v1/translate", json={"text": [valid_sentences[1], ""], "target": "de"}).json()
    assert [item["language"] for item in listed["detected_language"]] == ["en", "und"]
    assert "detected_language" not in client.post("/v1/translate", json={"text": "a"}).json()
    numbers = client.post("/v1/translate", json={"text": "42 !", "source": "auto"})
    assert numbers.status_code == 200, numbers.text
    cases = [
        ({"text": FRENCH, "source": "auto"}, 400, "text[0]: detected fr, which no served model translates"),
        ({"text": FRENCH, "source": "auto", "model": "default"}, 400, "text[0]: detected fr, which model"),
        (
            {"text": "a", "source": "en", "target": "fr"},
            422,
            "source/target: fr is not supported (served: en-de)",
        ),
        (
            {"text": "a", "source": "de", "model": "default"},
            422,
            "source: model 'default' translates en to de",
        ),
        ({"text": "a", "source": ""}, 422, "source"),
    ]
    for body, status, message in cases:
        refused = client.post("/v1/translate", json=body)
        assert refused.status_code == status and message in refused.json()["detail"], (body, refused.text)


def _server(*pairs: tuple[str, str]) -> SimpleNamespace:
    models = {f"{source}-{target}": SimpleNamespace(name=f"{source}-{target}", source_lang=source,
                                                  target_lang=target) for source, target in pairs}  # fmt: skip
    return SimpleNamespace(models=models, default_model=next(iter(models.values())))


def test_models_are_chosen_by_pair_and_a_model_of_unknown_languages_fits_any() -> None:
    server = _server(("en", "de"), ("fr", "de"), ("und", "und"))
    assert choose_model(server, "fr", "de").name == "fr-de"  # type: ignore[arg-type, union-attr]
    assert choose_model(server, "auto", "de").name == "en-de"  # type: ignore[arg-type, union-attr]
    assert choose_model(server, "ja", "ko").name == "und-und"  # type: ignore[arg-type, union-attr]
    assert choose_model(_server(("en", "de")), "fr", "de") == "fr is not supported"  # type: ignore[arg-type]
    assert choose_model(_server(("en", "de")), "en", "fr") == "fr is not supported"  # type: ignore[arg-type]
    pair = _server(("en", "de"), ("fr", "de"))
    detections = [DetectedLanguage("en", 0.9), DetectedLanguage("fr", 0.9)]
    with pytest.raises(HTTPException, match="the texts need 2 models"):
        model_for_languages(pair, None, "auto", None, ["a", "b"], detections)  # type: ignore[arg-type]
    one = model_for_languages(pair, None, "auto", "de", ["x", "y"], detections[1:] * 2)  # type: ignore[arg-type]
    assert one.name == "fr-de"
    assert model_for_languages(pair, None, None, None, ["x"], None).name == "en-de"  # type: ignore[arg-type]


def test_a_mixed_list_is_grouped_by_model_in_first_seen_order() -> None:
    from transformer.config.decode import DecodeConfig
    from transformer.serving.libretranslate import _group_jobs

    english, french = (
        SimpleNamespace(name=name, decode_config=DecodeConfig(beam_size=beam), source_lang=language)
        for name, beam, language in (("en-de", 4, "en"), ("fr-de", 2, "fr"))
    )
    jobs = _group_jobs([english, french, english], ["one.", "deux.", "three."], None, 1)  # type: ignore[list-item]
    assert [(job.model.name, job.indices, job.inputs) for job in jobs] == [
        ("en-de", [0, 2], ["one.", "three."]),
        ("fr-de", [1], ["deux."]),
    ]
    # Each group searches with its own model's beam, wide enough for the alternative asked.
    assert [(job.options.beam, job.options.nbest) for job in jobs] == [(4, 2), (2, 2)]
    assert sum(job.work.text_chars for job in jobs) == len("one.deux.three.")
