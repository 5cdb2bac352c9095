"""A model with a learned position table of M rows: searches stop at M tokens, scoring skips longer pairs."""

import torch

from transformer import DecodeConfig, Transformer, TransformerConfig
from transformer.decoding.beam_search import search
from transformer.decoding.step_model import TransformerStepModel
from transformer.evaluation.perplexity import corpus_perplexity


def learned_model(max_positions: int) -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(
        vocab_size=20, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
        positional_encoding="learned", max_positions=max_positions,
    )  # fmt: skip
    model = Transformer(config).eval()
    return model


def test_searches_stop_at_the_position_table_instead_of_failing() -> None:
    model = learned_model(max_positions=8)
    src = torch.tensor([[5, 6, 7, 8, 9, 2]])  # 6 tokens: the paper's limit would allow 56 outputs
    assert TransformerStepModel(model).max_output_length == 8
    for beam_size in (1, 3):
        [hypotheses] = search(model, src, DecodeConfig(beam_size=beam_size, max_length_offset=50, nbest=1))
        assert 1 <= len(hypotheses[0].tokens) <= 8
    sinusoidal = Transformer(TransformerConfig(vocab_size=20, d_model=16, d_ff=32, num_heads=2,
                                                num_encoder_layers=1, num_decoder_layers=1))  # fmt: skip
    assert TransformerStepModel(sinusoidal).max_output_length is None


def test_perplexity_leaves_out_pairs_the_table_cannot_encode() -> None:
    model = learned_model(max_positions=4)

    class WordIds:
        vocab_size = 20

        def encode(self, text: str) -> list[int]:
            return [4 + len(word) % 10 for word in text.split()]

        encode_target = encode

    pairs = [("a b", "c d e"), ("a b c d e f", "a"), ("a", "b c d e f g")]  # only the first fits in 4
    result = corpus_perplexity(model, WordIds(), pairs)  # type: ignore[arg-type]
    assert result.num_pairs == 1 and result.num_tokens == 4  # 3 target tokens + EOS
