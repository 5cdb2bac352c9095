"""The attentional LSTM encoder-decoder: its config, its equations, incremental decoding and checkpoints."""

from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from transformer.architectures import build_model, model_config_from_dict
from transformer.baselines import RNNConfig, RNNEncoderDecoder
from transformer.baselines.rnn_attention import GlobalAttention
from transformer.checkpoint.model_checkpoint import load_checkpoint, save_checkpoint
from transformer.config.experiment import experiment_from_dict

SCORINGS = ["dot", "general", "additive"]


def tiny_rnn_config(**overrides) -> RNNConfig:
    values = {
        "vocab_size": 40,
        "embedding_dim": 16,
        "hidden_size": 16,
        "num_encoder_layers": 2,
        "num_decoder_layers": 2,
        "dropout": 0.0,
    }
    return RNNConfig(**{**values, **overrides})


def sources_and_targets() -> tuple[torch.Tensor, torch.Tensor]:
    """Two sentences, the second padded on both sides."""
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    tgt = torch.tensor([[1, 11, 12, 13], [1, 14, 0, 0]])
    return src, tgt


# ------------------------------------------------------------------------------------------------------------
# Configuration
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"hidden_size": 15, "embedding_dim": 15}, "hidden_size=15 must be even"),
        ({"attention": "concat"}, "attention='concat' is not one of"),
        ({"embedding_dim": 8}, "tie_output_projection needs embedding_dim == hidden_size"),
        ({"dropout": 1.0}, r"dropout=1.0 must be in \[0, 1\)"),
        ({"architecture": "transformer"}, "architecture='transformer' must be 'rnn'"),
        ({"target_vocab_size": 30}, "share_embeddings needs equal vocabularies"),
        ({"eos_id": 0}, "pad_id and eos_id must differ"),
        ({"num_decoder_layers": 0}, "num_decoder_layers=0 must be positive"),
    ],
)
def test_invalid_configs_are_refused_naming_the_field(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tiny_rnn_config(**overrides)


def test_config_fields_are_type_checked_and_round_trip() -> None:
    with pytest.raises(TypeError, match=r"RNNConfig\.input_feeding"):
        tiny_rnn_config(input_feeding="yes")
    config = tiny_rnn_config(decoder_start_id=3, share_embeddings=False, target_vocab_size=50)
    assert config.to_dict()["architecture"] == "rnn"
    assert RNNConfig.from_dict(config.to_dict()) == config
    assert model_config_from_dict(config.to_dict()) == config
    assert (config.start_id, config.src_vocab_size, config.tgt_vocab_size) == (3, 40, 50)
    with pytest.raises(ValueError, match="unknown option"):
        RNNConfig.from_dict({"vocab_size": 40, "d_model": 16})


def test_the_model_section_selects_the_architecture() -> None:
    model = {"architecture": "rnn", "vocab_size": 40, "hidden_size": 32, "embedding_dim": 32}
    experiment = experiment_from_dict({"model": model})
    assert isinstance(experiment.model, RNNConfig) and experiment.model.attention == "general"
    assert experiment_from_dict(experiment.to_dict()) == experiment
    explicit = experiment_from_dict({"model": {"architecture": "transformer", "vocab_size": 40}})
    assert "architecture" not in explicit.to_dict()["model"]  # a Transformer's stored config is unchanged
    with pytest.raises(ValueError, match=r"\[model\] model.architecture='lstm' is not one of"):
        experiment_from_dict({"model": {"architecture": "lstm", "vocab_size": 40}})
    with pytest.raises(ValueError, match=r"model.preset='base' names a Transformer"):
        experiment_from_dict({"model": {"architecture": "rnn", "preset": "base", "vocab_size": 40}})
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['d_model'\] for RNNConfig"):
        experiment_from_dict({"model": {"architecture": "rnn", "vocab_size": 40, "d_model": 8}})


# ------------------------------------------------------------------------------------------------------------
# The equations
# ------------------------------------------------------------------------------------------------------------


def hand_scores(attention: GlobalAttention, query: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
    """score(h_t, h̄_s) one pair at a time, straight from Luong et al. eq. 8 and Bahdanau et al. A.1.2."""
    batch, query_len, _ = query.shape
    scores = torch.empty(batch, query_len, memory.size(1), dtype=torch.float64)
    for b in range(batch):
        for t in range(query_len):
            h_t = query[b, t].double()
            for s in range(memory.size(1)):
                h_s = memory[b, s].double()
                if attention.scoring == "dot":
                    value = h_t @ h_s
                elif attention.scoring == "general":
                    value = h_t @ (attention.key_projection.weight.double() @ h_s)  # h_t^T W_a h̄_s
                else:
                    w_a = attention.query_projection.weight.double()
                    u_a = attention.key_projection.weight.double()
                    value = attention.score_vector.double() @ torch.tanh(w_a @ h_t + u_a @ h_s)
                scores[b, t, s] = value
    return scores


@pytest.mark.parametrize("scoring", SCORINGS)
def test_attention_weights_equal_the_formula_with_padding_masked(scoring: str) -> None:
    torch.manual_seed(0)
    attention = GlobalAttention(8, scoring)
    for parameter in attention.parameters():
        torch.nn.init.normal_(parameter, std=0.5)
    query, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    padding = torch.tensor([[False] * 5, [False, False, True, True, True]])
    attentional, weights = attention(query, attention.prepare_keys(memory), memory, padding)

    scores = hand_scores(attention, query, memory)
    expected = torch.zeros_like(scores)
    for b in range(2):
        real = (~padding[b]).nonzero().flatten()
        exponentials = scores[b][:, real].exp()
        expected[b][:, real] = exponentials / exponentials.sum(
            dim=-1, keepdim=True
        )  # softmax over real positions
    torch.testing.assert_close(weights.double(), expected, atol=1e-6, rtol=1e-5)
    assert weights[1, :, 2:].abs().max() == 0  # padding gets no weight at all

    context = expected @ memory.double()  # c_t = sum_s a_t(s) h̄_s
    combined = torch.cat([context, query.double()], dim=-1)  # [c_t; h_t]
    tilde = torch.tanh(
        combined @ attention.output_projection.weight.double().T
    )  # h~_t = tanh(W_c [c_t; h_t])
    torch.testing.assert_close(attentional.double(), tilde, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scoring", SCORINGS)
def test_first_decoder_step_follows_luong_with_input_feeding(scoring: str) -> None:
    model = RNNEncoderDecoder(tiny_rnn_config(attention=scoring)).eval()
    src, tgt = sources_and_targets()
    with torch.no_grad():
        encoding, state = model.encode(src)
        logits, weights, _ = model.decode(tgt[:, :1], encoding, state)
        # By hand: the LSTM reads [embedding(y_0); h~_0 = 0], attends from its top state, projects with E^T.
        step_input = torch.cat([model.tgt_embedding(tgt[:, :1]), torch.zeros(2, 1, 16)], dim=-1)
        top, _ = model.decoder(step_input, (state.hidden, state.cell))
        scores = hand_scores(model.attention, top, encoding.memory).float()
        scores = scores.masked_fill(src.eq(0)[:, None, :], float("-inf"))
        expected_weights = scores.softmax(dim=-1)
        context = expected_weights @ encoding.memory
        tilde = torch.tanh(torch.cat([context, top], dim=-1) @ model.attention.output_projection.weight.T)
        expected_logits = tilde @ model.tgt_embedding.weight.T  # tied W_s
    torch.testing.assert_close(weights, expected_weights, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(logits, expected_logits, atol=1e-5, rtol=1e-5)


def test_bridge_maps_both_directions_final_states_to_every_decoder_layer() -> None:
    model = RNNEncoderDecoder(tiny_rnn_config(num_encoder_layers=1, num_decoder_layers=3)).eval()
    src = torch.tensor([[5, 6, 7, 2, 0, 0]])
    with torch.no_grad():
        encoding, state = model.encode(src)
        # The forward direction ends at the last real token (position 3), the backward one at position 0.
        top = torch.cat([encoding.memory[0, 3, :8], encoding.memory[0, 0, 8:]])
        hidden = torch.tanh(model.bridge_hidden(top)).view(3, 16)
        cell = model.bridge_cell(top).view(3, 16)
    torch.testing.assert_close(state.hidden[:, 0], hidden)
    torch.testing.assert_close(state.cell[:, 0], cell)
    assert state.feed.abs().max() == 0
    assert encoding.memory[0, 4:].abs().max() == 0  # padding positions output nothing


# ------------------------------------------------------------------------------------------------------------
# The model as the package uses it
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("input_feeding", [True, False])
@pytest.mark.parametrize("scoring", SCORINGS)
def test_token_by_token_decoding_equals_teacher_forcing(scoring: str, input_feeding: bool) -> None:
    model = RNNEncoderDecoder(tiny_rnn_config(attention=scoring, input_feeding=input_feeding)).eval()
    src, tgt = sources_and_targets()
    with torch.no_grad():
        logits, weights = model.forward_with_attention(src, tgt)
        encoding, state = model.encode(src)
        steps = []
        for position in range(tgt.size(1)):
            step_logits, _, state = model.decode(tgt[:, position : position + 1], encoding, state)
            steps.append(step_logits)
    assert logits.shape == (2, 4, 40) and weights.shape == (2, 4, 5)
    torch.testing.assert_close(torch.cat(steps, dim=1), logits, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(2, 4))


def test_padding_does_not_change_a_sentence() -> None:
    model = RNNEncoderDecoder(tiny_rnn_config()).eval()
    src, tgt = sources_and_targets()
    with torch.no_grad():
        batched = model(src, tgt)
        alone = model(src[1:, :3], tgt[1:, :2])
    torch.testing.assert_close(batched[1, :2], alone[0], atol=1e-6, rtol=1e-5)


def test_dropout_trains_and_eval_is_deterministic() -> None:
    model = RNNEncoderDecoder(tiny_rnn_config(dropout=0.5))
    src, tgt = sources_and_targets()
    assert not torch.equal(model(src, tgt), model(src, tgt))
    model.eval()
    assert torch.equal(model(src, tgt), model(src, tgt))
    loss = F.cross_entropy(model.train()(src, tgt).flatten(0, 1), tgt.roll(-1, 1).flatten(), ignore_index=0)
    loss.backward()
    assert all(parameter.grad is not None for parameter in model.parameters())


def test_shared_and_tied_embeddings_are_counted_once() -> None:
    tied = RNNEncoderDecoder(tiny_rnn_config())
    untied = RNNEncoderDecoder(tiny_rnn_config(share_embeddings=False, tie_output_projection=False))
    assert tied.tgt_embedding is tied.src_embedding and tied.output_projection is None
    assert untied.num_parameters() == tied.num_parameters() + 2 * 40 * 16
    assert tied.src_embedding.weight[0].abs().max() == 0  # the padding row
    assert isinstance(build_model(tiny_rnn_config()), RNNEncoderDecoder)


def test_checkpoint_round_trip_rebuilds_the_same_model(tmp_path: Path) -> None:
    config = tiny_rnn_config(attention="additive", share_embeddings=False, target_vocab_size=50)
    model = RNNEncoderDecoder(config).eval()
    save_checkpoint(tmp_path / "checkpoint", model, config, {"tokenizer.model": b"x"})
    checkpoint = load_checkpoint(tmp_path / "checkpoint")
    assert checkpoint.model_config == config
    rebuilt = checkpoint.build_model()
    assert isinstance(rebuilt, RNNEncoderDecoder) and not rebuilt.training
    src, tgt = sources_and_targets()
    with torch.no_grad():
        assert torch.equal(rebuilt(src, tgt), model(src, tgt))
