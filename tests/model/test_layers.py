import math

import pytest
import torch

from transformer.model.embeddings import TokenEmbedding
from transformer.model.feed_forward import PositionwiseFeedForward
from transformer.model.residual import ResidualConnection


def test_token_embedding_is_scaled_by_sqrt_d_model_and_pad_is_zero() -> None:
    embedding = TokenEmbedding(vocab_size=10, d_model=16, pad_id=0)
    tokens = torch.tensor([[3, 0]])
    out = embedding(tokens)
    torch.testing.assert_close(out[0, 0], embedding.weight[3] * math.sqrt(16))
    assert (out[0, 1] == 0).all()
    unscaled = TokenEmbedding(vocab_size=10, d_model=16, pad_id=0, scale=False)
    torch.testing.assert_close(unscaled(tokens)[0, 0], unscaled.weight[3])


def test_feed_forward_is_eq2_and_position_wise() -> None:
    ffn = PositionwiseFeedForward(d_model=4, d_ff=8)
    hidden = torch.randn(2, 3, 4)
    expected = torch.relu(hidden @ ffn.linear_in.weight.T + ffn.linear_in.bias) @ ffn.linear_out.weight.T
    torch.testing.assert_close(ffn(hidden), expected + ffn.linear_out.bias)
    # Each position is transformed independently.
    torch.testing.assert_close(ffn(hidden[:, 1:2]), ffn(hidden)[:, 1:2])


@pytest.mark.parametrize("activation", ["gelu", "silu"])
def test_feed_forward_other_activations(activation: str) -> None:
    ffn = PositionwiseFeedForward(d_model=4, d_ff=8, activation=activation)
    relu = PositionwiseFeedForward(d_model=4, d_ff=8)
    relu.load_state_dict(ffn.state_dict())
    hidden = torch.randn(2, 3, 4)
    assert not torch.allclose(ffn(hidden), relu(hidden))
    with pytest.raises(ValueError, match="activation"):
        PositionwiseFeedForward(d_model=4, d_ff=8, activation="tanh")


def test_residual_post_norm_and_pre_norm() -> None:
    hidden = torch.randn(2, 3, 4) * 5 + 1
    sublayer_output = torch.randn(2, 3, 4)
    post = ResidualConnection(d_model=4, dropout=0.0, norm_first=False, layer_norm_eps=1e-5)
    assert post.normalize_input(hidden) is hidden
    torch.testing.assert_close(post.add(hidden, sublayer_output), post.norm(hidden + sublayer_output))
    pre = ResidualConnection(d_model=4, dropout=0.0, norm_first=True, layer_norm_eps=1e-5)
    torch.testing.assert_close(pre.normalize_input(hidden), pre.norm(hidden))
    torch.testing.assert_close(pre.add(hidden, sublayer_output), hidden + sublayer_output)


def test_residual_dropout_acts_on_the_sublayer_output_only() -> None:
    residual = ResidualConnection(d_model=4, dropout=0.5, norm_first=True, layer_norm_eps=1e-5).train()
    hidden = torch.randn(100, 4)
    # With a zero sub-layer output, dropout has nothing to drop: the residual passes through unchanged.
    torch.testing.assert_close(residual.add(hidden, torch.zeros(100, 4)), hidden)
