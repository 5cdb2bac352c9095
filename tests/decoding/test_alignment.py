"""Word alignments: subwords merged to words, EOS and space-only pieces left out, layers checked."""

import pytest
import torch

from tests.decoding.test_transformer_decoding import padded_sources
from transformer import Transformer, TransformerConfig
from transformer.baselines.rnn import RNNEncoderDecoder
from transformer.baselines.rnn_config import RNNConfig
from transformer.decoding.alignment import (
    check_alignment_layer,
    cross_attention,
    format_pharaoh,
    hard_word_alignment,
    word_indices,
)


def test_word_indices_follow_the_text_words() -> None:
    assert word_indices(["▁Ein", "▁Hund", "e", "▁läuft", "."]) == [0, 1, 1, 2, 2]
    # A lone marker before a marked piece is a double space; before an unmarked one, the word's start.
    assert word_indices(["▁A", "▁", "▁B", "▁", "C"]) == [0, None, 1, 2, 2]
    assert word_indices(["Hund", "▁bellt"]) == [0, 1]
    assert word_indices([]) == []


def test_each_target_subword_takes_its_most_attended_source_word() -> None:
    attention = torch.tensor(
        [
            # src: ▁Der  ▁Hund  e  ▁bellt  (EOS column cut off by the caller's lengths)
            [0.7, 0.1, 0.1, 0.1],  # ▁The -> Der
            [0.1, 0.2, 0.6, 0.1],  # ▁dog -> Hund (via its second piece)
            [0.0, 0.1, 0.0, 0.9],  # ▁bark -> bellt
            [0.4, 0.0, 0.0, 0.6],  # s -> bellt
        ]
    )
    pairs = hard_word_alignment(attention, [0, 1, 1, 2], [0, 1, 2, 2])
    assert pairs == [(0, 0), (1, 1), (2, 2)]
    assert format_pharaoh(pairs) == "0-0 1-1 2-2"
    # A source piece of no word is never chosen, whatever its weight; a target piece of none aligns nothing.
    assert hard_word_alignment(attention, [0, None, 1, 2], [0, None, 2, 2]) == [(0, 0), (2, 2)]
    assert hard_word_alignment(attention, [], [0]) == [] and hard_word_alignment(attention, [0], []) == []


def test_cross_attention_is_the_chosen_layers_mean_over_heads(tiny_config: TransformerConfig) -> None:
    model = Transformer(tiny_config).eval()
    src_tokens = padded_sources(tiny_config, [5, 3], torch.Generator().manual_seed(0))
    outputs = [[7, 8, 9], [10]]
    attention = cross_attention(model, src_tokens, outputs, layer=-1)
    assert attention.shape == (2, 3, 5)
    decoder_input = torch.tensor(
        [[tiny_config.start_id, 7, 8], [tiny_config.start_id, tiny_config.pad_id, 0]]
    )
    decoder_input[1, 2] = tiny_config.pad_id
    with torch.inference_mode():
        _, weights = model.forward_with_attention(src_tokens, decoder_input)
    torch.testing.assert_close(attention, weights.cross[1].mean(dim=1))
    torch.testing.assert_close(cross_attention(model, src_tokens, outputs, 0), weights.cross[0].mean(dim=1))
    assert float(attention[1, 0, 3:].abs().sum()) == 0.0  # source padding gets no attention


def test_alignment_layers_out_of_range_are_refused(tiny_config: TransformerConfig) -> None:
    model = Transformer(tiny_config)
    assert check_alignment_layer(model, -1) == 1 and check_alignment_layer(model, -2) == 0
    with pytest.raises(ValueError, match="alignment layer 2 is out of range: the decoder has 2 attention"):
        check_alignment_layer(model, 2)


def test_the_recurrent_baseline_aligns_with_its_one_attention() -> None:
    config = RNNConfig(vocab_size=30, embedding_dim=16, hidden_size=16)
    model = RNNEncoderDecoder(config).eval()
    src_tokens = torch.tensor([[5, 6, 7, config.eos_id]])
    attention = cross_attention(model, src_tokens, [[8, 9]], layer=-1)
    with torch.inference_mode():
        _, expected = model.forward_with_attention(src_tokens, torch.tensor([[config.start_id, 8]]))
    torch.testing.assert_close(attention, expected)
    with pytest.raises(ValueError, match="the decoder has 1 attention layer"):
        check_alignment_layer(model, 1)
