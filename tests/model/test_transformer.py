import dataclasses

import pytest
import torch

from transformer import Transformer, TransformerConfig
from transformer.model.masks import build_padding_mask


def random_batch(config: TransformerConfig, batch: int = 3, src_len: int = 7, tgt_len: int = 6):
    src = torch.randint(4, config.vocab_size, (batch, src_len))
    tgt = torch.randint(4, config.tgt_vocab_size, (batch, tgt_len))
    tgt[:, 0] = config.bos_id
    return src, tgt


def paper_forward(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """The paper's post-norm network written out from its equations, on the model's own weights.

    Section 3.4 (shared embeddings times sqrt(d_model), the same matrix as the output projection), 3.5
    (sinusoids: sin in even columns, cos in odd), Eq. (1)-(2) per head, and LayerNorm(x + Sublayer(x)) around
    every sublayer (section 3.1); one layer per stack. Independent of the model's code except the weights.
    """
    weights = model.state_dict()
    d_model, heads = model.config.d_model, model.config.num_heads
    d_k = d_model // heads

    def sinusoids(length: int) -> torch.Tensor:
        position = torch.arange(length, dtype=torch.float64)[:, None]
        rates = 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        table = torch.zeros(length, d_model, dtype=torch.float64)
        table[:, 0::2], table[:, 1::2] = torch.sin(position / rates), torch.cos(position / rates)
        return table.float()

    def linear(prefix: str, x: torch.Tensor) -> torch.Tensor:
        return x @ weights[f"{prefix}.weight"].T + weights[f"{prefix}.bias"]

    def norm(prefix: str, x: torch.Tensor) -> torch.Tensor:
        mean, variance = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(variance + 1e-5) * weights[f"{prefix}.weight"] + weights[
            f"{prefix}.bias"
        ]

    def attention(
        prefix: str, queries: torch.Tensor, keys: torch.Tensor, allowed: torch.Tensor
    ) -> torch.Tensor:
        def split(x: torch.Tensor) -> torch.Tensor:  # (batch, len, d_model) -> (batch, heads, len, d_k)
            return x.view(x.size(0), x.size(1), heads, d_k).transpose(1, 2)

        q, k, v = (
            split(linear(f"{prefix}.{name}_proj", x))
            for name, x in (("q", queries), ("k", keys), ("v", keys))
        )
        scores = (q @ k.transpose(-1, -2) / d_k**0.5).masked_fill(~allowed, float("-inf"))
        merged = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(queries.shape)
        return linear(f"{prefix}.out_proj", merged)

    def feed_forward(prefix: str, x: torch.Tensor) -> torch.Tensor:
        return linear(f"{prefix}.linear_out", torch.relu(linear(f"{prefix}.linear_in", x)))

    embedding = weights["src_embedding.embedding.weight"]
    source_allowed = (src != model.config.pad_id)[:, None, None, :]  # (batch, 1, 1, src_len)
    causal = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool).tril()  # (tgt_len, tgt_len)
    encoder, decoder = "encoder.layers.0", "decoder.layers.0"
    x = embedding[src] * d_model**0.5 + sinusoids(src.size(1))
    x = norm(
        f"{encoder}.self_attention_residual.norm",
        x + attention(f"{encoder}.self_attention", x, x, source_allowed),
    )
    memory = norm(f"{encoder}.feed_forward_residual.norm", x + feed_forward(f"{encoder}.feed_forward", x))
    y = embedding[tgt] * d_model**0.5 + sinusoids(tgt.size(1))
    y = norm(
        f"{decoder}.self_attention_residual.norm", y + attention(f"{decoder}.self_attention", y, y, causal)
    )
    y = norm(
        f"{decoder}.cross_attention_residual.norm",
        y + attention(f"{decoder}.cross_attention", y, memory, source_allowed),
    )
    y = norm(f"{decoder}.feed_forward_residual.norm", y + feed_forward(f"{decoder}.feed_forward", y))
    return y @ embedding.T  # (batch, tgt_len, vocab): the tied output projection, no bias


def test_forward_equals_the_papers_equations_written_out() -> None:
    config = TransformerConfig(
        vocab_size=11,
        d_model=8,
        d_ff=12,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
    )
    torch.manual_seed(0)
    model = Transformer(config).eval()
    with torch.no_grad():  # non-trivial norms and biases, so a missing one is seen
        for name, parameter in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                parameter.copy_(
                    torch.randn_like(parameter) * 0.5 + (1.0 if name.endswith("norm.weight") else 0.0)
                )
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])  # the second sentence padded
    tgt = torch.tensor([[1, 4, 5], [1, 10, 3]])
    with torch.no_grad():
        logits = model(src, tgt)
        expected = paper_forward(model, src, tgt)
    assert logits.shape == (2, 3, 11)
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)
    assert model.encode(src).shape == (2, 4, 8)


@pytest.mark.parametrize("norm_first", [False, True])
def test_no_information_flows_from_future_target_positions(tiny_config, norm_first: bool) -> None:
    model = Transformer(dataclasses.replace(tiny_config, norm_first=norm_first)).eval()
    src, tgt = random_batch(tiny_config)
    logits = model(src, tgt)
    for position in range(1, tgt.size(1)):
        changed = tgt.clone()
        changed[:, position] = (changed[:, position] + 1 - 4) % (tiny_config.vocab_size - 4) + 4
        changed_logits = model(src, changed)
        torch.testing.assert_close(changed_logits[:, :position], logits[:, :position], atol=1e-5, rtol=1e-5)
        assert not torch.allclose(changed_logits[:, position:], logits[:, position:])


def test_extra_padding_leaves_real_positions_unchanged(tiny_config) -> None:
    model = Transformer(tiny_config).eval()
    src, tgt = random_batch(tiny_config)
    src[1, 5:] = tiny_config.pad_id
    logits = model(src, tgt)
    padded_src = torch.cat([src, torch.full((3, 4), tiny_config.pad_id)], dim=1)
    padded_tgt = torch.cat([tgt, torch.full((3, 3), tiny_config.pad_id)], dim=1)
    padded_logits = model(padded_src, padded_tgt)
    torch.testing.assert_close(padded_logits[:, : tgt.size(1)], logits, atol=1e-5, rtol=1e-5)
    # Shortening the padded row to its real length changes nothing either.
    alone = model(src[1:2, :5], tgt[1:2])
    torch.testing.assert_close(alone, logits[1:2], atol=1e-5, rtol=1e-5)


def test_self_attention_stack_is_permutation_equivariant_without_positions(tiny_config) -> None:
    model = Transformer(tiny_config).eval()
    src, _ = random_batch(tiny_config)
    permutation = torch.randperm(src.size(1))
    embedded = model.src_embedding(src)  # no positional encoding added
    encoded, _ = model.encoder(embedded, None)
    permuted, _ = model.encoder(embedded[:, permutation], None)
    torch.testing.assert_close(permuted, encoded[:, permutation], atol=1e-5, rtol=1e-5)
    # With positional encodings the same permutation changes the representations.
    with_positions = model.encode(src)
    permuted_with_positions = model.encode(src[:, permutation])
    assert not torch.allclose(permuted_with_positions, with_positions[:, permutation], atol=1e-3)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"norm_first": True},
        {"positional_encoding": "learned", "max_positions": 16},
        {"attention_window": 2},
        {"share_embeddings": False, "tie_output_projection": False, "target_vocab_size": 30},
        {"attention_scoring": "additive"},
        {"d_k": 4, "d_v": 12},
    ],
)
def test_cached_incremental_decoding_equals_full_decoding(tiny_config, changes) -> None:
    config = dataclasses.replace(tiny_config, **changes)
    model = Transformer(config).eval()
    src, tgt = random_batch(config)
    src[0, 4:] = config.pad_id
    full = model(src, tgt)
    memory = model.encode(src)
    cache = model.init_decoder_cache(memory, build_padding_mask(src, config.pad_id))
    steps = [model.decode(tgt[:, i : i + 1], None, None, cache) for i in range(tgt.size(1))]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.decoded_len == tgt.size(1)


def test_restricted_attention_limits_the_receptive_field(tiny_config) -> None:
    config = dataclasses.replace(tiny_config, num_encoder_layers=1, attention_window=1)
    model = Transformer(config).eval()
    src, _ = random_batch(config, src_len=8)
    encoded = model.encode(src)
    changed = src.clone()
    changed[:, 7] = (changed[:, 7] - 3) % (config.vocab_size - 4) + 4
    changed_encoded = model.encode(changed)
    # One layer with r = 1: position 7 influences only positions 6 and 7.
    torch.testing.assert_close(changed_encoded[:, :6], encoded[:, :6])
    assert not torch.allclose(changed_encoded[:, 6:], encoded[:, 6:])


def test_embeddings_are_shared_and_tied_by_default(tiny_config) -> None:
    model = Transformer(tiny_config)
    assert model.src_embedding is model.tgt_embedding
    assert model.output_projection is None
    hidden = torch.randn(1, 2, tiny_config.d_model)
    torch.testing.assert_close(model.project_output(hidden), hidden @ model.tgt_embedding.weight.T)
    untied = Transformer(
        dataclasses.replace(tiny_config, share_embeddings=False, tie_output_projection=False)
    )
    extra = tiny_config.vocab_size * tiny_config.d_model * 2
    assert untied.num_parameters() == model.num_parameters() + extra


def test_learned_positions_fail_clearly_on_long_input(tiny_config) -> None:
    model = Transformer(dataclasses.replace(tiny_config, positional_encoding="learned", max_positions=8))
    src, tgt = random_batch(tiny_config, src_len=9)
    with pytest.raises(ValueError, match="max_positions=8"):
        model(src, tgt)


def test_attention_weights_are_returned_for_every_layer(tiny_config) -> None:
    model = Transformer(tiny_config).eval()
    src, tgt = random_batch(tiny_config)
    src[2, 3:] = tiny_config.pad_id
    logits, attention = model.forward_with_attention(src, tgt)
    torch.testing.assert_close(logits, model(src, tgt), atol=1e-5, rtol=1e-5)
    assert len(attention.encoder_self) == 2 and len(attention.cross) == 2 and len(attention.decoder_self) == 2
    assert attention.cross[0].shape == (3, 4, 6, 7)
    assert (attention.cross[1][2, :, :, 3:] == 0).all()
    assert (attention.decoder_self[0].triu(1) == 0).all()


def test_projections_are_xavier_initialised(tiny_config) -> None:
    model = Transformer(dataclasses.replace(tiny_config, d_model=64, d_ff=256))
    weight = model.encoder.layers[0].feed_forward.linear_in.weight
    bound = (6 / (64 + 256)) ** 0.5
    assert weight.abs().max() <= bound
    assert weight.std().item() == pytest.approx(bound / 3**0.5, rel=0.05)
    assert (model.encoder.layers[0].self_attention.q_proj.bias == 0).all()


def test_model_learns_to_copy(tiny_config) -> None:
    """The Annotated Transformer's first check: overfit a copy task in a few hundred steps."""
    config = dataclasses.replace(tiny_config, vocab_size=14, d_ff=128)
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 50, (400 - step) / 200)
    )
    for _ in range(400):
        body = torch.randint(4, 14, (32, 6))
        tgt_input = torch.cat([torch.full((32, 1), config.bos_id), body], dim=1)
        tgt_output = torch.cat([body, torch.full((32, 1), config.eos_id)], dim=1)
        logits = model(body, tgt_input)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 14), tgt_output.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    model.eval()
    body = torch.randint(4, 14, (16, 6))
    tgt = torch.full((16, 1), config.bos_id)
    for _ in range(6):
        next_token = model(body, tgt)[:, -1].argmax(-1, keepdim=True)
        tgt = torch.cat([tgt, next_token], dim=1)
    assert (tgt[:, 1:] == body).float().mean() > 0.95


def test_output_bias_is_added_to_the_logits_and_saved(tiny_config) -> None:
    model = Transformer(dataclasses.replace(tiny_config, output_bias=True)).eval()
    assert model.output_bias is not None and "output_bias" in model.state_dict()
    src, tgt = random_batch(tiny_config)
    before = model(src, tgt)
    model.output_bias[5] = 3.0
    after = model(src, tgt)
    torch.testing.assert_close(after[..., 5], before[..., 5] + 3.0)
    torch.testing.assert_close(after[..., 6], before[..., 6])
    assert Transformer(tiny_config).num_parameters() == model.num_parameters()  # a buffer, not trained
