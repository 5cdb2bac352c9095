"""LibreTranslate's API: its request forms, reply fields, error shape and codes."""

import dataclasses
import html
import urllib.error
from pathlib import Path

import pytest

from tests.serving.busy_worker import WAIT_S, post_in_thread, wait_for_queue_depth, worker_held
from tests.serving.conftest import free_port, running_server
from transformer.decoding.translator import Translator
from transformer.serving.config import ServeConfig


@pytest.fixture(scope="module")
def translator(served_run: Path) -> Translator:
    return Translator.from_checkpoint(served_run, device="cpu")


def test_json_string_and_list(make_client, translator: Translator, valid_sentences) -> None:
    client = make_client()
    first, second = valid_sentences[:2]
    reply = client.post("/translate", json={"q": first, "source": "en", "target": "de"})
    assert reply.status_code == 200
    assert reply.json() == {"translatedText": translator.translate([first])[0]}
    reply = client.post("/translate", json={"q": [first, "", second], "source": "en", "target": "de"})
    assert reply.json() == {
        "translatedText": [translator.translate([first])[0], "", translator.translate([second])[0]]
    }


def test_form_body_auto_source_and_alternatives(make_client, served_run: Path, valid_sentences) -> None:
    client = make_client()
    sentence = valid_sentences[2]
    reply = client.post(
        "/translate",
        data={"q": sentence, "source": "auto", "target": "de", "format": "text", "alternatives": "2"},
    )
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert data["detectedLanguage"]["language"] == "en" and 50 < data["detectedLanguage"]["confidence"] <= 100
    # Two alternatives: a beam of at least 3 (the model's is 2), its 2nd and 3rd candidates.
    searching = Translator.from_checkpoint(served_run, device="cpu")
    searching.decode_config = dataclasses.replace(searching.decode_config, beam_size=3, nbest=3)
    candidates = [candidate.text for candidate in searching.translate_nbest([sentence])[0]]
    assert data["translatedText"] == candidates[0]
    assert data["alternatives"] == candidates[1:]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"source": "en", "target": "de"}, "Invalid request: missing q parameter"),
        ({"q": "a", "target": "de"}, "Invalid request: missing source parameter"),
        ({"q": "a", "source": "en"}, "Invalid request: missing target parameter"),
        ({"q": 5, "source": "en", "target": "de"}, "q must be a string or a list of strings"),
        ({"q": "a", "source": "fr", "target": "de"}, "fr is not supported"),
        ({"q": "a", "source": "en", "target": "fr"}, "fr is not supported"),
        ({"q": "a", "source": "en", "target": "de", "format": "pdf"}, "format must be 'text' or 'html'"),
        (
            {"q": "a", "source": "en", "target": "de", "alternatives": "many"},
            "alternatives must be an integer",
        ),
        (
            {"q": "a", "source": "en", "target": "de", "alternatives": 99},
            "alternatives must be between 0 and 15",
        ),
        ({"q": "x" * 61, "source": "en", "target": "de"}, "request (61) exceeds text limit (60)"),
        (
            {"q": ["a", "b"], "source": "en", "target": "de"},
            "request (100; 2 sentences, each at least 50) exceeds text limit (60)",
        ),
    ],
)
def test_errors_are_400_with_an_error_field(make_client, values: dict, message: str) -> None:
    client = make_client(max_chars=60)
    reply = client.post("/translate", json=values)
    assert reply.status_code == 400, reply.text
    assert set(reply.json()) == {"error"} and message in reply.json()["error"]


def test_invalid_json_and_keys(make_client) -> None:
    client = make_client(api_keys=frozenset({"k1"}))
    reply = client.post("/translate", content=b"{oops", headers={"content-type": "application/json"})
    assert reply.status_code == 400 and reply.json()["error"].startswith(
        "Invalid request: the body is not valid JSON"
    )
    values = {"q": "a", "source": "en", "target": "de"}
    assert client.post("/translate", json=values).json() == {"error": "Invalid API key"}
    assert client.post("/translate", json={**values, "api_key": "k2"}).status_code == 403
    assert client.post("/translate", json={**values, "api_key": "k1"}).status_code == 200


def test_full_queue_is_503_with_retry_after(make_client, valid_sentences) -> None:
    client = make_client(max_queue=2)
    with worker_held(client):
        thread, first = post_in_thread(
            client, "/translate", {"q": valid_sentences[:2], "source": "en", "target": "de"}
        )
        wait_for_queue_depth(client, 2)
        reply = client.post("/translate", json={"q": valid_sentences[2], "source": "en", "target": "de"})
        assert reply.status_code == 503 and reply.headers["Retry-After"] == "1"
        assert reply.json()["error"].startswith("Slowdown:")
    thread.join(WAIT_S)
    assert first["reply"].status_code == 200


def test_more_texts_than_the_queue_holds_is_refused_not_retried(make_client, valid_sentences) -> None:
    client = make_client(max_queue=2)
    reply = client.post("/translate", json={"q": valid_sentences[:3], "source": "en", "target": "de"})
    assert reply.status_code == 400 and "Retry-After" not in reply.headers
    assert reply.json() == {
        "error": "Invalid request: request (3 sentences) exceeds the queue (2, --max-queue)"
    }


def test_fields_in_the_query_string_as_libretranslate_reads_them(
    make_client, translator: Translator, valid_sentences
) -> None:
    client = make_client()
    first, second = valid_sentences[:2]
    expected = translator.translate([first, second])
    # No body: the query string alone (deep-translator); a repeated q is a list, as in a form.
    reply = client.post("/translate", params={"q": first, "source": "en", "target": "de"})
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"translatedText": expected[0]}
    reply = client.post(
        "/translate", params=[("q", first), ("q", second), ("source", "en"), ("target", "de")]
    )
    assert reply.json() == {"translatedText": expected}
    # A form is read with the query string, which wins (Flask's request.values, as LibreTranslate reads it).
    reply = client.post("/translate", params={"q": second}, data={"q": first, "source": "en", "target": "de"})
    assert reply.json() == {"translatedText": expected[1]}
    # A JSON body is read alone, as LibreTranslate reads it.
    reply = client.post(
        "/translate", params={"target": "fr"}, json={"q": first, "source": "en", "target": "de"}
    )
    assert reply.json() == {"translatedText": expected[0]}


def test_languages(make_client) -> None:
    assert make_client().get("/languages").json() == [{"code": "en", "name": "English", "targets": ["de"]}]


def test_libretranslates_own_client_talks_to_the_server(
    served_run: Path, translator: Translator, valid_sentences
) -> None:
    libretranslatepy = pytest.importorskip("libretranslatepy")
    config = ServeConfig(checkpoints={"default": served_run}, port=free_port(), api_keys=frozenset({"k1"}))
    with running_server(config) as base_url:
        client = libretranslatepy.LibreTranslateAPI(base_url, api_key="k1")
        assert (
            client.translate(valid_sentences[0], "en", "de") == translator.translate([valid_sentences[0]])[0]
        )
        assert client.languages() == [{"code": "en", "name": "English", "targets": ["de"]}]
        with pytest.raises(urllib.error.HTTPError, match="403"):
            libretranslatepy.LibreTranslateAPI(base_url, api_key="wrong").translate("a", "en", "de")


def test_deep_translators_client_talks_to_the_server(
    served_run: Path, translator: Translator, valid_sentences
) -> None:
    """deep-translator's LibreTranslator sends its fields in the query string of an empty POST."""
    deep_translator = pytest.importorskip("deep_translator")
    config = ServeConfig(checkpoints={"default": served_run}, port=free_port(), api_keys=frozenset({"k1"}))
    with running_server(config) as base_url:
        client = deep_translator.LibreTranslator(
            source="en", target="de", api_key="k1", custom_url=f"{base_url}/"
        )
        sentence = valid_sentences[0]
        assert client.translate(sentence) == translator.translate([sentence])[0]
        assert client.translate_batch(valid_sentences[1:3]) == translator.translate(valid_sentences[1:3])
        wrong = deep_translator.LibreTranslator(
            source="en", target="de", api_key="wrong", custom_url=f"{base_url}/"
        )
        with pytest.raises(deep_translator.exceptions.AuthorizationException):
            wrong.translate(sentence)


def test_html_keeps_its_markup_and_translates_each_text_node(make_client, translator: Translator) -> None:
    client = make_client()
    first, second = "The cooks do not love the cow.", "A man sleeps."
    fragment = f'<p title="x">{first} <b>{second}</b></p>'
    reply = client.post("/translate", json={"q": fragment, "source": "en", "target": "de", "format": "html"})
    assert reply.status_code == 200, reply.text
    expected = [html.escape(text, quote=False) for text in translator.translate([first, second])]
    assert reply.json() == {"translatedText": f'<p title="x">{expected[0]} <b>{expected[1]}</b></p>'}
    with_alternative = client.post(
        "/translate",
        json={"q": [fragment], "source": "en", "target": "de", "format": "html", "alternatives": 1},
    ).json()
    assert len(with_alternative["alternatives"]) == 1 and len(with_alternative["alternatives"][0]) == 1
    assert with_alternative["alternatives"][0][0].startswith('<p title="x">')
    assert with_alternative["alternatives"][0][0].count("<b>") == 1
