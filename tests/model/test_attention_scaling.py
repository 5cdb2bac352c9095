"""``attention_scaling``: unscaled, 1/sqrt(d_k) (the paper, the default) and 1/d_k dot-product scores."""

import math
from pathlib import Path

import pytest
import torch

from transformer import Transformer, TransformerConfig
from transformer.model.multihead_attention import MultiHeadAttention
from transformer.model.quantization import quantize_for_inference
from transformer.model.scaled_dot_product_attention import (
    SCORE_SCALINGS,
    attention_logits,
    scaled_dot_product_attention,
    score_scale,
)

FACTORS = {"sqrt": lambda d_k: 1 / math.sqrt(d_k), "none": lambda d_k: 1.0, "linear": lambda d_k: 1 / d_k}


def random_qkv(d_k: int, batch: int = 2, heads: int = 3, query_len: int = 5, key_len: int = 7):
    return (
        torch.randn(batch, heads, query_len, d_k),
        torch.randn(batch, heads, key_len, d_k),
        torch.randn(batch, heads, key_len, 4),
    )


def by_hand(query, key, value, factor: float, attend_mask=None):
    """softmax(factor * Q K^T) V in float64, masked keys at -inf."""
    scores = (query.double() @ key.double().transpose(-2, -1)) * factor
    if attend_mask is not None:
        scores = scores.masked_fill(~attend_mask, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ value.double()).float()


def test_config_names_match_the_kernel_names() -> None:
    from transformer.model.config import ATTENTION_SCALINGS

    assert set(ATTENTION_SCALINGS) == set(SCORE_SCALINGS)


@pytest.mark.parametrize("scaling", SCORE_SCALINGS)
def test_score_scale(scaling: str) -> None:
    for d_k in (1, 4, 64, 256):
        assert score_scale(d_k, scaling) == pytest.approx(FACTORS[scaling](d_k), rel=1e-15)
    with pytest.raises(ValueError, match="scaling='cube' is not one of"):
        score_scale(8, "cube")


@pytest.mark.parametrize("scaling", SCORE_SCALINGS)
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("d_k", [4, 64])
def test_explicit_and_fused_agree_and_equal_the_formula(scaling: str, masked: bool, d_k: int) -> None:
    query, key, value = random_qkv(d_k)
    query, key = query * 0.3, key * 0.3  # unscaled d_k=64 scores stay in a range fp32 softmax resolves
    attend_mask = None
    if masked:
        attend_mask = torch.rand(2, 1, 5, 7) > 0.3
        attend_mask[..., 0] = True
    fused, _ = scaled_dot_product_attention(query, key, value, attend_mask, scaling=scaling)
    explicit, weights = scaled_dot_product_attention(
        query, key, value, attend_mask, need_weights=True, scaling=scaling
    )
    expected = by_hand(query, key, value, FACTORS[scaling](d_k), attend_mask)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fused, expected, atol=1e-5, rtol=1e-5)
    assert weights is not None
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))


def test_unscaled_is_softmax_of_plain_dot_products() -> None:
    query, key, value = random_qkv(16)
    _, weights = scaled_dot_product_attention(query, key, value, need_weights=True, scaling="none")
    assert weights is not None
    torch.testing.assert_close(weights, torch.softmax(query @ key.transpose(-2, -1), dim=-1))


def test_linear_is_softmax_of_dot_products_over_d_k() -> None:
    query, key, value = random_qkv(16)
    _, weights = scaled_dot_product_attention(query, key, value, need_weights=True, scaling="linear")
    assert weights is not None
    torch.testing.assert_close(weights, torch.softmax(query @ key.transpose(-2, -1) / 16, dim=-1))


@pytest.mark.parametrize("implementation", ["explicit", "fused"])
def test_default_is_unchanged(implementation: str) -> None:
    query, key, value = random_qkv(8)
    default, _ = scaled_dot_product_attention(query, key, value, implementation=implementation)
    sqrt, _ = scaled_dot_product_attention(query, key, value, implementation=implementation, scaling="sqrt")
    assert torch.equal(default, sqrt)
    if implementation == "explicit":
        # The arithmetic of the paper's path as it always was: queries times d_k ** -0.5, then Q K^T.
        scores = torch.matmul(query * query.size(-1) ** -0.5, key.transpose(-2, -1))
        assert torch.equal(default, torch.softmax(scores, dim=-1) @ value)
    else:
        assert torch.equal(default, torch.nn.functional.scaled_dot_product_attention(query, key, value))
    torch.testing.assert_close(default, by_hand(query, key, value, 8**-0.5), atol=1e-5, rtol=1e-5)


def test_attention_logits_scale_the_scores() -> None:
    query, key, _ = random_qkv(32)
    raw = query @ key.transpose(-2, -1)
    assert torch.equal(attention_logits(query, key, "none"), raw)
    torch.testing.assert_close(attention_logits(query, key, "linear"), raw / 32)
    torch.testing.assert_close(attention_logits(query, key, "sqrt"), raw / math.sqrt(32))


def test_multihead_attention_uses_its_scaling() -> None:
    torch.manual_seed(0)
    hidden = torch.randn(2, 6, 16)
    outputs = {}
    for scaling in SCORE_SCALINGS:
        torch.manual_seed(1)
        attention = MultiHeadAttention(16, 2, d_k=32, d_v=8, scaling=scaling, implementation="explicit")
        outputs[scaling], weights = attention(hidden, hidden, hidden, need_weights=True)
        query = attention.project_query(hidden)
        key, _ = attention.project_key_value(hidden, hidden)
        factor = FACTORS[scaling](32)
        torch.testing.assert_close(weights, torch.softmax(query @ key.transpose(-2, -1) * factor, dim=-1))
        attention.implementation = "fused"
        fused, _ = attention(hidden, hidden, hidden)
        torch.testing.assert_close(fused, outputs[scaling], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(outputs["none"], outputs["linear"])


def test_multihead_attention_refuses_bad_scalings() -> None:
    with pytest.raises(ValueError, match="scaling='half' is not one of"):
        MultiHeadAttention(16, 2, scaling="half")
    with pytest.raises(ValueError, match="additive scoring has no scale factor"):
        MultiHeadAttention(16, 2, scoring="additive", scaling="none")


def small_config(**overrides) -> TransformerConfig:
    settings = {
        "vocab_size": 30,
        "d_model": 16,
        "d_ff": 32,
        "num_heads": 2,
        "num_encoder_layers": 1,
        "num_decoder_layers": 1,
        "dropout": 0.0,
        **overrides,
    }
    return TransformerConfig(**settings)


@pytest.mark.parametrize("scaling", SCORE_SCALINGS)
def test_model_builds_every_scaling_and_paths_agree(scaling: str) -> None:
    torch.manual_seed(3)
    model = Transformer(small_config(attention_scaling=scaling, attention_implementation="explicit")).eval()
    modules = [module for module in model.modules() if isinstance(module, MultiHeadAttention)]
    assert len(modules) == 3 and all(module.scaling == scaling for module in modules)
    src = torch.tensor([[5, 6, 7, 2, 0], [8, 9, 2, 0, 0]])
    tgt = torch.tensor([[1, 5, 6, 7], [1, 8, 9, 0]])
    explicit = model(src, tgt)
    for module in modules:
        module.implementation = "fused"
    torch.testing.assert_close(model(src, tgt), explicit, atol=1e-5, rtol=1e-5)


def test_scalings_change_the_model_but_not_its_parameters() -> None:
    src = torch.tensor([[5, 6, 7, 2]])
    tgt = torch.tensor([[1, 5, 6, 7]])
    logits = {}
    for scaling in SCORE_SCALINGS:
        torch.manual_seed(3)
        model = Transformer(small_config(attention_scaling=scaling, d_k=32, d_v=32)).eval()
        logits[scaling] = model(src, tgt)
        names = sorted(model.state_dict())
    torch.manual_seed(3)
    assert names == sorted(Transformer(small_config(d_k=32, d_v=32)).state_dict())
    assert not torch.allclose(logits["sqrt"], logits["none"])
    assert not torch.allclose(logits["sqrt"], logits["linear"])


def test_quantized_model_keeps_the_scaling() -> None:
    torch.manual_seed(3)
    model = Transformer(small_config(attention_scaling="linear"))
    quantized = quantize_for_inference(model)
    modules = [module for module in quantized.modules() if isinstance(module, MultiHeadAttention)]
    assert modules and all(module.scaling == "linear" for module in modules)


@pytest.mark.parametrize("scaling", ["none", "linear"])
def test_marian_export_refuses_other_scalings(scaling: str, tmp_path: Path) -> None:
    from transformer.interop.marian_config import check_exportable

    with pytest.raises(
        ValueError, match=rf"TransformerConfig\.attention_scaling='{scaling}' cannot be exported to MarianMT"
    ):
        check_exportable(small_config(attention_scaling=scaling, norm_first=False), "ckpt")
    check_exportable(small_config(norm_first=False), "ckpt")


@pytest.mark.parametrize("scaling", ["none", "linear"])
def test_ctranslate2_export_refuses_other_scalings(scaling: str) -> None:
    from transformer.interop.ctranslate2_spec import check_ctranslate2_exportable

    with pytest.raises(
        ValueError,
        match=rf"TransformerConfig\.attention_scaling='{scaling}' cannot be exported to CTranslate2",
    ):
        check_ctranslate2_exportable(small_config(attention_scaling=scaling), "ckpt")
    check_ctranslate2_exportable(small_config(), "ckpt")


def test_export_commands_refuse_a_checkpoint_with_linear_scaling(tmp_path: Path) -> None:
    from tests.interop.marian_fixtures import write_our_checkpoint
    from transformer.interop.marian import export_marian

    checkpoint_dir = write_our_checkpoint(tmp_path / "model", attention_scaling="linear")
    with pytest.raises(ValueError, match=r"attention_scaling='linear' cannot be exported to MarianMT"):
        export_marian(checkpoint_dir, tmp_path / "exported")
    assert not (tmp_path / "exported").exists()
    pytest.importorskip("ctranslate2")
    from transformer.interop.ctranslate2 import export_ctranslate2

    with pytest.raises(ValueError, match=r"attention_scaling='linear' cannot be exported to CTranslate2"):
        export_ctranslate2(checkpoint_dir, tmp_path / "ct2")
    assert not (tmp_path / "ct2").exists()
