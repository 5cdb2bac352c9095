from pathlib import Path

import pytest
import torch

from transformer.autotune import cache as cache_module
from transformer.autotune.cache import ProbeCache
from transformer.autotune.thread_probe import (
    candidate_thread_counts,
    choose_thread_count,
    decide_threads,
    measure_thread_seconds,
    usable_cpus,
)
from transformer.autotune.workload import ProbeShape

SHAPE = ProbeShape(d_model=64, d_ff=256, rows=128)


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch) -> None:
    monkeypatch.setattr(cache_module.os, "getloadavg", lambda: (0.1, 0.1, 0.1))


def test_candidates_are_powers_of_two_up_to_the_usable_cpus() -> None:
    assert candidate_thread_counts(2, 2) == (1, 2)
    assert candidate_thread_counts(12, 6) == (1, 2, 4, 6, 8, 12)
    # PyTorch's default counted the host's 32 cores in a container allowed 2 CPUs: never a candidate.
    assert candidate_thread_counts(2, 32) == (1, 2)
    assert candidate_thread_counts(1, 1) == (1,)


def test_usable_cpus_honours_the_container_quota(tmp_path: Path) -> None:
    quota = tmp_path / "cpu.max"
    quota.write_text("150000 100000\n")  # 1.5 CPUs: two threads can run
    assert usable_cpus(quota) == min(2, usable_cpus(tmp_path / "missing"))
    quota.write_text("max 100000\n")
    assert usable_cpus(quota) == usable_cpus(tmp_path / "missing") >= 1


def test_the_largest_count_within_five_percent_of_the_fastest_wins() -> None:
    assert choose_thread_count({"1": 0.0133, "2": 0.0074}) == 2
    assert choose_thread_count({"1": 0.010, "2": 0.030}) == 1  # oversubscribed: one thread is faster
    assert choose_thread_count({"1": 0.0100, "2": 0.0104, "4": 0.0200}) == 2


def test_decide_threads_measures_once_and_caches(tmp_path: Path) -> None:
    calls = []

    def fake_probe(shape: ProbeShape, counts: tuple[int, ...]) -> dict[str, float]:
        calls.append(counts)
        return {"1": 0.010, "2": 0.030, "4": 0.040}

    cache = ProbeCache(tmp_path / "autotune.json")
    decision = decide_threads(SHAPE, cache, fake_probe, usable=4)
    assert decision.value == "1" and calls == [(1, 2, 4)]
    assert decision.reason.startswith("1 threads of 4 usable CPUs: fp32 step at d_model 64 x d_ff 256 took")
    again = decide_threads(SHAPE, cache, fake_probe, usable=4)
    assert again.value == "1" and again.cached and len(calls) == 1


def test_one_usable_cpu_needs_no_timing(tmp_path: Path) -> None:
    decision = decide_threads(SHAPE, ProbeCache(tmp_path / "autotune.json"), usable=1)
    assert decision.value == "1" and decision.seconds == {}


def test_the_real_probe_restores_the_thread_count() -> None:
    before = torch.get_num_threads()
    seconds = measure_thread_seconds(SHAPE, (1, 2))
    assert set(seconds) == {"1", "2"} and all(value > 0 for value in seconds.values())
    assert torch.get_num_threads() == before
