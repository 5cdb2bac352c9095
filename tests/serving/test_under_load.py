"""A real server on loopback: many concurrent clients, disconnects mid-request, and SIGTERM.

Every request loop here is bounded in count and time, talks to 127.0.0.1 only, and the servers stop by
themselves at the end of each test.
"""

import dataclasses
import json
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.serving.conftest import READY_TIMEOUT_S, free_port, running_server
from transformer.decoding.translator import Translator
from transformer.serving.config import ServeConfig

CLIENTS = 32
#: Longest the SIGTERM test waits for its request and for the server to exit.
REQUEST_TIMEOUT_S = 120.0
REQUESTS_PER_CLIENT = 4


def metric(base_url: str, pattern: str) -> float:
    """Read one value from the server's /metrics (0 when the series does not exist yet)."""
    text = httpx.get(f"{base_url}/metrics", timeout=5.0).text
    match = re.search(rf"^{pattern} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


@pytest.fixture(scope="module")
def alone_translations(served_run: Path, valid_sentences: list[str]) -> dict[int, dict[str, str]]:
    """Each validation sentence translated alone by the offline translator, greedy and with beam 2."""
    translations: dict[int, dict[str, str]] = {}
    for beam in (1, 2):
        translator = Translator.from_checkpoint(served_run, device="cpu")
        translator.decode_config = dataclasses.replace(translator.decode_config, beam_size=beam)
        translations[beam] = {sentence: translator.translate([sentence])[0] for sentence in valid_sentences}
    return translations


@pytest.mark.parametrize("batching", ["continuous", "request"])
def test_many_concurrent_clients_each_get_what_the_sentence_gets_alone(
    served_run: Path, valid_sentences: list[str], alone_translations, batching: str
) -> None:
    config = ServeConfig(
        checkpoints={"default": served_run}, port=free_port(), batching=batching, max_batch_tokens=400
    )

    def client(seed: int) -> list[tuple[int, list[str], list[str]]]:
        generator = random.Random(seed)
        answers = []
        with httpx.Client(base_url=base_url, timeout=READY_TIMEOUT_S) as session:
            for _ in range(REQUESTS_PER_CLIENT):
                beam = generator.choice([1, 2])
                texts = generator.sample(valid_sentences, generator.randrange(1, 4))
                reply = session.post("/v1/translate", json={"text": texts, "beam": beam})
                assert reply.status_code == 200, reply.text
                answers.append((beam, texts, reply.json()["translation"]))
        return answers

    with running_server(config) as base_url, ThreadPoolExecutor(CLIENTS) as pool:
        results = [answer for answers in pool.map(client, range(CLIENTS)) for answer in answers]
        rows_count = metric(base_url, "transformer_serve_batch_rows_count")
        single_row_steps = metric(base_url, r'transformer_serve_batch_rows_bucket\{le="1.0"\}')
    assert len(results) == CLIENTS * REQUESTS_PER_CLIENT
    for beam, texts, translations in results:
        assert translations == [alone_translations[beam][text] for text in texts]
    # The sentences really shared batches: most steps ran more than one row.
    assert single_row_steps < rows_count / 2


def test_a_client_that_disconnects_has_its_sentences_dropped(served_run: Path, valid_sentences) -> None:
    config = ServeConfig(
        checkpoints={"default": served_run}, port=free_port(), max_batch_tokens=40, max_chars=100_000
    )
    sentences = (valid_sentences * 8)[:150]
    body = json.dumps({"text": sentences}).encode()
    with running_server(config) as base_url:
        with socket.create_connection(("127.0.0.1", config.port), timeout=5.0) as connection:
            connection.sendall(
                b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            deadline = time.monotonic() + READY_TIMEOUT_S
            while metric(base_url, "transformer_serve_running_sentences") == 0:
                assert time.monotonic() < deadline, "the request never started decoding"
                time.sleep(0.005)
        # The connection is closed: the server notices, and the remaining sentences leave queue and batch.
        deadline = time.monotonic() + READY_TIMEOUT_S
        while metric(base_url, "transformer_serve_sentences_cancelled_total") == 0:
            assert time.monotonic() < deadline, "the disconnect was not noticed"
            time.sleep(0.02)
        while metric(base_url, "transformer_serve_running_sentences") or metric(
            base_url, "transformer_serve_queue_depth"
        ):
            assert time.monotonic() < deadline, "the dropped sentences still decode"
            time.sleep(0.02)
        cancelled = metric(base_url, "transformer_serve_sentences_cancelled_total")
        assert 0 < cancelled <= len(sentences)
        # Only the warm-up sentence was counted as translated: the request never completed.
        assert metric(base_url, r'transformer_serve_sentences_total\{model="default"\}') == 1
        reply = httpx.post(f"{base_url}/v1/translate", json={"text": valid_sentences[0]}, timeout=10.0)
        assert reply.status_code == 200


def test_sigterm_finishes_requests_in_flight_then_exits_0(
    served_run: Path, valid_sentences, tmp_path
) -> None:
    port = free_port()
    command = [
        sys.executable, "-m", "transformer.cli", "serve", "--checkpoint", str(served_run), "--port", str(port),
        "--max-batch-tokens", "40", "--max-chars", "100000", "--device", "cpu",
    ]  # fmt: skip
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            assert server.poll() is None and time.monotonic() < deadline, (
                tmp_path / "server.log"
            ).read_text()
            try:
                if httpx.get(f"{base_url}/ready", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        # Decoded one at a time (--max-batch-tokens 40): in flight for seconds, and finished within
        # REQUEST_TIMEOUT_S even on a loaded 2-core machine (80 sentences took over 30 s under a parallel suite).
        sentences = (valid_sentences * 4)[:24]
        replies: list[httpx.Response] = []
        request = threading.Thread(
            target=lambda: replies.append(
                httpx.post(f"{base_url}/v1/translate", json={"text": sentences}, timeout=REQUEST_TIMEOUT_S)
            )
        )
        request.start()
        while metric(base_url, "transformer_serve_running_sentences") == 0:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        server.send_signal(signal.SIGTERM)
        request.join(REQUEST_TIMEOUT_S)
        assert server.wait(REQUEST_TIMEOUT_S) == 0, (tmp_path / "server.log").read_text()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
    assert len(replies) == 1 and replies[0].status_code == 200
    assert len(replies[0].json()["translation"]) == len(sentences)
    assert all(isinstance(text, str) for text in replies[0].json()["translation"])
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base_url}/health", timeout=2.0)
