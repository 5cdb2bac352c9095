"""``POST /v1/translate/stream`` with a real HTTP client on loopback, and the stable prefix behind its pieces.

Every server here listens on 127.0.0.1, every loop is bounded in time, and the servers stop at the end of each
test.
"""

import itertools
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from tests.serving.conftest import READY_TIMEOUT_S, free_port, running_server
from tests.serving.test_under_load import metric
from transformer.config.decode import DecodeConfig
from transformer.decoding.translator import Translator
from transformer.model.transformer import Transformer
from transformer.serving.config import ServeConfig
from transformer.serving.continuous_batching import ContinuousBatch, SentenceToDecode
from transformer.serving.stable_prefix import common_prefix, stable_prefixes


def read_events(response: httpx.Response) -> list[tuple[str, Any]]:
    """Parse a ``text/event-stream`` body into (event, data) pairs, keep-alive comments skipped."""
    events, kind, data = [], "message", []
    for line in response.iter_lines():
        if not line:
            if data:
                events.append((kind, json.loads("\n".join(data))))
            kind, data = "message", []
        elif line.startswith("event:"):
            kind = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].removeprefix(" "))
    return events


def stream(base_url: str, body: dict[str, Any]) -> tuple[httpx.Response, list[tuple[str, Any]]]:
    with httpx.stream(
        "POST", f"{base_url}/v1/translate/stream", json=body, timeout=READY_TIMEOUT_S
    ) as response:
        if response.status_code != 200:
            response.read()
            return response, []
        return response, read_events(response)


def test_common_prefix() -> None:
    assert common_prefix([[1, 2, 3], [1, 2, 4], [1, 2]]) == [1, 2]
    assert common_prefix([[5, 6]]) == [5, 6]
    assert common_prefix([[1], [2]]) == [] == common_prefix([])


@pytest.mark.parametrize("beam", [1, 4])
def test_a_stable_prefix_only_grows_and_begins_the_final_translation(
    served_run: Path, valid_sentences: list[str], beam: int
) -> None:
    translator = Translator.from_checkpoint(served_run, device="cpu")
    model = translator.model
    assert isinstance(model, Transformer)
    config = DecodeConfig(beam_size=beam, max_length_offset=10)
    batch = ContinuousBatch(model, beam)
    eos = model.config.eos_id
    sentences = valid_sentences[:12]
    keys = list(range(len(sentences)))
    seen: dict[int, list[list[int]]] = {key: [] for key in keys}
    finals: dict[int, list[int]] = {}
    with torch.inference_mode():
        batch.admit(
            [SentenceToDecode(key, [*translator.tokenizer.encode(text), eos], config)
             for key, text in zip(keys, sentences, strict=True)]
        )  # fmt: skip
        for _ in range(200):
            for result in batch.step():
                finals[result.key] = result.hypotheses[0].tokens  # type: ignore[index]
            for key, tokens in stable_prefixes(batch, set(keys)):
                seen[key].append(tokens)  # type: ignore[index]
            if not batch.num_sentences:
                break
    assert sorted(finals) == keys
    grew = 0
    for key in keys:
        prefixes = seen[key]
        assert all(len(a) <= len(b) for a, b in itertools.pairwise(prefixes))  # never shrinks
        assert all(finals[key][: len(tokens)] == tokens for tokens in prefixes)  # always begins the final one
        grew += len({len(tokens) for tokens in prefixes})
        if beam == 1:  # greedy: every chosen token is certain at once
            assert [len(tokens) for tokens in prefixes] == list(range(1, len(prefixes) + 1))
    assert grew > len(keys)  # words came before the sentences ended


@pytest.mark.parametrize("beam", [1, 4])
def test_pieces_add_up_to_the_answer_which_is_the_plain_one(
    served_run: Path, valid_sentences: list[str], beam: int
) -> None:
    config = ServeConfig(checkpoints={"default": served_run}, port=free_port())
    text = " ".join(valid_sentences[:3])
    body = {"text": [text, valid_sentences[3]], "beam": beam}
    with running_server(config) as base_url:
        response, events = stream(base_url, body)
        plain = httpx.post(f"{base_url}/v1/translate", json=body, timeout=READY_TIMEOUT_S).json()
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "done" and kinds.count("done") == 1 and set(kinds[:-1]) == {"piece"}
    done = events[-1][1]
    assert {key: value for key, value in done.items() if key != "timing"} == {
        key: value for key, value in plain.items() if key != "timing"
    }
    built: dict[tuple[int, int], str] = {}
    for _, piece in events[:-1]:
        where = (piece["text"], piece["sentence"])
        assert piece["delta"] is not None and piece["translation"] == built.get(where, "") + piece["delta"]
        built[where] = piece["translation"]
    finals = {
        (text_index, sentence_index): sentence["translation"]
        for text_index, sentences in enumerate(done["sentences"])
        for sentence_index, sentence in enumerate(sentences)
    }
    assert built == finals
    assert len(events) - 1 > len(finals)  # some sentence came in more than one piece


def test_whole_searches_and_cached_sentences_come_in_one_piece(
    served_run: Path, valid_sentences: list[str]
) -> None:
    config = ServeConfig(checkpoints={"default": served_run}, port=free_port(), cache_size=100)
    body = {"text": valid_sentences[:2], "sampling": True, "nbest": 2, "seed": 3}
    with running_server(config) as base_url:
        _, sampled = stream(base_url, body)
        plain = httpx.post(f"{base_url}/v1/translate", json={"text": valid_sentences[:2]}, timeout=30).json()
        _, cached = stream(base_url, {"text": valid_sentences[:2]})  # both now in the cache
    assert [kind for kind, _ in sampled] == ["piece", "piece", "done"]
    assert [kind for kind, _ in cached] == ["piece", "piece", "done"]
    assert [data["translation"] for _, data in cached[:2]] == plain["translation"]
    assert cached[-1][1]["translation"] == plain["translation"]


def test_refusals_are_http_statuses_before_any_event(served_run: Path) -> None:
    config = ServeConfig(checkpoints={"default": served_run}, port=free_port(), max_chars=200)
    with running_server(config) as base_url:
        url = f"{base_url}/v1/translate/stream"
        assert httpx.post(url, content=b"{broken", timeout=10).status_code == 400
        html = httpx.post(url, json={"text": "<b>A</b> cow.", "format": "html"}, timeout=10)
        assert html.status_code == 422 and "not streamed" in html.json()["detail"]
        assert httpx.post(url, json={"text": "A cow.", "model": "missing"}, timeout=10).status_code == 422
        assert httpx.post(url, json={"text": "A cow. " * 100}, timeout=10).status_code == 413
        assert httpx.post(url, json={"text": "A cow.", "beam": 0}, timeout=10).status_code == 422


def test_a_client_that_disconnects_mid_stream_frees_its_rows(
    served_run: Path, valid_sentences: list[str]
) -> None:
    config = ServeConfig(
        checkpoints={"default": served_run}, port=free_port(), max_batch_tokens=40, max_chars=100_000
    )
    sentences = (valid_sentences * 8)[:150]
    with running_server(config) as base_url:
        with httpx.stream(
            "POST", f"{base_url}/v1/translate/stream", json={"text": sentences}, timeout=READY_TIMEOUT_S
        ) as response:
            assert response.status_code == 200
            first = next(line for line in response.iter_lines() if line.startswith("event:"))
            assert first == "event: piece"
        # Closed after one event: the stream's generator ends, the request is cancelled.
        deadline = time.monotonic() + READY_TIMEOUT_S
        while metric(base_url, "transformer_serve_sentences_cancelled_total") == 0:
            assert time.monotonic() < deadline, "the disconnect was not noticed"
            time.sleep(0.02)
        while metric(base_url, "transformer_serve_running_sentences") or metric(
            base_url, "transformer_serve_queue_depth"
        ):
            assert time.monotonic() < deadline, "the dropped sentences still decode"
            time.sleep(0.02)
        assert 0 < metric(base_url, "transformer_serve_sentences_cancelled_total") <= len(sentences)
        _, events = stream(base_url, {"text": valid_sentences[0]})
        assert events[-1][0] == "done"


def test_a_model_failure_after_the_stream_began_is_an_error_event(make_client) -> None:
    client = make_client(fp32_kernels="mkl")  # weights edited in place: no packed copies
    model = client.app.state.server.models["default"].engine_model
    weight = next(model.decoder.parameters())
    saved = weight.detach().clone()
    with torch.no_grad():
        weight.fill_(float("nan"))
    try:
        with client.stream(
            "POST", "/v1/translate/stream", json={"text": "The cooks do not love the cow."}
        ) as reply:
            assert reply.status_code == 200
            events = read_events(reply)
    finally:
        with torch.no_grad():
            weight.copy_(saved)
    assert [kind for kind, _ in events] == ["error"]
    assert "model 'default'" in events[0][1]["detail"] and "NaN" in events[0][1]["detail"]
