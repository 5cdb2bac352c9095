"""Bad requests at the server's edge (#48): each gets a 4xx and one line naming the field at fault, or works.

One table of (method, path, headers, body) -> (status, message fragment) runs against one in-process app;
the few that need a real socket (the parser's recursion, HEAD's empty body) run against uvicorn on 127.0.0.1.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serving.conftest import free_port, running_server, wait_until_ready
from transformer.cli import main
from transformer.serving.config import ServeConfig

#: The table's server: a budget of 1,000 characters and a queue of 8 sentences, so both limits are reachable.
MAX_CHARS, MAX_QUEUE = 1000, 8

JSON = {"content-type": "application/json"}
#: 10,000 arrays inside each other: Python's parser recurses once per level and stops near 1,000.
NESTED = "[" * 10_000 + "]" * 10_000


def translate(body: str | bytes, headers: dict[str, str] = JSON) -> tuple[str, str, dict[str, str], Any]:
    """A ``POST /v1/translate`` row."""
    return ("POST", "/v1/translate", headers, body)


def libre(body: dict[str, Any]) -> tuple[str, str, dict[str, str], Any]:
    """A LibreTranslate ``POST /translate`` row with a JSON body (en -> de, the test model's pair)."""
    return ("POST", "/translate", JSON, json.dumps({"source": "en", "target": "de", **body}))


BAD_REQUESTS = [
    # Item 5: NUL and escape sequences are refused as the command line refuses them.
    (translate(r'{"text": "a\u0000b"}'), 400, "text line 1: control character U+0000 at character 2"),
    (translate(r'{"text": ["fine", "a\u001b[31mred"]}'), 400, "text[1] line 1: control character U+001B"),
    (translate(r'{"text": "one\ntwo\u0007"}'), 400, "text line 2: control character U+0007 at character 4"),
    (translate(r'{"text": ["a"], "prefix": ["\u0000"]}'), 400, "prefix[0] line 1: control character U+0000"),
    (translate(r'{"text": "a", "model": "de\nfault"}'), 400, "model: control character U+000A"),
    (translate(r'{"text": "tab\tand\r\nCRLF are text"}'), 200, '"translation"'),
    # Item 6: every field counts toward the budget, before anything is queued.
    (
        translate(json.dumps({"text": "a", "prefix": "x" * 1500})),
        413,
        "text and prefix: 1501 characters, over the limit of 1000 (--max-chars)",
    ),
    (
        translate(json.dumps({"text": ["a"] * 1000})),
        413,
        "text: 1000 characters in 1000 sentences count as 50000 (each at least 50)",
    ),
    (translate(json.dumps({"text": "a", "min_length": 1024})), 413, "text and min_length: 1 characters"),
    (
        translate('{"text": "a", "mbr": 64, "mbr_candidates": "beam"}'),
        422,
        "mbr: Input should be less than or equal to 16",
    ),
    (
        translate('{"text": "a", "sampling": true, "nbest": 64}'),
        422,
        "nbest: Input should be less than or equal to 16",
    ),
    # Item 8: no traceback; the CLI's bounds.
    (translate(r'{"text": "a\ud800b"}'), 400, "text line 1: unpaired surrogate U+D800 at character 2"),
    (translate(r'{"text": "a", "model": "\udfff"}'), 400, "model: unpaired surrogate U+DFFF at character 1"),
    (translate(r'{"text": "a", "\ud800": 1}'), 400, "field name: unpaired surrogate U+D800"),
    (
        translate('{"text": "a", "sampling": true, "temperature": 1e-300}'),
        422,
        "temperature: Input should be greater than or equal to 0.01",
    ),
    (
        translate('{"text": "a", "top_p": 1e-300}'),
        422,
        "top_p: Input should be greater than or equal to 0.01",
    ),
    (translate('{"text": "a", "epsilon": 0.9}'), 422, "epsilon: Input should be less than or equal to 0.5"),
    (translate('{"text": "a", "alpha": 1e400}'), 422, "alpha: Input should be a finite number"),
    (translate('{"text": "a", "alpha": NaN}'), 422, "alpha: Input should be a finite number"),
    (translate('{"text": "a", "beam": 1e400}'), 422, "beam: Input should be a valid integer"),
    (
        translate('{"text": "a", "x": ' + NESTED + "}"),
        400,
        "invalid JSON: arrays or objects nested too deeply",
    ),
    (
        translate(b'{"text": "\xff"}'),
        400,
        "invalid JSON: the body is not UTF-8 text (byte 0xff at position 10)",
    ),
    # Item 9: a request that can never be queued is a 413, not a 503 to retry.
    (
        translate(json.dumps({"text": ["a"] * (MAX_QUEUE + 1)})),
        413,
        "text: 9 sentences, more than the queue holds (8, --max-queue)",
    ),
    # Item 12: the body's own type is named; JSON in other content types works; HEAD works.
    (translate('"hello"'), 422, "body: expected a JSON object with a 'text' field, got a string"),
    (translate("null"), 422, "body: expected a JSON object with a 'text' field, got null"),
    (translate("[1, 2]"), 422, "got an array"),
    (translate(""), 400, "invalid JSON: the body is empty"),
    (translate('{"text": "a b"}', {"content-type": "text/plain"}), 200, '"translation"'),
    (
        translate('{"text": "a b"}', {"content-type": "application/x-www-form-urlencoded"}),
        200,
        '"translation"',
    ),
    (("HEAD", "/health", {}, None), 200, ""),
    (("HEAD", "/ready", {}, None), 200, ""),
    (("HEAD", "/metrics", {}, None), 200, ""),
    (("HEAD", "/", {}, None), 200, ""),
    (
        ("GET", "/v1/attention?source=a%00b&translation=x", {}, None),
        400,
        "source line 1: control character U+0000",
    ),
    # The LibreTranslate endpoint, in its own error shape.
    (libre({"q": "a\u0000"}), 400, "Invalid request: q line 1: control character U+0000 at character 2"),
    (libre({"q": ["a", "\u001b"]}), 400, "Invalid request: q[1] line 1: control character U+001B"),
    (libre({"q": "a", "target": "de\n"}), 400, "Invalid request: target: control character U+000A"),
    (
        ("POST", "/translate", JSON, r'{"q": "a\ud800", "source": "en", "target": "de"}'),
        400,
        "q line 1: unpaired surrogate",
    ),
    (
        ("POST", "/translate", JSON, r'{"q": "a", "source": "en", "target": "de", "api_key": "\ud800"}'),
        400,
        "Invalid request: api_key: unpaired surrogate U+D800 at character 1",
    ),
    (
        ("POST", "/translate", JSON, '{"q": "a", "source": "en", "target": "de", "alternatives": 1e400}'),
        400,
        "Invalid request: alternatives must be an integer, got inf",
    ),
    (
        libre({"q": "a", "alternatives": 2.5}),
        400,
        "Invalid request: alternatives must be an integer, got 2.5",
    ),
    (libre({"q": "a", "alternatives": 2.0}), 200, '"alternatives"'),
    (
        ("POST", "/translate?q=a&source=en&target=de&alternatives=%2B-3", {}, None),
        400,
        "Invalid request: alternatives must be an integer, got '+-3'",
    ),
    (
        ("POST", "/translate?q=a&source=en&target=de&alternatives=%C2%B2", {}, None),
        400,
        "Invalid request: alternatives must be an integer, got '\u00b2'",
    ),
    (("POST", "/translate?q=a&source=en&target=de&alternatives=+2", {}, None), 200, '"alternatives"'),
    (("POST", "/translate", JSON, '{"q": ' + NESTED + "}"), 400, "nested too deeply"),
    (("POST", "/translate", JSON, '"hello"'), 400, "Invalid request: the JSON body must be an object"),
    (
        libre({"q": ["a"] * 1000}),
        400,
        "Invalid request: request (50000; 1000 sentences, each at least 50) exceeds text limit (1000)",
    ),
    (
        libre({"q": ["a"] * 9}),
        400,
        "Invalid request: request (9 sentences) exceeds the queue (8, --max-queue)",
    ),
    (("POST", "/translate?q=Hello.&source=en&target=de", {}, None), 200, '"translatedText"'),
]


@pytest.fixture(scope="module")
def client(served_run: Path) -> Iterator[Any]:
    """One in-process app for the whole table (the requests change nothing a later one sees)."""
    from fastapi.testclient import TestClient

    from transformer.serving.app import create_app
    from transformer.serving.server import build_server_state

    config = ServeConfig(checkpoints={"default": served_run}, max_chars=MAX_CHARS, max_queue=MAX_QUEUE)
    with TestClient(create_app(build_server_state(config))) as test_client:
        wait_until_ready(test_client)
        yield test_client


@pytest.mark.parametrize(
    ("request_line", "status", "fragment"),
    BAD_REQUESTS,
    ids=[f"{index}-{row[0][0]}-{row[0][1].split('?')[0]}" for index, row in enumerate(BAD_REQUESTS)],
)
def test_bad_requests_get_one_line_naming_the_field(
    client: Any, request_line: tuple[str, str, dict[str, str], Any], status: int, fragment: str
) -> None:
    method, path, headers, body = request_line
    reply = client.request(method, path, headers=headers, content=body)
    assert reply.status_code == status, reply.text[:500]
    if status >= 400:
        data = reply.json()
        message = data.get("detail", data.get("error"))
        assert isinstance(message, str) and "\n" not in message, data
        assert fragment in message, message
        assert "Retry-After" not in reply.headers  # none of these is worth a retry
    else:
        assert fragment in reply.text
    # The server is still fine afterwards.
    assert client.post("/v1/translate", json={"text": "a"}).status_code == 200


#: Every GET route of the app, with a query that GET answers with 200.
GET_ROUTES = {
    "/": "",
    "/health": "",
    "/ready": "",
    "/metrics": "",
    "/languages": "",
    "/v1/models": "",
    "/v1/attention": "?source=a+dog+.&translation=ein+hund+.",
    "/openapi.json": "",
    "/docs": "",
    "/docs/oauth2-redirect": "",
    "/redoc": "",
}


def test_the_list_of_get_routes_is_every_get_route_of_the_app(client: Any) -> None:
    """A GET route added to the app must join GET_ROUTES, so the HEAD test below covers it."""
    assert get_paths(client.app.routes) == set(GET_ROUTES)


def get_paths(routes: list[Any]) -> set[str]:
    """The paths of the GET routes, into included routers (FastAPI 0.165 keeps each as one entry)."""
    paths = set()
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            paths |= get_paths(included.routes)
        elif "GET" in getattr(route, "methods", ()):
            paths.add(route.path)
    return paths


@pytest.mark.parametrize("path", sorted(GET_ROUTES))
def test_every_get_route_answers_head_as_get_without_the_body(client: Any, path: str) -> None:
    """The README promises HEAD wherever GET is answered (load balancers probe with it), not a 405."""
    get = client.get(path + GET_ROUTES[path])
    head = client.head(path + GET_ROUTES[path])
    assert get.status_code == 200, get.text[:300]
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]


def test_the_budget_is_refused_before_anything_is_queued(client: Any) -> None:
    before = client.get("/metrics").text
    assert client.post("/v1/translate", json={"text": ["a"] * 1000}).status_code == 413
    after = client.get("/metrics").text
    sentences = 'transformer_serve_sentences_total{model="default"}'
    assert [line for line in before.splitlines() if line.startswith(sentences)] == [
        line for line in after.splitlines() if line.startswith(sentences)
    ]


def test_max_chars_below_one_sentence_is_refused_at_start(served_run: Path, capsys) -> None:
    with pytest.raises(ValueError, match="max_chars=49 must be at least 50"):
        ServeConfig(checkpoints={"default": served_run}, max_chars=49)
    assert main(["serve", "--checkpoint", str(served_run), "--port", "0", "--max-chars", "49"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "--max-chars" in error and "50" in error


def test_on_a_real_socket_deep_json_head_and_surrogates_are_4xx(served_run: Path) -> None:
    config = ServeConfig(checkpoints={"default": served_run}, port=free_port(), api_keys=frozenset({"key"}))
    with running_server(config) as base_url, httpx.Client(base_url=base_url, timeout=30.0) as http:
        nested = http.post("/v1/translate", content='{"text": "a", "x": ' + NESTED + "}", headers=JSON)
        assert nested.status_code == 400 and "nested too deeply" in nested.json()["detail"]
        head = http.head("/health")
        assert head.status_code == 200 and head.content == b""
        key = http.post(
            "/translate", content=r'{"q": "a", "source": "en", "target": "de", "api_key": "\ud800"}'
        )
        assert key.status_code == 400 and "api_key: unpaired surrogate" in key.json()["error"]
        lower = http.post("/v1/translate", json={"text": "a"}, headers={"Authorization": "bearer key"})
        assert lower.status_code == 200, lower.text
