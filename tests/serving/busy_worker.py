"""Hold a server's model worker busy so that sentences wait in its queue: how a test fills the queue on purpose."""

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

#: Longest a test waits for the worker or the queue.
WAIT_S = 30.0


@contextlib.contextmanager
def worker_held(client: Any) -> Iterator[None]:
    """Run a call on the worker thread that blocks until the block ends: nothing queued meanwhile is decoded."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        release.wait(WAIT_S)

    client.app.state.server.worker.call(hold)
    assert entered.wait(WAIT_S), "the worker did not take the call"
    try:
        yield
    finally:
        release.set()


def wait_for_queue_depth(client: Any, depth: int) -> None:
    """Poll ``/metrics`` until ``transformer_serve_queue_depth`` is ``depth``."""
    deadline = time.monotonic() + WAIT_S
    while True:
        match = re.search(r"^transformer_serve_queue_depth (\S+)$", client.get("/metrics").text, re.M)
        if match is not None and float(match.group(1)) == depth:
            return
        assert time.monotonic() < deadline, f"the queue never held {depth} sentences"
        time.sleep(0.02)


def post_in_thread(client: Any, path: str, body: dict[str, Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Send a request from another thread (it waits for the worker); its reply lands in the dict's "reply"."""
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(reply=client.post(path, json=body)), daemon=True)
    thread.start()
    return thread, result
