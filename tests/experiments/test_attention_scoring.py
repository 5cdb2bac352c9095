"""``attention-scoring``: the attention statistics against hand computations, and the experiment end to end."""

import math
from pathlib import Path

import pytest
import torch

from transformer import Transformer, TransformerConfig
from transformer.config.experiment import experiment_from_dict
from transformer.data.pipeline.batch import Batch
from transformer.experiments.attention_scoring.attention_statistics import (
    ATTENTION_KINDS,
    STATISTICS,
    allowed_pairs,
    attention_modules,
    measure_attention,
    row_statistics,
)
from transformer.experiments.attention_scoring.run import measure
from transformer.experiments.attention_scoring.settings import build_plan
from transformer.experiments.common.plan import run_config
from transformer.experiments.common.results import read_results
from transformer.experiments.common.runner import run_experiment
from transformer.experiments.registry import EXPERIMENTS, SCALES, experiment_part
from transformer.model.multihead_attention import split_heads

PAD, BOS, EOS = 0, 1, 2


def make_batch(sources: list[list[int]], targets: list[list[int]], width: int = 0) -> Batch:
    """Right-pad sentences (EOS appended to sources, BOS/EOS to targets) to their longest, plus ``width``."""
    src_len = max(len(s) for s in sources) + 1 + width
    tgt_len = max(len(t) for t in targets) + 1 + width
    src = torch.full((len(sources), src_len), PAD)
    tgt_in = torch.full((len(targets), tgt_len), PAD)
    tgt_out = torch.full((len(targets), tgt_len), PAD)
    for row, (source, target) in enumerate(zip(sources, targets, strict=True)):
        src[row, : len(source) + 1] = torch.tensor([*source, EOS])
        tgt_in[row, : len(target) + 1] = torch.tensor([BOS, *target])
        tgt_out[row, : len(target) + 1] = torch.tensor([*target, EOS])
    return Batch(
        src,
        tgt_in,
        tgt_out,
        int(src.ne(PAD).sum()),
        int(tgt_out.ne(PAD).sum()),
        0.0,
        list(range(len(sources))),
    )


SOURCES = [[5, 6, 7, 8, 9], [10, 11]]
TARGETS = [[12, 13, 14], [15, 16, 17, 18]]


def tiny_model(**overrides) -> Transformer:
    settings = {
        "vocab_size": 30,
        "d_model": 8,
        "d_ff": 16,
        "num_heads": 2,
        "num_encoder_layers": 1,
        "num_decoder_layers": 1,
        "dropout": 0.0,
        "norm_first": True,
        **overrides,
    }
    torch.manual_seed(7)
    return Transformer(TransformerConfig(**settings))


def by_layer(statistics) -> dict:
    return {(layer.kind, layer.layer): layer for layer in statistics.layers}


def test_row_statistics_by_hand() -> None:
    logits = torch.tensor(
        [
            [10.0, 0.0, 0.0],  # saturated: e^10 / (e^10 + 2) = 0.99991
            [0.0, 0.0, 0.0],  # uniform over three keys: entropy log 3
            [0.0, 0.0, 100.0],  # the 100 is masked: uniform over two keys, not saturated
            [3.0, 1.0, 2.0],  # a single allowed key: not counted
        ]
    )
    allowed = torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 0], [0, 1, 0]], dtype=torch.bool)
    counted, entropy, saturated = row_statistics(logits, allowed)
    assert counted.tolist() == [True, True, True, False]
    assert saturated.tolist() == [True, False, False, False]
    p = math.exp(10) / (math.exp(10) + 2)
    q = 1 / (math.exp(10) + 2)
    expected = [-(p * math.log(p) + 2 * q * math.log(q)), math.log(3), math.log(2), 0.0]
    torch.testing.assert_close(entropy, torch.tensor(expected, dtype=torch.float64))
    _, _, strict = row_statistics(logits, allowed, saturation=0.99995)
    assert not strict.any()


def test_allowed_pairs_combines_the_mask_with_real_queries() -> None:
    key_padding = torch.tensor([[True, True, False]])[:, None, None, :]  # (1, 1, 1, 3)
    query_valid = torch.tensor([[True, False]])
    allowed = allowed_pairs(torch.Size([1, 2, 2, 3]), key_padding, query_valid)
    assert allowed.shape == (1, 2, 2, 3)
    assert allowed[0, :, 0].tolist() == [[True, True, False]] * 2
    assert not allowed[0, :, 1].any()
    causal = torch.tensor([[True, False], [True, True]])
    assert allowed_pairs(torch.Size([1, 1, 2, 2]), causal, torch.tensor([[True, True]]))[0, 0].equal(causal)


def test_zero_queries_give_uniform_rows_zero_variance_and_counts_by_hand() -> None:
    model = tiny_model()
    for _, _, module in attention_modules(model):
        torch.nn.init.zeros_(module.q_proj.weight)
        torch.nn.init.zeros_(module.q_proj.bias)
    batch = make_batch(SOURCES, TARGETS)
    layers = by_layer(measure_attention(model, [batch]))
    heads = 2
    source_lengths = [len(s) + 1 for s in SOURCES]  # with EOS: 6 and 3
    target_lengths = [len(t) + 1 for t in TARGETS]  # with BOS: 4 and 5
    encoder, decoder, cross = layers["encoder_self", 0], layers["decoder_self", 0], layers["cross", 0]
    # Every q is 0, so every q . k is 0 and every row is uniform over the keys it may see.
    for layer in (encoder, decoder, cross):
        assert layer.qk_variance == 0.0 and layer.saturated_share == 0.0
    assert encoder.scores == heads * sum(n * n for n in source_lengths)
    assert encoder.rows == heads * sum(source_lengths)
    expected = sum(n * math.log(n) for n in source_lengths) / sum(source_lengths)
    assert encoder.entropy == pytest.approx(expected)
    # Causal: row t sees t + 1 keys; row 0 (one key) is left out of entropy and saturation.
    assert decoder.scores == heads * sum(n * (n + 1) // 2 for n in target_lengths)
    assert decoder.rows == heads * sum(n - 1 for n in target_lengths)
    entropies = [math.log(t + 1) for n in target_lengths for t in range(1, n)]
    assert decoder.entropy == pytest.approx(sum(entropies) / len(entropies))
    assert cross.scores == heads * sum(s * t for s, t in zip(source_lengths, target_lengths, strict=True))
    entropies = [math.log(s) for s, t in zip(source_lengths, target_lengths, strict=True) for _ in range(t)]
    assert cross.entropy == pytest.approx(sum(entropies) / len(entropies))


def test_qk_variance_equals_a_hand_computation_with_known_weights() -> None:
    model = tiny_model()
    attention = model.encoder.layers[0].self_attention
    with torch.no_grad():
        attention.q_proj.weight.copy_(torch.eye(8) * 2.0)
        attention.k_proj.weight.copy_(torch.eye(8).flip(0))
        attention.q_proj.bias.zero_()
        attention.k_proj.bias.zero_()
    batch = make_batch(SOURCES, TARGETS)
    captured = []
    handle = attention.register_forward_pre_hook(lambda module, inputs: captured.append(inputs[0].detach()))
    with torch.no_grad():
        model(batch.src_tokens, batch.tgt_input)
    handle.remove()
    hidden = captured[0]  # the (normalised) input of the encoder's self-attention
    query = split_heads(hidden * 2.0, 2)
    key = split_heads(hidden.flip(-1), 2)
    scores = []
    for row, length in enumerate(len(s) + 1 for s in SOURCES):
        scores.append((query[row, :, :length] @ key[row, :, :length].transpose(-2, -1)).flatten())
    expected = torch.cat(scores).double().var(unbiased=False)
    measured = by_layer(measure_attention(model, [batch]))["encoder_self", 0]
    assert measured.qk_variance == pytest.approx(float(expected), rel=1e-5)


def test_statistics_ignore_padding() -> None:
    model = tiny_model()
    tight = measure_attention(model, [make_batch(SOURCES, TARGETS)], label_smoothing=0.1)
    padded = measure_attention(model, [make_batch(SOURCES, TARGETS, width=4)], label_smoothing=0.1)
    for before, after in zip(tight.layers, padded.layers, strict=True):
        assert (before.scores, before.rows) == (after.scores, after.rows)
        for name in STATISTICS:
            assert getattr(after, name) == pytest.approx(getattr(before, name), rel=1e-5, abs=1e-9)


@pytest.mark.parametrize(
    ("scoring", "scaling"), [("dot_product", "sqrt"), ("dot_product", "none"), ("additive", "sqrt")]
)
def test_gradient_norm_is_of_the_loss_over_all_batches(scoring: str, scaling: str) -> None:
    from transformer.loss import label_smoothed_nll_loss

    model = tiny_model(attention_scoring=scoring, attention_scaling=scaling)
    batches = [make_batch(SOURCES, TARGETS), make_batch([[5, 6]], [[7, 8, 9, 10, 11]])]
    measured = by_layer(measure_attention(model, batches, label_smoothing=0.1))
    # Reference: keep each layer's logits, backpropagate (sum of the losses) / (all target tokens).
    kept: dict = {}
    for kind, index, module in attention_modules(model):

        def keep(query, key, logits, mask, name=(kind, index)):
            kept.setdefault(name, []).append(logits)
            return logits

        module.logits_hook = keep
    total = sum(batch.num_target_tokens for batch in batches)
    model.eval()
    loss = sum(
        label_smoothed_nll_loss(model(b.src_tokens, b.tgt_input), b.tgt_output, 0.1, PAD)[0] for b in batches
    )
    everything = [tensor for tensors in kept.values() for tensor in tensors]
    gradients = dict(zip(map(id, everything), torch.autograd.grad(loss / total, everything), strict=True))
    for name, tensors in kept.items():
        norm = math.sqrt(sum(float(gradients[id(tensor)].double().square().sum()) for tensor in tensors))
        assert measured[name].logit_grad_norm == pytest.approx(norm, rel=1e-5)
        assert norm > 0


def test_measuring_leaves_the_model_as_it_was() -> None:
    model = tiny_model(dropout=0.1)
    model.train()
    model.src_embedding.embedding.weight.requires_grad_(False)
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    measure_attention(model, [make_batch(SOURCES, TARGETS)])
    assert model.training
    assert not model.src_embedding.embedding.weight.requires_grad
    assert all(parameter.grad is None for parameter in model.parameters())
    assert all(module.logits_hook is None for _, _, module in attention_modules(model))
    assert all(torch.equal(before[name], tensor) for name, tensor in model.state_dict().items())
    with pytest.raises(ValueError, match="at least one batch"):
        measure_attention(model, [])


def test_averages_and_record_keys() -> None:
    statistics = measure_attention(tiny_model(num_encoder_layers=2), [make_batch(SOURCES, TARGETS)])
    averages = statistics.averages()
    encoder = [layer.entropy for layer in statistics.layers if layer.kind == "encoder_self"]
    assert len(encoder) == 2 and averages["entropy_encoder_self"] == pytest.approx(sum(encoder) / 2)
    assert averages["entropy"] == pytest.approx(sum(layer.entropy for layer in statistics.layers) / 4)
    record = statistics.to_dict("init_")
    for name in STATISTICS:
        assert f"init_{name}" in record and all(f"init_{name}_{kind}" in record for kind in ATTENTION_KINDS)
    assert [layer["kind"] for layer in record["init_attention_layers"]] == [
        "encoder_self",
        "encoder_self",
        "decoder_self",
        "cross",
    ]


def test_plan_has_every_scoring_and_key_width_at_every_scale() -> None:
    assert EXPERIMENTS["attention-scoring"] == "transformer.experiments.attention_scoring"
    for scale in SCALES:
        plan = experiment_part("attention-scoring", "settings").build_plan(scale)
        assert len(plan.variants) == 28 and len({variant.name for variant in plan.variants}) == 28
        models = [run_config(plan, variant, 1)["model"] for variant in plan.variants]  # all valid
        assert {model["d_model"] for model in models} == {plan.base["model"].get("d_model", 512)}
        assert all(model["d_k"] == model["d_v"] for model in models)
    plan = build_plan("cpu")
    assert [variant.name for variant in plan.select(["additive"])] == [
        f"additive-dk{d_k}" for d_k in (4, 8, 16, 32, 64, 128, 256)
    ]
    unscaled = run_config(plan, plan.variant("unscaled-dk256"), 1)["model"]
    assert (unscaled["attention_scoring"], unscaled["attention_scaling"], unscaled["d_k"]) == (
        "dot_product",
        "none",
        256,
    )
    additive = run_config(plan, plan.variant("additive-dk4"), 1)["model"]
    assert (additive["attention_scoring"], additive["attention_scaling"]) == ("additive", "sqrt")
    assert plan.base["data"]["corpus"] == "synthetic"
    with pytest.raises(ValueError, match="--scale huge"):
        build_plan("huge")


def test_measure_hook_at_initialisation_equals_trained_for_an_untrained_model(tmp_path: Path) -> None:
    plan = build_plan("tiny")
    config = experiment_from_dict(run_config(plan, plan.variant("linear-dk16"), 3), source="test")

    class Pieces:
        """A tokenizer that maps words to fixed ids."""

        vocab_size = config.model.vocab_size

        def encode(self, text: str) -> list[int]:
            return [4 + len(word) for word in text.split()]

        def encode_target(self, text: str) -> list[int]:
            return self.encode(text)

    torch.manual_seed(config.train.seed)
    model = Transformer(config.model)
    state = torch.get_rng_state()
    pairs = [("a bb ccc", "dd e"), ("ffff g", "hh iii jjjj k")]
    record = measure(model=model, tokenizer=Pieces(), pairs=pairs, config=config, run_dir=tmp_path)
    assert torch.equal(torch.get_rng_state(), state)
    assert record["statistics_pairs"] == 2
    for name in STATISTICS:
        assert record[f"init_{name}"] == pytest.approx(record[f"trained_{name}"])
    for initial, trained in zip(
        record["init_attention_layers"], record["trained_attention_layers"], strict=True
    ):
        assert (initial["kind"], initial["layer"]) == (trained["kind"], trained["layer"])
        assert [initial[name] for name in STATISTICS] == pytest.approx([trained[name] for name in STATISTICS])


def test_tiny_experiment_end_to_end(tmp_path: Path) -> None:
    plan = build_plan("tiny")
    only = ["sqrt-dk8", "additive-dk4"]
    outcome = run_experiment(
        plan, tmp_path, only=only, report=lambda message: None, poll_seconds=0.05, allow_dirty=True
    )
    assert outcome.finished == ["sqrt-dk8-s1", "additive-dk4-s1"] and not outcome.failed
    records = {record["variant"]: record for record in read_results(tmp_path / "results.jsonl")}
    assert set(records) == set(only)
    for record in records.values():
        assert record["train_steps"] == 4 and 1.0 < record["dev_perplexity"] < 1000
        for stage in ("init", "trained"):
            for name in STATISTICS:
                assert math.isfinite(record[f"{stage}_{name}"]), (stage, name)
                for kind in ATTENTION_KINDS:
                    assert f"{stage}_{name}_{kind}" in record
            assert len(record[f"{stage}_attention_layers"]) == 3  # 1 encoder + 1 decoder layer: 3 attentions
            assert 0.0 <= record[f"{stage}_saturated_share"] <= 1.0 and record[f"{stage}_entropy"] > 0
    assert records["additive-dk4"]["config"]["model"]["attention_scoring"] == "additive"
    assert records["sqrt-dk8"]["config"]["model"]["d_v"] == 8
    table = (tmp_path / "table.md").read_text(encoding="utf-8")
    lines = table.splitlines()
    row = next(line for line in lines if line.startswith("| sqrt-dk8 | q.k / sqrt(d_k) | 8 | 8 | 4 |"))
    assert f"{records['sqrt-dk8']['dev_perplexity']:.2f}" in row
    statistics_row = [line for line in lines if line.startswith("| additive-dk4 |")][-1]
    assert statistics_row.count(" -> ") == len(STATISTICS)
    assert next(line for line in lines if line.startswith("| linear-dk64 |")).count(" - ") >= 4  # not run
    bleu_grid = next(line for line in lines if line.startswith("| q.k / sqrt(d_k) |"))
    assert f"{records['sqrt-dk8']['dev_bleu']:.1f}" in bleu_grid
    for name in ("attention-scoring.png", "attention-scoring-statistics.png"):
        assert (tmp_path / name).stat().st_size > 1000
