"""Fixtures of the server's tests: a small trained model, an in-process app, a real server on loopback."""

import contextlib
import importlib.util
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

#: The serve extra's packages; without them the tests that need them skip (the extra is optional).
SERVE_EXTRA = ("fastapi", "uvicorn", "prometheus_client", "sentencex", "httpx", "multipart")
MISSING = [name for name in SERVE_EXTRA if importlib.util.find_spec(name) is None]
if MISSING:  # every module but test_continuous_batching.py (torch only) needs the server: leave them out
    collect_ignore_glob = ["test_[!c]*.py"]

#: Longest a test waits for a server to become ready or to answer.
READY_TIMEOUT_S = 30.0


def wait_until_ready(client: Any) -> None:
    """Poll ``/ready`` until the warm-up is done."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while client.get("/ready").status_code != 200:
        assert time.monotonic() < deadline, "the server did not become ready"
        time.sleep(0.02)


@pytest.fixture
def make_client(served_run: Path) -> Iterator[Callable[..., Any]]:
    """Start in-process apps (FastAPI's TestClient) with settings over the defaults; stop them after."""
    from fastapi.testclient import TestClient

    from transformer.serving.app import create_app
    from transformer.serving.config import ServeConfig
    from transformer.serving.server import build_server_state

    stack = contextlib.ExitStack()

    def start(**settings: object) -> TestClient:
        checkpoints = settings.pop("checkpoints", {"default": served_run})
        config = ServeConfig(checkpoints=checkpoints, **settings)  # type: ignore[arg-type]
        client = stack.enter_context(TestClient(create_app(build_server_state(config))))
        wait_until_ready(client)
        return client

    with stack:
        yield start


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def running_server(config: Any) -> Iterator[str]:
    """Run a real uvicorn server on loopback in a thread; yield its base URL; shut it down after.

    Configured by the server's own :func:`~transformer.serving.server.uvicorn_config`, so what a test sees
    on the socket (the head-timeout protocol, keep-alive, the redacted access log) is what
    ``transformer serve`` runs.
    """
    import uvicorn

    from transformer.serving.app import create_app
    from transformer.serving.server import build_server_state, uvicorn_config

    assert config.host == "127.0.0.1", "test servers listen on loopback only"
    server = uvicorn.Server(uvicorn_config(create_app(build_server_state(config)), config, "warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{config.port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not (server.started and server_ready(base_url)):
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.05)
        yield base_url
    finally:
        server.should_exit = True
        thread.join(READY_TIMEOUT_S)
        assert not thread.is_alive(), "the server did not stop"


def server_ready(base_url: str) -> bool:
    """Whether the server at ``base_url`` answers ``/ready`` with 200 now (False while it cannot connect)."""
    import httpx

    try:
        return httpx.get(f"{base_url}/ready", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False
