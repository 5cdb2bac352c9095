"""The HTTP contract of /v1/translate, /health, /ready, /metrics, /v1/models, /v1/attention and the docs."""

import dataclasses
import re
from pathlib import Path

import pytest
import torch

from tests.serving.busy_worker import WAIT_S, post_in_thread, wait_for_queue_depth, worker_held
from transformer.decoding.translator import Translator


@pytest.fixture(scope="module")
def translator(served_run: Path) -> Translator:
    """The offline translator: what ``transformer translate`` uses."""
    return Translator.from_checkpoint(served_run, device="cpu")


def offline(translator: Translator, sentence: str) -> str:
    """The sentence translated alone, as ``transformer translate`` would."""
    return translator.translate([sentence])[0]


def test_a_string_gives_a_string_and_keeps_its_sentences_and_line_breaks(
    make_client, translator: Translator, valid_sentences: list[str]
) -> None:
    client = make_client()
    first, second, third = valid_sentences[:3]
    text = f"{first} {second}\n\n  {third}\n"
    reply = client.post("/v1/translate", json={"text": text})
    assert reply.status_code == 200, reply.text
    data = reply.json()
    expected = [offline(translator, sentence) for sentence in (first, second, third)]
    assert data["translation"] == f"{expected[0]} {expected[1]}\n\n  {expected[2]}\n"
    assert [item["source"] for item in data["sentences"][0]] == [first, second, third]
    assert [item["translation"] for item in data["sentences"][0]] == expected
    assert data["model"] == "default"
    assert set(data["timing"]) == {"total_ms", "queue_ms", "decode_ms"}
    assert data["timing"]["total_ms"] >= data["timing"]["decode_ms"] > 0


def test_a_list_gives_a_list_and_empty_texts_give_empty_translations(
    make_client, translator: Translator, valid_sentences: list[str]
) -> None:
    client = make_client()
    texts = [valid_sentences[3], "", "   ", valid_sentences[4]]
    data = client.post("/v1/translate", json={"text": texts}).json()
    assert data["translation"] == [offline(translator, texts[0]), "", "   ", offline(translator, texts[3])]
    assert data["sentences"][1] == [] and data["sentences"][2] == []
    assert client.post("/v1/translate", json={"text": ""}).json()["translation"] == ""


def test_list_items_are_already_split_one_row_each(
    make_client, translator: Translator, valid_sentences
) -> None:
    client = make_client()
    two_sentences = f"{valid_sentences[0]} {valid_sentences[1]}"
    data = client.post("/v1/translate", json={"text": [two_sentences]}).json()
    assert len(data["sentences"][0]) == 1  # not re-split
    assert data["translation"] == [offline(translator, two_sentences)]
    as_text = client.post("/v1/translate", json={"text": two_sentences}).json()
    assert len(as_text["sentences"][0]) == 2


def test_beam_nbest_and_alpha_are_per_request(make_client, served_run: Path, valid_sentences) -> None:
    client = make_client()
    sentence = valid_sentences[5]
    data = client.post("/v1/translate", json={"text": sentence, "beam": 4, "nbest": 3, "alpha": 1.0}).json()
    nbest = data["sentences"][0][0]["nbest"]
    translator = Translator.from_checkpoint(served_run, device="cpu")
    translator.decode_config = dataclasses.replace(
        translator.decode_config, beam_size=4, nbest=3, length_penalty=1.0
    )
    expected = translator.translate_nbest([sentence])[0]
    assert [item["translation"] for item in nbest] == [candidate.text for candidate in expected]
    assert [item["score"] for item in nbest] == pytest.approx(
        [candidate.score for candidate in expected], abs=1e-4
    )
    scores = [item["score"] for item in nbest]
    assert scores == sorted(scores, reverse=True)
    # The server's continuous batch records each hypothesis's steps as the offline search does.
    assert [item["confidence"] for item in nbest] == pytest.approx(
        [candidate.confidence for candidate in expected], abs=1e-5
    )
    assert data["sentences"][0][0]["confidence"] == nbest[0]["confidence"]
    assert all(0.0 < item["confidence"] < 1.0 for item in nbest)
    greedy = client.post("/v1/translate", json={"text": sentence, "beam": 1}).json()
    assert len(greedy["sentences"][0][0]["nbest"]) == 1


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        (b"{not json", {"content-type": "application/json"}, 400, "invalid JSON"),
        (b"{not json", {}, 400, "invalid JSON"),
        (b"", {"content-type": "application/json"}, 400, "invalid JSON: the body is empty"),
        (b"[1, 2]", {"content-type": "application/json"}, 422, "expected a JSON object"),
        (
            b'{"txt": "a"}',
            {"content-type": "application/json"},
            422,
            "text: Field required; txt: Extra inputs",
        ),
        (b'{"text": 5}', {"content-type": "application/json"}, 422, "text"),
        (
            b'{"text": "a", "beam": "4"}',
            {"content-type": "application/json"},
            422,
            "beam: Input should be a valid integer",
        ),
        (
            b'{"text": "a", "beam": 0}',
            {"content-type": "application/json"},
            422,
            "beam: Input should be greater than",
        ),
        (b'{"text": "a", "alpha": -1}', {"content-type": "application/json"}, 422, "alpha"),
        (b'{"text": "a", "beam": 2, "nbest": 3}', {"content-type": "application/json"}, 422, "nbest=3"),
        (
            b'{"text": "a", "model": "nope"}',
            {"content-type": "application/json"},
            422,
            "model: unknown model 'nope'",
        ),
        (b'{"text": ["a", 3]}', {"content-type": "application/json"}, 422, "text"),
    ],
)
def test_bad_requests_get_one_line_naming_the_problem(make_client, body, headers, status, message) -> None:
    client = make_client()
    reply = client.post("/v1/translate", content=body, headers=headers)
    assert reply.status_code == status, reply.text
    detail = reply.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    assert message in detail
    # The server is still fine afterwards.
    assert client.post("/v1/translate", json={"text": "a"}).status_code == 200


def test_text_over_max_chars_is_413_and_a_list_counts_all_its_texts(make_client) -> None:
    client = make_client(max_chars=60)
    assert client.post("/v1/translate", json={"text": "x" * 60}).status_code == 200
    reply = client.post("/v1/translate", json={"text": "x" * 61})
    assert reply.status_code == 413
    assert reply.json()["detail"] == "text: 61 characters, over the limit of 60 (--max-chars)"
    assert client.post("/v1/translate", json={"text": ["x" * 30, "x" * 31]}).status_code == 413


def test_a_request_over_the_whole_queue_is_413_not_a_retry(make_client, valid_sentences) -> None:
    client = make_client(max_queue=2)
    reply = client.post("/v1/translate", json={"text": valid_sentences[:3]})
    assert reply.status_code == 413 and "Retry-After" not in reply.headers
    assert reply.json()["detail"] == (
        "text: 3 sentences, more than the queue holds (2, --max-queue); send them in several requests"
    )


def test_a_request_that_would_fit_an_emptier_queue_is_503_with_retry_after_and_queues_nothing(
    make_client, valid_sentences
) -> None:
    client = make_client(max_queue=2)
    with worker_held(client):
        thread, first = post_in_thread(client, "/v1/translate", {"text": valid_sentences[:2]})
        wait_for_queue_depth(client, 2)
        reply = client.post("/v1/translate", json={"text": valid_sentences[2:3]})
        assert reply.status_code == 503
        assert reply.headers["Retry-After"] == "1"
        assert "2 sentences are waiting and this request adds 1; the queue holds 2" in reply.json()["detail"]
    thread.join(WAIT_S)
    assert first["reply"].status_code == 200
    assert client.post("/v1/translate", json={"text": valid_sentences[:2]}).status_code == 200


def test_api_keys_are_required_when_configured(make_client) -> None:
    client = make_client(api_keys=frozenset({"secret-1", "secret-2"}))
    assert client.post("/v1/translate", json={"text": "a"}).status_code == 403
    wrong = client.post("/v1/translate", json={"text": "a"}, headers={"Authorization": "Bearer secret-3"})
    assert wrong.status_code == 403 and "API key" in wrong.json()["detail"]
    assert (
        client.post(
            "/v1/translate", json={"text": "a"}, headers={"Authorization": "Bearer secret-2"}
        ).status_code
        == 200
    )
    assert (
        client.post("/v1/translate", json={"text": "a"}, headers={"X-API-Key": "secret-1"}).status_code == 200
    )
    # The scheme is case-insensitive (RFC 7235); the key is not.
    for scheme in ("bearer", "BEARER", "  Bearer"):
        headers = {"Authorization": f"{scheme} secret-2"}
        assert client.post("/v1/translate", json={"text": "a"}, headers=headers).status_code == 200, scheme
    for header in ("Bearer SECRET-2", "Basic secret-2", "secret-2"):
        headers = {"Authorization": header}
        assert client.post("/v1/translate", json={"text": "a"}, headers=headers).status_code == 403, header
    assert client.get("/health").status_code == 200  # operations stay open
    assert 'data-keys="1"' in client.get("/").text


def test_health_ready_and_metrics(make_client, valid_sentences) -> None:
    client = make_client()
    assert client.get("/health").json() == {"status": "alive"}
    assert client.get("/ready").json() == {"ready": True, "models": {"default": True}}
    client.post("/v1/translate", json={"text": valid_sentences[:3]})
    client.post("/v1/translate", json={"text": "a", "beam": 0})
    metrics = client.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text

    def value(pattern: str) -> float:
        match = re.search(rf"^{pattern} (\S+)$", text, re.M)
        assert match is not None, pattern
        return float(match.group(1))

    assert value(r'transformer_serve_requests_total\{route="/v1/translate",status="200"\}') == 1
    assert value(r'transformer_serve_requests_total\{route="/v1/translate",status="422"\}') == 1
    assert value(r'transformer_serve_sentences_total\{model="default"\}') == 3 + 1  # and the warm-up's
    assert value(r'transformer_serve_tokens_total\{model="default",side="source"\}') > 3
    assert value("transformer_serve_queue_depth") == 0
    assert value("transformer_serve_batch_rows_count") >= 1
    assert value(r'transformer_serve_sentence_latency_seconds_count\{stage="decoding"\}') == 4
    assert value(r'transformer_serve_request_latency_seconds_count\{route="/v1/translate"\}') == 2


def test_several_models_are_chosen_per_request(make_client, served_run: Path, trained_run: Path) -> None:
    client = make_client(checkpoints={"good": served_run, "early": trained_run})
    models = client.get("/v1/models").json()
    assert models["default"] == "good"
    assert [model["name"] for model in models["models"]] == ["good", "early"]
    assert client.get("/ready").json()["models"] == {"good": True, "early": True}
    early = Translator.from_checkpoint(trained_run, device="cpu")
    sentence = "The cooks do not love the cow."
    reply = client.post("/v1/translate", json={"text": sentence, "model": "early"}).json()
    assert reply["model"] == "early" and reply["translation"] == early.translate([sentence])[0]


def test_openapi_page_and_schema(make_client) -> None:
    client = make_client()
    assert client.get("/docs").status_code == 200
    schema = client.get("/openapi.json").json()
    assert {"/v1/translate", "/translate", "/languages", "/health", "/ready", "/metrics"} <= set(
        schema["paths"]
    )
    # The route reads its body itself; the page still shows the request's fields and their bounds.
    body = schema["paths"]["/v1/translate"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["text"] and body["additionalProperties"] is False
    assert {"text", "beam", "temperature", "prefix"} <= set(body["properties"])
    assert set(schema["paths"]["/health"]) == {"get"}  # HEAD is served, not listed twice


def test_attention_viewer_of_a_sentence(make_client) -> None:
    client = make_client()
    reply = client.get(
        "/v1/attention", params={"source": "The cooks do not love the cow.", "translation": "Die Köche"}
    )
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/html")
    assert '<script type="application/json" id="attention-data">' in reply.text
    assert client.get("/v1/attention", params={"source": "", "translation": "x"}).status_code == 422


def test_a_model_that_computes_nan_fails_that_request_with_500_and_the_server_goes_on(make_client) -> None:
    # The weights are edited in place below, which oneDNN's packed copies would not see: MKL everywhere.
    client = make_client(fp32_kernels="mkl")
    model = client.app.state.server.models["default"].engine_model
    weight = next(model.decoder.parameters())  # the decoder only: encoding stays finite, scores turn NaN
    saved = weight.detach().clone()
    with torch.no_grad():
        weight.fill_(float("nan"))
    reply = client.post("/v1/translate", json={"text": "The cooks do not love the cow."})
    assert reply.status_code == 500
    assert "model 'default'" in reply.json()["detail"] and "NaN" in reply.json()["detail"]
    with torch.no_grad():
        weight.copy_(saved)
    assert client.post("/v1/translate", json={"text": "The cooks do not love the cow."}).status_code == 200


def test_int8_serves_with_continuous_batching(make_client, served_run: Path, valid_sentences) -> None:
    client = make_client(precision="int8", device="cpu")
    reply = client.post("/v1/translate", json={"text": valid_sentences[:4]})
    assert reply.status_code == 200, reply.text
    translations = reply.json()["translation"]
    assert len(translations) == 4 and all(translations)
    # Alone, a sentence gets what the offline int8 translator gives it (int8 activation ranges are measured
    # per batch, so only a lone sentence is comparable).
    offline = Translator.from_checkpoint(served_run, device="cpu", precision="int8")
    alone = client.post("/v1/translate", json={"text": [valid_sentences[0]]}).json()["translation"]
    assert alone == offline.translate([valid_sentences[0]])
    assert client.get("/v1/models").json()["models"][0]["attention"] is False
