"""Int8 inference: per-channel weight quantisation, the int8 layers, and a whole model against float32."""

import copy

import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from transformer import TransformerConfig
from transformer.config.decode import DecodeConfig
from transformer.decoding.greedy import greedy_search
from transformer.model import quantization
from transformer.model.multihead_attention import MultiHeadAttention
from transformer.model.quantization import (
    Int8Linear,
    Int8MultiHeadAttention,
    int8_packing_engine,
    packing_engine,
    quantize_for_inference,
    quantize_weight_per_channel,
)
from transformer.model.transformer import Transformer

#: Relative error (Frobenius norm) allowed between int8 and float32 outputs. Int8 rounding gives 0.013-0.019
#: on the tiny model; one layer whose weight scale is 1.25x too large gives 0.08 (see the test below).
RELATIVE_TOLERANCE = 0.03


def relative_error(actual: Tensor, expected: Tensor) -> float:
    """||actual - expected|| / ||expected|| over all elements."""
    return ((actual - expected).norm() / expected.norm()).item()


def random_sources(vocab_size: int, batch_size: int, src_len: int) -> Tensor:
    """Random source ids of one length, EOS (id 2) last: (batch, src_len), int64."""
    src_tokens = torch.randint(4, vocab_size, (batch_size, src_len))
    src_tokens[:, -1] = 2
    return src_tokens


def test_per_channel_weights_round_to_within_half_a_step_of_their_row() -> None:
    weight = torch.randn(6, 10) * torch.tensor([1e-3, 0.1, 1.0, 10.0, 0.5, 0.0])[:, None]
    int8_weight, scales = quantize_weight_per_channel(weight)
    assert int8_weight.dtype == torch.int8 and scales.shape == (6,)
    assert int8_weight[:5].abs().amax(dim=1).tolist() == [127] * 5  # each row uses its full range
    assert torch.all((int8_weight.float() * scales[:, None] - weight).abs() <= scales[:, None] / 2 + 1e-9)
    assert torch.all(int8_weight[5] == 0) and scales[5] > 0  # an all-zero row: no division by zero


def test_int8_linear_matches_float_linear() -> None:
    linear = nn.Linear(48, 24)
    hidden = torch.randn(3, 5, 48)
    int8_linear = Int8Linear.from_linear(linear)
    output = int8_linear(hidden)
    assert output.shape == (3, 5, 24) and output.dtype == torch.float32
    assert relative_error(output, linear(hidden).detach()) < RELATIVE_TOLERANCE


def test_stacked_self_projection_equals_the_three_projections() -> None:
    attention = Int8MultiHeadAttention(MultiHeadAttention(32, 4))
    hidden = torch.randn(2, 5, 32)
    query, key, value = attention.project_self(hidden)
    assert torch.equal(query, attention.project_query(hidden))
    expected_key, expected_value = attention.project_key_value(hidden, hidden)
    assert torch.equal(key, expected_key) and torch.equal(value, expected_value)


def test_int8_logits_are_close_to_float32(tiny_config: TransformerConfig) -> None:
    model = Transformer(tiny_config).eval()
    quantized = quantize_for_inference(copy.deepcopy(model))
    src_tokens = random_sources(tiny_config.vocab_size, 8, 9)
    tgt_tokens = torch.randint(4, tiny_config.vocab_size, (8, 7))
    with torch.inference_mode():
        expected = model(src_tokens, tgt_tokens)
        assert relative_error(quantized(src_tokens, tgt_tokens), expected) < RELATIVE_TOLERANCE
        # The tolerance is tight enough to catch a wrong scale in a single inner layer.
        layer = model.decoder.layers[0].feed_forward.linear_in
        quantized.decoder.layers[0].feed_forward.linear_in = Int8Linear(layer.weight * 1.25, layer.bias)
        assert relative_error(quantized(src_tokens, tgt_tokens), expected) > RELATIVE_TOLERANCE


def test_every_linear_layer_and_the_tied_output_projection_are_int8(tiny_config: TransformerConfig) -> None:
    model = Transformer(tiny_config)
    embedding = model.tgt_embedding.weight.detach().clone()
    quantized = quantize_for_inference(model)
    assert not any(isinstance(module, nn.Linear) for module in quantized.modules())
    assert isinstance(quantized.output_projection, Int8Linear)
    assert torch.equal(quantized.tgt_embedding.weight, embedding)  # the embedding itself stays float32
    hidden = torch.randn(2, 3, tiny_config.d_model)
    expected = F.linear(hidden, embedding)
    assert relative_error(quantized.project_output(hidden), expected) < RELATIVE_TOLERANCE


def test_greedy_translations_mostly_agree_with_float32(tiny_config: TransformerConfig) -> None:
    model = Transformer(tiny_config).eval()
    quantized = quantize_for_inference(copy.deepcopy(model))
    src_tokens = random_sources(tiny_config.vocab_size, 16, 8)
    config = DecodeConfig(beam_size=1, min_length=10, max_length=10)
    expected = [hypotheses[0].tokens for hypotheses in greedy_search(model, src_tokens, config)]
    actual = [hypotheses[0].tokens for hypotheses in greedy_search(quantized, src_tokens, config)]
    # Random weights leave near-ties that rounding may flip, after which a sentence diverges; most agree.
    assert sum(tokens == reference for tokens, reference in zip(actual, expected, strict=True)) >= 12


def test_non_float32_model_is_refused(tiny_config: TransformerConfig) -> None:
    with pytest.raises(ValueError, match="float32 model on the CPU"):
        quantize_for_inference(Transformer(tiny_config).to(torch.bfloat16))


def test_packing_engine_is_restored_after_packing() -> None:
    before = torch.backends.quantized.engine
    with packing_engine("onednn") as inside:
        assert inside in torch.backends.quantized.supported_engines
    with packing_engine("no-such-engine") as inside:
        assert inside == before  # unsupported: packing keeps the engine in use
    Int8Linear.from_linear(nn.Linear(8, 4))
    assert torch.backends.quantized.engine == before


@pytest.mark.parametrize(
    ("cap", "expected_reduce_range"), [("AVX2", True), ("avx512_core", True), ("SSE41", True)]
)
def test_an_isa_cap_without_vnni_reduces_the_activation_range(
    monkeypatch, cap: str, expected_reduce_range: bool
) -> None:
    # oneDNN capped below VNNI runs AVX2's saturating pairwise adds whatever the CPU's flags say.
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    assert Int8Linear.from_linear(nn.Linear(8, 4)).reduce_range is expected_reduce_range


@pytest.mark.parametrize(("has_vnni", "engine"), [(True, "onednn"), (False, "x86")])
def test_the_packing_engine_follows_vnni(monkeypatch, has_vnni: bool, engine: str) -> None:
    monkeypatch.setattr(quantization, "int8_kernels_have_vnni", lambda: has_vnni)
    assert int8_packing_engine() == engine


@pytest.mark.parametrize("engine", ["onednn", "x86"])
def test_weights_packed_for_either_engine_give_int8_accuracy(monkeypatch, engine: str) -> None:
    # Both engines run on every x86 CPU, so both real kernels are checked whichever CPU runs the test; the
    # activation range stays the one this CPU's kernels need (a faked VNNI would saturate AVX2's sums).
    monkeypatch.setattr(quantization, "int8_packing_engine", lambda: engine)
    torch.manual_seed(0)
    linear = nn.Linear(64, 48)
    layer = Int8Linear.from_linear(linear)
    assert layer.engine == engine and layer.reduce_range is not quantization.int8_kernels_have_vnni()
    assert f"int8 per-channel, {engine}" in repr(layer)
    hidden = torch.randn(5, 7, 64)
    assert relative_error(layer(hidden), linear(hidden).detach()) < RELATIVE_TOLERANCE


def test_packed_rows_compute_those_columns_of_the_full_layer() -> None:
    torch.manual_seed(0)
    layer = Int8Linear(torch.randn(50, 16), None)
    hidden = torch.randn(3, 16)
    rows = torch.tensor([7, 0, 49, 7, 21])
    for _ in range(2):  # the second call reads the rows kept by the first
        packed = layer.pack_rows(rows)
        restricted = torch.ops.quantized.linear_dynamic(hidden, packed, layer.reduce_range)
        assert torch.equal(restricted, layer(hidden)[:, rows])
