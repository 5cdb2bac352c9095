"""The automatic defaults of a run resolve for the recurrent model: its LSTM widths, no attention probe."""

from pathlib import Path

import pytest
import torch

from transformer.autotune import cache as cache_module
from transformer.autotune import model_tuning, precision_probe, thread_probe
from transformer.autotune.cache import ProbeCache
from transformer.baselines import RNNConfig


def test_tune_model_probes_the_lstm_widths_and_skips_the_attention_probe(tmp_path: Path, monkeypatch) -> None:
    shapes = []

    def fake_threads(shape, counts):
        shapes.append(shape)
        return {str(count): 0.01 for count in counts}

    def fake_precision(shape, device, candidates):
        shapes.append(shape)
        return {"fp32": 0.010, "bf16": 0.020}

    def no_attention_probe(*args, **kwargs):
        raise AssertionError("the recurrent model has no attention path to choose")

    monkeypatch.setattr(thread_probe, "measure_thread_seconds", fake_threads)
    monkeypatch.setattr(precision_probe, "measure_precision_seconds", fake_precision)
    monkeypatch.setattr(precision_probe, "reduced_precision_candidate", lambda device: "bf16")
    monkeypatch.setattr(model_tuning, "decide_explicit_max_length", no_attention_probe)
    monkeypatch.setattr(
        model_tuning,
        "decide_threads",
        lambda shape, cache: thread_probe.decide_threads(shape, cache, usable=2),
    )
    monkeypatch.setattr(cache_module.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    config = RNNConfig(vocab_size=100, embedding_dim=48, hidden_size=48)
    before = torch.get_num_threads()
    try:
        tuning = model_tuning.tune_model(
            config, torch.device("cpu"), 600, "auto", None, ProbeCache(tmp_path / "a.json")
        )
    finally:
        torch.set_num_threads(before)
    assert tuning.precision == "fp32" and tuning.explicit_max_length is None
    assert {(shape.d_model, shape.d_ff) for shape in shapes} == {
        (48, 192)
    }  # hidden x 4 hidden: the LSTM gates
    assert [note.split(":")[0] for note in tuning.notes] == ["auto threads", "auto precision"]


@pytest.mark.parametrize("hidden_size", [16, 64])
def test_probe_widths_are_the_gate_product(hidden_size: int) -> None:
    config = RNNConfig(vocab_size=100, embedding_dim=hidden_size, hidden_size=hidden_size)
    assert model_tuning.probe_widths(config) == (hidden_size, 4 * hidden_size)
