from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from transformer.autotune import cache as cache_module
from transformer.autotune.attention_probe import (
    choose_explicit_max_length,
    decide_explicit_max_length,
    measure_attention_seconds,
)
from transformer.autotune.cache import ProbeCache
from transformer.model import scaled_dot_product_attention as attention_module
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch) -> None:
    monkeypatch.setattr(cache_module.os, "getloadavg", lambda: (0.1, 0.1, 0.1))


def timings(*ratios: float) -> dict[str, dict[str, float]]:
    """Probe results at 16, 32, ...: explicit time / fused time per length."""
    return {str(16 << index): {"explicit": ratio, "fused": 1.0} for index, ratio in enumerate(ratios)}


def test_threshold_is_the_last_length_before_fused_wins() -> None:
    assert choose_explicit_max_length(timings(0.3, 0.4, 0.6, 0.9, 1.2)) == 128  # a CPU in bf16
    assert choose_explicit_max_length(timings(1.5)) == 0  # fused wins from the start: a GPU, or fp32 here
    assert choose_explicit_max_length(timings(0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)) == 1024


def test_decision_in_training_and_inference_are_cached_apart(tmp_path: Path) -> None:
    calls = []

    def fake_probe(num_heads, head_dim, precision, device, backward):
        calls.append(backward)
        return timings(1.5) if backward else timings(0.9, 0.95, 1.1)

    cache = ProbeCache(tmp_path / "autotune.json")
    training = decide_explicit_max_length(4, 64, "fp32", CPU, cache, True, fake_probe)
    inference = decide_explicit_max_length(4, 64, "fp32", CPU, cache, False, fake_probe)
    assert (training.value, inference.value) == ("0", "32")
    assert "explicit attention up to length 32, fused beyond (inference, fp32" in inference.reason
    assert decide_explicit_max_length(4, 64, "fp32", CPU, cache, True, fake_probe).cached
    assert calls == [True, False]


def test_the_real_probe_stops_once_fused_wins() -> None:
    seconds = measure_attention_seconds(2, 16, "fp32", CPU, backward=False)
    lengths = [int(length) for length in seconds]
    assert lengths == [16 << index for index in range(len(lengths))]
    for length in lengths[:-1]:
        assert seconds[str(length)]["explicit"] <= seconds[str(length)]["fused"]


def count_fused_calls(model: Transformer, monkeypatch) -> int:
    calls = []
    real = F.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(attention_module.F, "scaled_dot_product_attention", counting)
    with torch.no_grad():
        model(torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]]))
    monkeypatch.setattr(attention_module.F, "scaled_dot_product_attention", real)
    return len(calls)


def test_the_model_takes_the_measured_threshold(tiny_config: TransformerConfig, monkeypatch) -> None:
    model = Transformer(tiny_config).eval()  # attention_implementation "auto"
    assert count_fused_calls(model, monkeypatch) == 0  # the default threshold, 256, covers length 4
    expected = model(torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]]))
    model.set_explicit_attention_max_length(0)
    # 2 encoder self-attentions, 2 decoder self- and 2 cross-attentions, all fused now.
    assert count_fused_calls(model, monkeypatch) == 6
    torch.testing.assert_close(model(torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])), expected)
    with pytest.raises(ValueError, match="must be non-negative"):
        model.set_explicit_attention_max_length(-1)
