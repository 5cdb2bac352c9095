"""The fp32 linear kernel probe: the decision rule, its cache, the fallback without oneDNN, bad values."""

from pathlib import Path

import pytest
from torch import nn

from transformer import TransformerConfig
from transformer.autotune import cache as cache_module
from transformer.autotune import linear_probe
from transformer.autotune.cache import ProbeCache
from transformer.autotune.linear_probe import (
    PROBE_ROWS,
    check_fp32_kernels,
    choose_linear_backend,
    decide_linear_backend,
    measure_linear_seconds,
    prepare_fp32_kernels,
)
from transformer.model.fp32_kernels import OneDNNLinear, onednn_linear_unavailable_reason
from transformer.model.multihead_attention import MultiHeadAttention
from transformer.model.transformer import Transformer

requires_onednn = pytest.mark.skipif(
    onednn_linear_unavailable_reason() is not None, reason=str(onednn_linear_unavailable_reason())
)


class FakeMeasure:
    """oneDNN twice as fast as MKL for the products listed, half as fast for the others; counts calls."""

    def __init__(self, onednn_faster: set[tuple[int, int]]) -> None:
        self.onednn_faster = onednn_faster
        self.calls: list[tuple[int, int, tuple[int, ...]]] = []

    def __call__(
        self, in_features: int, out_features: int, rows: tuple[int, ...]
    ) -> dict[str, dict[str, float]]:
        self.calls.append((in_features, out_features, rows))
        onednn = 0.001 if (in_features, out_features) in self.onednn_faster else 0.004
        return {str(count): {"mkl": 0.002, "onednn": onednn} for count in rows}


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    # Answers are stored only when the machine is not busy; the test machine's load must not decide that.
    monkeypatch.setattr(cache_module.os, "getloadavg", lambda: (0.1, 0.1, 0.1))


def tiny_model() -> Transformer:
    config = TransformerConfig(
        vocab_size=40,
        d_model=32,
        d_ff=64,
        num_heads=4,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
    )
    return Transformer(config).eval()


def test_onednn_needs_a_clear_speedup_over_the_rows() -> None:
    assert (
        choose_linear_backend({"1": {"mkl": 2.0, "onednn": 1.0}, "4": {"mkl": 1.0, "onednn": 1.0}})
        == "onednn"
    )
    # Measured on the AVX-512 EPYC at 512 -> 512: slower at 1 row, faster beyond; geometric mean 1.08.
    seconds = {"1": (0.71, 1.0), "4": (1.33, 1.0), "32": (1.24, 1.0), "128": (1.15, 1.0)}
    assert choose_linear_backend({k: {"mkl": m, "onednn": o} for k, (m, o) in seconds.items()}) == "onednn"
    assert choose_linear_backend({"1": {"mkl": 1.04, "onednn": 1.0}}) == "mkl"  # a tie keeps F.linear
    assert (
        choose_linear_backend({"1": {"mkl": 4.0, "onednn": 1.0}, "4": {"mkl": 0.2, "onednn": 1.0}}) == "mkl"
    )


def test_the_decision_is_cached_and_reused(tmp_path: Path) -> None:
    cache = ProbeCache(tmp_path / "autotune.json")
    measure = FakeMeasure({(512, 32000)})
    first = decide_linear_backend(512, 32000, "decoder", cache, measure)
    assert first.value == "onednn" and not first.cached
    assert (
        "onednn for 512 -> 32000 (decoder; MKL/oneDNN time by rows 1: 2.00, 4: 2.00, 32: 2.00, 128: 2.00)"
        in (first.reason)
    )
    again = decide_linear_backend(512, 32000, "decoder", cache, measure)
    assert again.value == "onednn" and again.cached and again.reason.endswith(" (cached)")
    assert measure.calls == [(512, 32000, PROBE_ROWS["decoder"])]
    other = decide_linear_backend(512, 32000, "encoder", cache, measure)  # other rows: its own entry
    assert other.value == "onednn" and not other.cached and len(measure.calls) == 2
    assert decide_linear_backend(2048, 512, "decoder", cache, measure).value == "mkl"


def test_auto_swaps_only_the_products_where_onednn_won(tmp_path: Path) -> None:
    cache = ProbeCache(tmp_path / "autotune.json")
    measure = FakeMeasure({(32, 40), (64, 32)})  # the output projection and the feed-forward output
    model = tiny_model()
    notes = prepare_fp32_kernels(model, "auto", cache, measure)
    assert isinstance(model.output_projection, OneDNNLinear)
    assert isinstance(model.decoder.layers[0].feed_forward.linear_out, OneDNNLinear)
    assert isinstance(model.encoder.layers[0].feed_forward.linear_out, OneDNNLinear)
    assert isinstance(model.decoder.layers[0].feed_forward.linear_in, nn.Linear)
    assert type(model.decoder.layers[0].self_attention) is MultiHeadAttention  # every product on MKL
    assert len(notes) == len(measure.calls) == 9 and all(
        note.startswith("auto fp32 kernels: ") for note in notes
    )
    # A second model on the same machine reads every answer from the cache.
    notes = prepare_fp32_kernels(tiny_model(), "auto", cache, measure)
    assert len(measure.calls) == 9 and all(note.endswith(" (cached)") for note in notes)


def test_without_onednn_auto_falls_back_and_onednn_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(linear_probe, "onednn_linear_unavailable_reason", lambda: "no oneDNN in this build")
    measure = FakeMeasure({(32, 40)})
    model = tiny_model()
    notes = prepare_fp32_kernels(model, "auto", ProbeCache(tmp_path / "autotune.json"), measure)
    assert notes == ["fp32 kernels: mkl (F.linear) everywhere: no oneDNN in this build"]
    assert measure.calls == [] and model.output_projection is None
    assert not any(isinstance(module, OneDNNLinear) for module in model.modules())
    with pytest.raises(
        ValueError, match=r"^fp32_kernels 'onednn': no oneDNN in this build; use 'auto' or 'mkl'$"
    ):
        prepare_fp32_kernels(tiny_model(), "onednn", ProbeCache(tmp_path / "autotune.json"), measure)


def test_a_bad_value_gets_one_line_naming_the_option() -> None:
    with pytest.raises(ValueError, match=r"^--fp32-kernels 'fastest' is not one of auto, mkl, onednn$"):
        check_fp32_kernels("fastest", "--fp32-kernels")
    with pytest.raises(ValueError, match=r"^fp32_kernels 'MKL' is not one of auto, mkl, onednn$"):
        prepare_fp32_kernels(tiny_model(), "MKL")
    for value in ("auto", "mkl", "onednn"):
        check_fp32_kernels(value)


@requires_onednn
def test_the_real_probe_times_both_kernels_at_each_row_count() -> None:
    seconds = measure_linear_seconds(16, 24, (1, 4))
    assert set(seconds) == {"1", "4"}
    assert all(set(value) == {"mkl", "onednn"} and min(value.values()) > 0 for value in seconds.values())
