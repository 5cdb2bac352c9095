import json
import time
from pathlib import Path

import pytest
import torch

from tests.conftest import CPU_BF16_UNSUPPORTED
from transformer.autotune import cache as cache_module
from transformer.autotune import precision_probe
from transformer.autotune.cache import ProbeCache
from transformer.autotune.precision_probe import choose_precision, decide_precision, measure_precision_seconds
from transformer.autotune.workload import ProbeShape

CPU = torch.device("cpu")
SHAPE = ProbeShape(d_model=64, d_ff=256, rows=128)


class FakeProbe:
    """Hand-set probe times; counts its calls so tests see when the cache answered instead."""

    def __init__(self, fp32: float, bf16: float) -> None:
        self.seconds = {"fp32": fp32, "bf16": bf16}
        self.calls = 0

    def __call__(
        self, shape: ProbeShape, device: torch.device, candidates: tuple[str, ...]
    ) -> dict[str, float]:
        self.calls += 1
        assert candidates == ("fp32", "bf16") and shape == SHAPE
        return dict(self.seconds)


@pytest.fixture(autouse=True)
def quiet_machine_with_bf16(monkeypatch) -> None:
    # Decisions must not depend on the test machine: a CPU with native bf16, nothing else running.
    monkeypatch.setattr(precision_probe, "reduced_precision_candidate", lambda device: "bf16")
    monkeypatch.setattr(cache_module.os, "getloadavg", lambda: (0.1, 0.1, 0.1))


def test_choose_precision_needs_a_clear_speedup() -> None:
    assert choose_precision({"fp32": 10.0, "bf16": 1.4}, "bf16") == "bf16"  # AMX: about 7x
    assert choose_precision({"fp32": 10.0, "bf16": 18.0}, "bf16") == "fp32"  # AVX-512 BF16 only: 0.55x
    assert choose_precision({"fp32": 10.0, "bf16": 9.5}, "bf16") == "fp32"  # 5% is not worth the accuracy
    assert choose_precision({"fp32": 10.5, "fp16": 10.0}, "fp16") == "fp32"
    assert choose_precision({"fp32": 11.5, "fp16": 10.0}, "fp16") == "fp16"


def test_auto_picks_bf16_where_the_probe_finds_it_faster(tmp_path: Path) -> None:
    probe = FakeProbe(fp32=0.020, bf16=0.003)
    decision = decide_precision(SHAPE, CPU, ProbeCache(tmp_path / "autotune.json"), probe)
    assert decision.value == "bf16" and not decision.cached
    assert "6.67x the speed of fp32 (3.0 ms against 20.0 ms)" in decision.reason
    assert "d_model 64 x d_ff 256" in decision.reason


def test_auto_picks_fp32_where_bf16_is_slower(tmp_path: Path) -> None:
    probe = FakeProbe(fp32=0.010, bf16=0.018)
    decision = decide_precision(SHAPE, CPU, ProbeCache(tmp_path / "autotune.json"), probe)
    assert decision.value == "fp32"
    assert "0.56x the speed of fp32" in decision.reason


def test_the_answer_is_cached_per_machine_and_shape(tmp_path: Path) -> None:
    cache = ProbeCache(tmp_path / "autotune.json")
    probe = FakeProbe(fp32=0.010, bf16=0.018)
    first = decide_precision(SHAPE, CPU, cache, probe)
    # A later run reads the answer even if the probe would now say otherwise.
    second = decide_precision(SHAPE, CPU, cache, FakeProbe(fp32=0.010, bf16=0.001))
    assert probe.calls == 1 and (first.value, second.value) == ("fp32", "fp32")
    assert second.cached and second.reason.endswith("(cached)")
    stored = json.loads((tmp_path / "autotune.json").read_text())
    (entry,) = stored["entries"].values()
    assert entry["result"]["precision"] == "fp32" and entry["machine"]["torch"] == torch.__version__
    assert "cpu_flags" in entry["machine"]


def test_another_shape_or_torch_version_is_measured_again(tmp_path: Path, monkeypatch) -> None:
    cache = ProbeCache(tmp_path / "autotune.json")
    decide_precision(SHAPE, CPU, cache, FakeProbe(fp32=0.010, bf16=0.018))
    wider = ProbeShape(d_model=128, d_ff=256, rows=128)
    probe = FakeProbe(fp32=0.010, bf16=0.002)
    probe_any_shape = lambda shape, device, candidates: probe.seconds  # noqa: E731
    assert decide_precision(wider, CPU, cache, probe_any_shape).value == "bf16"
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    newer = FakeProbe(fp32=0.010, bf16=0.002)
    assert decide_precision(SHAPE, CPU, cache, newer).value == "bf16" and newer.calls == 1


def test_a_garbled_cache_file_is_measured_over(tmp_path: Path) -> None:
    path = tmp_path / "autotune.json"
    path.write_text("{not json")
    probe = FakeProbe(fp32=0.020, bf16=0.003)
    assert decide_precision(SHAPE, CPU, ProbeCache(path), probe).value == "bf16" and probe.calls == 1
    assert json.loads(path.read_text())["version"] == 1


def test_a_measurement_on_a_busy_machine_is_used_but_not_stored(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cache_module.os, "getloadavg", lambda: (7.5, 3.0, 1.0))
    path = tmp_path / "autotune.json"
    decision = decide_precision(SHAPE, CPU, ProbeCache(path), FakeProbe(fp32=0.010, bf16=0.018))
    assert decision.value == "fp32" and "(not cached: load 7.5 on" in decision.reason
    assert not path.exists()


def test_no_native_bf16_means_fp32_without_timing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(precision_probe, "reduced_precision_candidate", lambda device: None)
    probe = FakeProbe(fp32=1.0, bf16=0.001)
    decision = decide_precision(SHAPE, CPU, ProbeCache(tmp_path / "autotune.json"), probe)
    assert decision.value == "fp32" and probe.calls == 0 and "no native bf16" in decision.reason


def test_the_real_probe_times_its_candidates_in_well_under_a_second() -> None:
    # The candidates the real decision times here: bf16 only where the CPU runs it natively (an AVX2-only CPU
    # emulates it about 40x slower, so the decision never times it there; test_no_native_bf16_... covers that).
    candidates = ("fp32",) if CPU_BF16_UNSUPPORTED else ("fp32", "bf16")
    shape = ProbeShape.for_model(256, 1024, 2048)
    started = time.perf_counter()
    seconds = measure_precision_seconds(shape, CPU, candidates)
    assert time.perf_counter() - started < 2.0  # about 0.2 s on the 2-core CPUs; slack for a loaded CI
    assert set(seconds) == set(candidates) and all(0 < value < 0.5 for value in seconds.values())


def test_probe_rows_follow_the_batch_within_a_work_cap() -> None:
    assert ProbeShape.for_model(256, 1024, 2048).rows == 512  # capped: 2 GFLOP per call at most
    assert ProbeShape.for_model(32, 64, 600).rows == 512  # a power of two below the batch
    assert ProbeShape.for_model(32, 64, 100).rows == 64
    assert ProbeShape.for_model(1024, 4096, 25000).rows == 64  # the big model: the floor
