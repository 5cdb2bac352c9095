import pytest
import torch

from tests.interop.marian_fixtures import randomize_
from transformer.checkpoint.weights import load_model_tensors, model_tensors
from transformer.interop.marian_weights import (
    interleaved_to_concatenated_order,
    permute_residual_basis,
    residual_axes,
)
from transformer.model.config import TransformerConfig
from transformer.model.positional_encoding import sinusoidal_table
from transformer.model.transformer import Transformer


def test_the_permutation_maps_interleaved_sinusoids_to_concatenated_ones() -> None:
    order = interleaved_to_concatenated_order(10)
    assert order.tolist() == [0, 2, 4, 6, 8, 1, 3, 5, 7, 9]
    interleaved = sinusoidal_table(50, 10, "interleaved")
    assert torch.equal(interleaved[:, order], sinusoidal_table(50, 10, "concatenated"))


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {
            "share_embeddings": False,
            "tie_output_projection": False,
            "output_bias": True,
            "activation": "silu",
        },
        {"norm_first": True, "scale_embeddings": False, "activation": "gelu"},
    ],
)
def test_permuting_the_residual_basis_keeps_the_logits(overrides: dict) -> None:
    config = TransformerConfig(
        vocab_size=40,
        d_model=16,
        d_ff=32,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        **overrides,
    )
    interleaved = Transformer(config).eval()
    randomize_(interleaved, seed=0)
    order = interleaved_to_concatenated_order(config.d_model)
    permuted = permute_residual_basis(model_tensors(interleaved), order)
    concatenated = Transformer(
        TransformerConfig.from_dict({**config.to_dict(), "sinusoidal_layout": "concatenated"})
    )
    load_model_tensors(concatenated.eval(), permuted, "permuted")
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    tgt = torch.tensor([[1, 11, 12, 13], [1, 14, 15, 0]])
    with torch.no_grad():
        expected, actual = interleaved(src, tgt), concatenated(src, tgt)
    assert (actual - expected).abs().max().item() < 1e-4
    assert not torch.equal(
        permuted["encoder.layers.0.feed_forward.linear_out.weight"],
        model_tensors(interleaved)["encoder.layers.0.feed_forward.linear_out.weight"],
    )


def test_residual_axes_refuses_unknown_tensors() -> None:
    assert residual_axes("decoder.layers.3.cross_attention.k_proj.weight") == (1,)
    assert residual_axes("encoder.layers.0.feed_forward.linear_out.bias") == (0,)
    assert residual_axes("encoder.layers.0.self_attention.q_proj.bias") == ()
    with pytest.raises(ValueError, match=r"'encoder\.gate\.weight'"):
        residual_axes("encoder.gate.weight")
