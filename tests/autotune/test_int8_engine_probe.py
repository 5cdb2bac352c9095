"""The int8 engine probe: the decision rule, the shapes timed, its cache, and the engine the weights get."""

from pathlib import Path

import pytest
import torch

from transformer import TransformerConfig
from transformer.autotune import cache as cache_module
from transformer.autotune import int8_engine_probe
from transformer.autotune.cache import ProbeCache
from transformer.autotune.int8_engine_probe import (
    ENGINE_VARIABLE,
    PROBE_ROWS,
    available_int8_engines,
    choose_int8_engine,
    decide_int8_engine,
    decoder_product_shapes,
    measure_int8_engine_seconds,
)
from transformer.decoding.inference_models import prepare_for_inference
from transformer.model.quantization import Int8Linear, int8_packing_engine
from transformer.model.transformer import Transformer

requires_both_engines = pytest.mark.skipif(
    len(available_int8_engines()) < 2, reason="this PyTorch build lacks one of the onednn and x86 engines"
)


@pytest.fixture(autouse=True)
def quiet_machine_and_no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    # Answers are stored only when the machine is not busy; the suite's own engine override is lifted here.
    monkeypatch.setattr(cache_module.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    monkeypatch.delenv(ENGINE_VARIABLE, raising=False)


def tiny_model() -> Transformer:
    """A 1+1-layer model with distinct widths, so every product shape is told apart."""
    config = TransformerConfig(
        vocab_size=40,
        d_model=32,
        num_heads=2,
        d_ff=64,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
    )
    return Transformer(config).eval()


class FakeMeasure:
    """The faster engine at the given speed-up on every product; counts calls."""

    def __init__(self, faster: str, speedup: float) -> None:
        self.faster, self.speedup = faster, speedup
        self.calls: list[tuple[list[tuple[int, int]], tuple[int, ...]]] = []

    def __call__(self, shapes, rows) -> dict[str, dict[str, float]]:
        self.calls.append((list(shapes), rows))
        slower = next(engine for engine in ("onednn", "x86") if engine != self.faster)
        return {f"{i}->{o}@{r}": {self.faster: 1.0, slower: self.speedup} for i, o in shapes for r in rows}


def test_another_engine_replaces_the_flags_choice_only_when_clearly_faster() -> None:
    assert (
        choose_int8_engine({"a": {"onednn": 2.0, "x86": 1.0}, "b": {"onednn": 1.0, "x86": 1.0}}, "onednn")
        == "x86"
    )
    assert choose_int8_engine({"a": {"onednn": 1.04, "x86": 1.0}}, "onednn") == "onednn"  # a tie: the flags'
    # The geometric mean: 4x faster on one product and 3x slower on another is a 1.15x gain.
    assert (
        choose_int8_engine({"a": {"onednn": 4.0, "x86": 1.0}, "b": {"onednn": 1.0, "x86": 3.0}}, "onednn")
        == "x86"
    )
    assert choose_int8_engine({"a": {"x86": 1.0}}, "onednn") == "x86"  # the default was not measured


def test_the_shapes_timed_are_the_decoder_steps_products() -> None:
    # Attention projections 32 -> 32, the stacked q/k/v 32 -> 96, the feed-forward pair, the output projection.
    assert decoder_product_shapes(tiny_model()) == [(32, 32), (32, 40), (32, 64), (32, 96), (64, 32)]


@requires_both_engines
def test_the_decision_is_cached_and_the_weights_packed_for_it(tmp_path: Path, monkeypatch) -> None:
    cache = ProbeCache(tmp_path / "autotune.json")
    other = next(engine for engine in ("onednn", "x86") if engine != int8_packing_engine())
    measure = FakeMeasure(other, 2.0)
    first = decide_int8_engine(tiny_model(), cache, measure)
    assert first.value == other and not first.cached
    assert (
        f"time by rows 1: 2.00, 4: 2.00, 32: 2.00, 128: 2.00; the CPU's flags alone say {int8_packing_engine()})"
        in first.reason
    )
    again = decide_int8_engine(tiny_model(), cache, measure)
    assert (
        again.value == other
        and again.cached
        and again.reason.endswith(" (cached)")
        and len(measure.calls) == 1
    )
    assert measure.calls[0][1] == PROBE_ROWS
    # The translator's preparation packs every int8 weight, the output projection's included, for that engine.
    monkeypatch.setattr(int8_engine_probe, "default_probe_cache", lambda: cache)
    model, notes = prepare_for_inference(tiny_model(), torch.device("cpu"), "int8", "auto")
    layers = [module for module in model.modules() if isinstance(module, Int8Linear)]
    assert layers and {layer.engine for layer in layers} == {other}
    assert notes == [f"auto int8 engine: {again.reason}"]


@requires_both_engines
def test_the_real_probe_times_both_engines_at_every_shape_and_row_count() -> None:
    seconds = measure_int8_engine_seconds([(32, 64)], (1, 4))
    assert set(seconds) == {"32->64@1", "32->64@4"}
    assert all(set(value) == {"onednn", "x86"} and min(value.values()) > 0 for value in seconds.values())


@requires_both_engines
def test_the_variable_fixes_the_engine_untimed_and_a_wrong_one_is_named(tmp_path: Path, monkeypatch) -> None:
    def must_not_run(*args: object) -> None:
        pytest.fail("the probe ran although the engine was set")

    monkeypatch.setenv(ENGINE_VARIABLE, "x86")
    decision = decide_int8_engine(tiny_model(), ProbeCache(tmp_path / "autotune.json"), must_not_run)
    assert (
        decision.value == "x86"
        and decision.reason == "x86 packs the int8 weights, as TRANSFORMER_INT8_ENGINE says"
    )
    monkeypatch.setenv(ENGINE_VARIABLE, "fast")
    with pytest.raises(
        ValueError, match=r"TRANSFORMER_INT8_ENGINE='fast': not an int8 engine of this build \(onednn, x86\)"
    ):
        decide_int8_engine(tiny_model(), ProbeCache(tmp_path / "autotune.json"), must_not_run)


@requires_both_engines
def test_onednn_capped_at_another_isa_is_measured_again(tmp_path: Path, monkeypatch) -> None:
    cache, measure = ProbeCache(tmp_path / "autotune.json"), FakeMeasure("x86", 2.0)
    decide_int8_engine(tiny_model(), cache, measure)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert not decide_int8_engine(tiny_model(), cache, measure).cached and len(measure.calls) == 2
