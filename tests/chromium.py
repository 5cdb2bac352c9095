"""Headless Chromium for the browser tests: load a page, dump its DOM or screenshot it, or wait on it in real time.

:func:`run_chromium` runs the page under a virtual time budget, which fast-forwards timers but races a streamed
response body (the budget runs out while chunks are still arriving). :func:`evaluate_when` drives Chromium over
its DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON messages ended by NUL, no websocket) and
polls an expression in real time, for pages that read a stream.
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def run_chromium(
    tmp_path: Path,
    url: str,
    *mode: str,
    window_size: tuple[int, int],
    virtual_time_budget_ms: int,
    timeout_s: float,
) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on ``url`` in a fresh profile under ``tmp_path``; skip the test without Chromium.

    ``mode`` is what to do with the page (``--dump-dom``, ``--screenshot=PATH``); ``window_size`` is
    (width, height) in pixels; ``virtual_time_budget_ms`` is how long the page's scripts may run.
    """
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not on PATH (Debian: apt-get install chromium)")
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    width, height = window_size
    window = [f"--window-size={width},{height}", f"--virtual-time-budget={virtual_time_budget_ms}"]
    command = [chromium, *CHROMIUM_FLAGS, *window, f"--user-data-dir={profile}", *mode, url]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def evaluate_when(tmp_path: Path, url: str, expression: str, timeout_s: float = 30.0) -> Any:
    """Open ``url`` in headless Chromium and return ``expression``'s value once it is truthy (real time).

    ``expression`` is JavaScript evaluated in the page every 50 ms; the test fails if it stays falsy for
    ``timeout_s``. Skips the test without Chromium.
    """
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not on PATH (Debian: apt-get install chromium)")
    binary = "/usr/lib/chromium/chromium" if Path("/usr/lib/chromium/chromium").exists() else "chromium"
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    to_browser, from_browser = os.pipe(), os.pipe()  # Chromium reads fd 3 and writes fd 4

    def give_pipes() -> None:
        reading, writing = os.dup(to_browser[0]), os.dup(from_browser[1])
        os.dup2(reading, 3)
        os.dup2(writing, 4)

    command = [
        binary,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        "--remote-debugging-pipe",
        "about:blank",
    ]
    browser = subprocess.Popen(command, preexec_fn=give_pipes, close_fds=False,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    os.close(to_browser[0])
    os.close(from_browser[1])
    with (
        os.fdopen(to_browser[1], "wb", buffering=0) as requests,
        os.fdopen(from_browser[0], "rb", buffering=0) as replies,
    ):
        pending = b""
        counter = iter(range(1, 1_000_000))

        def call(method: str, params: dict[str, Any], session: str | None = None) -> dict[str, Any]:
            nonlocal pending
            number = next(counter)
            message = {
                "id": number,
                "method": method,
                "params": params,
                **({"sessionId": session} if session else {}),
            }
            requests.write(json.dumps(message).encode() + b"\0")
            while True:
                while b"\0" not in pending:
                    chunk = replies.read(65536)
                    assert chunk, "Chromium closed its DevTools pipe"
                    pending += chunk
                line, pending = pending.split(b"\0", 1)
                reply = json.loads(line)
                if reply.get("id") == number:
                    assert "error" not in reply, reply
                    return dict(reply["result"])

        try:
            target = call("Target.createTarget", {"url": url})["targetId"]
            session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            deadline = time.monotonic() + timeout_s
            while True:
                value = call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
                if value["result"].get("value"):
                    return value["result"]["value"]
                assert time.monotonic() < deadline, f"{expression!r} stayed false on {url}"
                time.sleep(0.05)
        finally:
            browser.kill()
            browser.wait()
