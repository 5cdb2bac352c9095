import math

import pytest
import torch
from torch import nn

from transformer import MultiHeadAttention
from transformer.model.additive_attention import AdditiveScore
from transformer.model.masks import build_causal_mask, combine_attend_masks, padding_to_attend_mask

D_MODEL, HEADS = 16, 4


def make_pair() -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    ours = MultiHeadAttention(D_MODEL, HEADS)
    torch_mha = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(
            torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
        )
        torch_mha.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        torch_mha.out_proj.weight.copy_(ours.out_proj.weight)
        torch_mha.out_proj.bias.copy_(ours.out_proj.bias)
    return ours.eval(), torch_mha.eval()


def test_self_attention_with_padding_matches_torch() -> None:
    ours, torch_mha = make_pair()
    hidden = torch.randn(3, 6, D_MODEL)
    padding = torch.zeros(3, 6, dtype=torch.bool)
    padding[0, 4:] = True
    padding[2, 1:] = True
    output, weights = ours(hidden, hidden, hidden, padding_to_attend_mask(padding), need_weights=True)
    expected, expected_weights = torch_mha(
        hidden, hidden, hidden, key_padding_mask=padding, need_weights=True, average_attn_weights=False
    )
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)
    fused_output, _ = ours(hidden, hidden, hidden, padding_to_attend_mask(padding))
    torch.testing.assert_close(fused_output, expected, atol=1e-5, rtol=1e-5)


def test_masked_self_attention_matches_torch() -> None:
    ours, torch_mha = make_pair()
    hidden = torch.randn(2, 5, D_MODEL)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    causal = build_causal_mask(5)
    attend_mask = combine_attend_masks(padding_to_attend_mask(padding), causal)
    output, _ = ours(hidden, hidden, hidden, attend_mask)
    # torch's masks are True where attention is *not* allowed.
    expected, _ = torch_mha(hidden, hidden, hidden, attn_mask=~causal, key_padding_mask=padding)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)


def test_cross_attention_matches_torch() -> None:
    ours, torch_mha = make_pair()
    decoder_states = torch.randn(2, 3, D_MODEL)
    memory = torch.randn(2, 7, D_MODEL)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[1, 5:] = True
    output, weights = ours(decoder_states, memory, memory, padding_to_attend_mask(padding), need_weights=True)
    expected, _ = torch_mha(decoder_states, memory, memory, key_padding_mask=padding)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    assert weights is not None and weights.shape == (2, HEADS, 3, 7)
    assert (weights[1, :, :, 5:] == 0).all()


def test_fused_self_projection_equals_separate_projections() -> None:
    attention = MultiHeadAttention(D_MODEL, HEADS)
    hidden = torch.randn(2, 5, D_MODEL)
    query, key, value = attention.project_self(hidden)
    torch.testing.assert_close(query, attention.project_query(hidden))
    separate_key, separate_value = attention.project_key_value(hidden, hidden)
    torch.testing.assert_close(key, separate_key)
    torch.testing.assert_close(value, separate_value)


def test_independent_head_widths_as_in_table2_rows_a_and_b() -> None:
    attention = MultiHeadAttention(D_MODEL, 2, d_k=3, d_v=5)
    assert attention.q_proj.weight.shape == (6, D_MODEL)
    assert attention.v_proj.weight.shape == (10, D_MODEL)
    assert attention.out_proj.weight.shape == (D_MODEL, 10)
    hidden = torch.randn(2, 4, D_MODEL)
    output, weights = attention(hidden, hidden, hidden, need_weights=True)
    assert output.shape == (2, 4, D_MODEL)
    assert weights is not None and weights.shape == (2, 2, 4, 4)


def per_head_reference(
    attention: MultiHeadAttention, query: torch.Tensor, key: torch.Tensor, attend_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. (1) head by head with the module's own weights: rows h*d_k:(h+1)*d_k of W^Q and W^K, rows
    h*d_v:(h+1)*d_v of W^V; the heads' outputs concatenated, then W^O. Returns output and weights."""
    d_k, d_v = attention.d_k, attention.d_v
    outputs, all_weights = [], []
    for head in range(attention.num_heads):
        rows_k, rows_v = slice(head * d_k, (head + 1) * d_k), slice(head * d_v, (head + 1) * d_v)
        q = query @ attention.q_proj.weight[rows_k].T + attention.q_proj.bias[rows_k]
        k = key @ attention.k_proj.weight[rows_k].T + attention.k_proj.bias[rows_k]
        v = key @ attention.v_proj.weight[rows_v].T + attention.v_proj.bias[rows_v]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d_k)
        weights = torch.softmax(scores.masked_fill(~attend_mask, float("-inf")), dim=-1)
        outputs.append(weights @ v)  # (batch, query_len, d_v)
        all_weights.append(weights)
    return attention.out_proj(torch.cat(outputs, dim=-1)), torch.stack(all_weights, dim=1)


@pytest.mark.parametrize(("num_heads", "d_k", "d_v"), [(2, 3, 5), (3, 7, 2)])
@pytest.mark.parametrize("implementation", ["explicit", "fused"])
def test_unequal_head_widths_match_a_per_head_computation(
    num_heads: int, d_k: int, d_v: int, implementation: str
) -> None:
    # Neither d_k nor d_v is D_MODEL // num_heads, so a wrong head split or a scale of 1/sqrt(d_v) shows.
    torch.manual_seed(0)
    attention = MultiHeadAttention(D_MODEL, num_heads, d_k=d_k, d_v=d_v, implementation=implementation).eval()
    hidden, memory = torch.randn(3, 5, D_MODEL), torch.randn(3, 6, D_MODEL)
    padding = torch.zeros(3, 6, dtype=torch.bool)
    padding[1, 4:] = True
    padding[2, 1:] = True
    cross_mask = padding_to_attend_mask(padding)  # (3, 1, 1, 6)
    self_mask = combine_attend_masks(padding_to_attend_mask(padding[:, :5]), build_causal_mask(5))
    with torch.no_grad():
        for query, key, mask in ((hidden, memory, cross_mask), (hidden, hidden, self_mask)):
            expected, expected_weights = per_head_reference(attention, query, key, mask[:, 0])
            output, weights = attention(query, key, key, mask, need_weights=True)
            torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)
            output_only, _ = attention(query, key, key, mask)  # the path chosen by `implementation`
            torch.testing.assert_close(output_only, expected, atol=1e-5, rtol=1e-5)
    assert weights is not None and weights[2, :, :, 1:].eq(0).all()  # the padded keys get no weight


def test_explicit_and_fused_agree_with_unequal_head_widths() -> None:
    torch.manual_seed(1)
    explicit = MultiHeadAttention(D_MODEL, 4, d_k=6, d_v=3, implementation="explicit").eval()
    fused = MultiHeadAttention(D_MODEL, 4, d_k=6, d_v=3, implementation="fused").eval()
    fused.load_state_dict(explicit.state_dict())
    hidden = torch.randn(2, 7, D_MODEL)
    padding = torch.tensor([[False] * 7, [False, False, False, True, True, True, True]])
    attend_mask = combine_attend_masks(padding_to_attend_mask(padding), build_causal_mask(7))
    attend_mask = attend_mask.expand(2, 1, 7, 7).clone()
    attend_mask[1, :, 5] = False  # a query that sees no key at all: zero output on both paths, never NaN
    with torch.no_grad():
        explicit_output, _ = explicit(hidden, hidden, hidden, attend_mask)
        fused_output, _ = fused(hidden, hidden, hidden, attend_mask)
        unmasked_output, _ = fused(hidden, hidden, hidden)
    torch.testing.assert_close(fused_output, explicit_output, atol=1e-5, rtol=1e-5)
    assert not explicit_output.isnan().any()
    torch.testing.assert_close(explicit_output[1, 5], explicit.out_proj.bias, atol=1e-6, rtol=0)
    assert (explicit_output - unmasked_output).abs().max() > 1e-2  # the masks made a difference


def test_additive_scoring_respects_masks_and_gets_gradients() -> None:
    attention = MultiHeadAttention(D_MODEL, HEADS, scoring="additive")
    hidden = torch.randn(2, 5, D_MODEL)
    output, weights = attention(hidden, hidden, hidden, build_causal_mask(5), need_weights=True)
    assert weights is not None
    assert (weights.triu(diagonal=1) == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, HEADS, 5))
    output.sum().backward()
    assert attention.additive_score is not None
    assert attention.additive_score.score_vector.grad is not None
    assert attention.additive_score.score_vector.grad.abs().sum() > 0
    # Additive scores differ from dot products: the two modules disagree given the same projections.
    dot = MultiHeadAttention(D_MODEL, HEADS)
    dot.load_state_dict(attention.state_dict(), strict=False)
    dot_output, _ = dot(hidden, hidden, hidden, build_causal_mask(5))
    assert not torch.allclose(dot_output, output)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"d_model": 10, "num_heads": 3}, "not divisible"),
        ({"d_model": 0, "num_heads": 1}, "positive"),
        ({"d_model": 8, "num_heads": 2, "scoring": "cosine"}, "scoring"),
        ({"d_model": 8, "num_heads": 2, "dropout": 1.0}, "dropout"),
    ],
)
def test_invalid_arguments_fail_clearly(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(**kwargs)


@pytest.mark.parametrize("implementation", ["explicit", "fused"])
def test_non_divisible_width_is_fine_with_explicit_head_dims(implementation: str) -> None:
    """d_model 10 over 3 heads of d_k 4 and d_v 5: each head written out as Eq. (1), concatenated, projected."""
    torch.manual_seed(0)
    attention = MultiHeadAttention(10, 3, d_k=4, d_v=5, implementation=implementation).eval()
    query, memory = torch.randn(2, 3, 10), torch.randn(2, 4, 10)
    output, weights = attention(query, memory, memory, need_weights=True)
    heads = []
    for head in range(3):
        keys_rows, values_rows = slice(4 * head, 4 * head + 4), slice(5 * head, 5 * head + 5)
        q = query @ attention.q_proj.weight[keys_rows].T + attention.q_proj.bias[keys_rows]
        k = memory @ attention.k_proj.weight[keys_rows].T + attention.k_proj.bias[keys_rows]
        v = memory @ attention.v_proj.weight[values_rows].T + attention.v_proj.bias[values_rows]
        head_weights = torch.softmax(q @ k.transpose(1, 2) / 2.0, dim=-1)  # sqrt(d_k) = 2
        torch.testing.assert_close(weights[:, head], head_weights, atol=1e-6, rtol=1e-5)
        heads.append(head_weights @ v)  # (batch, query_len, d_v)
    expected = torch.cat(heads, dim=-1) @ attention.out_proj.weight.T + attention.out_proj.bias
    assert attention.out_proj.weight.shape == (10, 15)  # h * d_v = 15 columns back to d_model = 10
    torch.testing.assert_close(output, expected, atol=1e-6, rtol=1e-5)


def test_inference_reuses_the_stacked_projection_and_notices_every_weight_change() -> None:
    torch.manual_seed(0)
    attention = MultiHeadAttention(d_model=16, num_heads=4).eval()
    hidden = torch.randn(2, 5, 16)

    def separate() -> list[torch.Tensor]:
        return [
            attention.project_query(hidden),
            *attention.project_key_value(hidden, hidden),
        ]

    with torch.no_grad():
        first = attention.project_self(hidden)
        stacked = attention._fused_cache
        assert stacked is not None
        assert attention.project_self(hidden) is not None and attention._fused_cache is stacked  # reused
        for got, expected in zip(first, separate(), strict=True):
            torch.testing.assert_close(got, expected)
        attention.k_proj.weight.mul_(2.0)  # an in-place change, as load_state_dict or an optimizer makes
        for got, expected in zip(attention.project_self(hidden), separate(), strict=True):
            torch.testing.assert_close(got, expected)
        attention.load_state_dict(
            {name: torch.randn_like(value) for name, value in attention.state_dict().items()}
        )
        for got, expected in zip(attention.project_self(hidden), separate(), strict=True):
            torch.testing.assert_close(got, expected)
    with torch.no_grad():
        attention.to(torch.bfloat16).to(torch.float32)  # replaced storages, same dtype as the cached stack
        for got, expected in zip(attention.project_self(hidden), separate(), strict=True):
            torch.testing.assert_close(got, expected)
    attention.to(torch.float64)  # replaced tensors
    with torch.no_grad():
        assert attention.project_self(hidden.double())[0].dtype == torch.float64
    # With autograd on, every call stacks afresh so gradients reach all three projections.
    attention.float().train()
    query, key, value = attention.project_self(hidden)
    (query.sum() + key.sum() + value.sum()).backward()
    assert all(
        projection.weight.grad is not None and projection.weight.grad.abs().sum() > 0
        for projection in (attention.q_proj, attention.k_proj, attention.v_proj)
    )


@pytest.mark.parametrize("d_k", [4, 16, 64, 128])
def test_additive_scores_start_as_spread_as_scaled_dot_products(d_k: int) -> None:
    # Glorot per head: W_q, W_k within sqrt(3 / d_k), the score vector within sqrt(6 / (d_k + 1)).
    heads = 4
    spreads = []
    for seed in range(6):
        torch.manual_seed(seed)
        score = AdditiveScore(num_heads=heads, d_k=d_k)
        assert score.query_weight.abs().max() <= math.sqrt(3 / d_k)
        assert score.key_weight.abs().max() <= math.sqrt(3 / d_k)
        assert score.score_vector.abs().max() <= math.sqrt(6 / (d_k + 1))
        assert score.query_weight.abs().max() > 0.9 * math.sqrt(3 / d_k)  # uniform over the whole range
        query, key = torch.randn(4, heads, 24, d_k), torch.randn(4, heads, 24, d_k)
        spreads.append(score(query, key).std().item())
    # Unit-variance queries and keys: scaled dot products have standard deviation 1 at any d_k; the
    # additive scores must start about as spread, not near uniform (the stacked-tensor Xavier gave 0.19
    # at d_k = 128).
    assert 0.75 < sum(spreads) / len(spreads) < 1.25
