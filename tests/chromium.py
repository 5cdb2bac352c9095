"""Headless Chromium for the browser tests: load a page, dump its DOM or screenshot it."""

import shutil
import subprocess
from pathlib import Path

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
