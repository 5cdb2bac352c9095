import math

import pytest
import torch

from transformer import scaled_dot_product_attention
from transformer.model.masks import build_causal_mask


def random_qkv(batch: int = 2, heads: int = 3, query_len: int = 5, key_len: int = 7, dim: int = 8):
    return (
        torch.randn(batch, heads, query_len, dim),
        torch.randn(batch, heads, key_len, dim),
        torch.randn(batch, heads, key_len, dim),
    )


def reference_attention(query, key, value, attend_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if attend_mask is not None:
        scores = scores.masked_fill(~attend_mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ value


@pytest.mark.parametrize("masked", [False, True])
def test_fused_and_explicit_paths_agree(masked: bool) -> None:
    query, key, value = random_qkv()
    attend_mask = None
    if masked:
        attend_mask = torch.rand(2, 1, 5, 7) > 0.3
        attend_mask[..., 0] = True  # every query keeps at least one key
    fused, no_weights = scaled_dot_product_attention(query, key, value, attend_mask)
    explicit, weights = scaled_dot_product_attention(query, key, value, attend_mask, need_weights=True)
    assert no_weights is None
    assert weights is not None and weights.shape == (2, 3, 5, 7)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        fused, reference_attention(query, key, value, attend_mask), atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    if attend_mask is not None:
        assert (weights.masked_select(~attend_mask.expand_as(weights)) == 0).all()


def test_causal_mask_hides_future_keys() -> None:
    query, key, value = random_qkv(query_len=4, key_len=4)
    _, weights = scaled_dot_product_attention(query, key, value, build_causal_mask(4), need_weights=True)
    assert weights is not None
    assert (weights.triu(diagonal=1) == 0).all()


@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_masked_row_gives_zeros_not_nan(need_weights: bool) -> None:
    query, key, value = random_qkv()
    query.requires_grad_(True)
    attend_mask = torch.ones(2, 1, 5, 7, dtype=torch.bool)
    attend_mask[0, 0, 2] = False
    output, _ = scaled_dot_product_attention(query, key, value, attend_mask, need_weights=need_weights)
    assert not output.isnan().any()
    assert (output[0, :, 2] == 0).all()
    output.sum().backward()
    assert query.grad is not None and not query.grad.isnan().any()
    # The other rows are ordinary attention.
    expected = reference_attention(query, key, value, attend_mask)
    torch.testing.assert_close(output[1], expected[1], atol=1e-5, rtol=1e-5)


def test_dropout_on_weights_only_in_explicit_path_changes_output() -> None:
    query, key, value = random_qkv()
    plain, _ = scaled_dot_product_attention(query, key, value, need_weights=True)
    dropped, weights = scaled_dot_product_attention(query, key, value, dropout_p=0.5, need_weights=True)
    assert weights is not None and (weights == 0).any()
    assert not torch.allclose(plain, dropped)


def test_scaling_keeps_dot_product_variance_near_one() -> None:
    # The user's notes (and section 3.2.1): with unit-variance components, Var(q . k) = d_k, so unscaled
    # dot products grow with d_k and saturate the softmax; dividing by sqrt(d_k) restores unit variance.
    generator = torch.Generator().manual_seed(0)
    variances = {}
    for d_k in (4, 64, 512):
        query = torch.randn(20000, d_k, generator=generator)
        key = torch.randn(20000, d_k, generator=generator)
        dot = (query * key).sum(-1)
        variances[d_k] = (dot.var().item(), (dot / math.sqrt(d_k)).var().item())
    for d_k, (unscaled, scaled) in variances.items():
        assert unscaled == pytest.approx(d_k, rel=0.1)
        assert scaled == pytest.approx(1.0, rel=0.1)
    assert variances[4][0] < variances[64][0] < variances[512][0]


def test_scaling_prevents_softmax_saturation() -> None:
    # Without the 1/sqrt(d_k) factor the largest weight approaches 1 at large d_k; with it, it does not.
    generator = torch.Generator().manual_seed(1)
    d_k = 512
    query = torch.randn(64, 1, 1, d_k, generator=generator)
    key = torch.randn(64, 1, 10, d_k, generator=generator)
    value = torch.randn(64, 1, 10, 4, generator=generator)
    _, scaled_weights = scaled_dot_product_attention(query, key, value, need_weights=True)
    unscaled_weights = torch.softmax(query @ key.transpose(-2, -1), dim=-1)
    assert scaled_weights is not None
    assert unscaled_weights.amax(-1).mean() > 0.95
    assert scaled_weights.amax(-1).mean() < 0.7


@pytest.mark.parametrize("implementation", ["fused", "explicit", "auto"])
@pytest.mark.parametrize("key_len", [7, 300])
def test_every_implementation_computes_the_same_function(implementation: str, key_len: int) -> None:
    query, key, value = random_qkv(key_len=key_len)
    attend_mask = torch.rand(2, 1, 5, key_len) > 0.3
    attend_mask[..., 0] = True
    output, weights = scaled_dot_product_attention(
        query, key, value, attend_mask, implementation=implementation
    )
    assert weights is None
    torch.testing.assert_close(
        output, reference_attention(query, key, value, attend_mask), atol=1e-5, rtol=1e-5
    )


def test_auto_uses_the_fused_kernel_for_long_sequences(monkeypatch) -> None:
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(args[1].size(-2))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting)
    for key_len in (16, 600):
        scaled_dot_product_attention(*random_qkv(key_len=key_len), implementation="auto")
    assert calls == [600]
    with pytest.raises(ValueError, match="implementation"):
        scaled_dot_product_attention(*random_qkv(), implementation="flash")
