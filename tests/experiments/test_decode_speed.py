"""Timed translation: sentences and output tokens counted, threads set for the timing and restored."""

import pytest
import torch

from transformer.config.decode import DecodeConfig
from transformer.decoding.translator import Translator
from transformer.experiments.rnn_baseline.decode_speed import measure_decode_speed
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer


class CharacterTokenizer:
    """One piece per character (ids from 4), enough for a translator on a random model."""

    vocab_size = 40

    def encode(self, text: str) -> list[int]:
        return [4 + ord(character) % 36 for character in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(ord("a") + token % 26) for token in ids)


def test_speed_counts_sentences_and_output_tokens_with_the_threads_asked_for() -> None:
    model = Transformer(TransformerConfig(vocab_size=40, d_model=16, d_ff=32, num_heads=2)).eval()
    search = DecodeConfig(beam_size=1, max_length=4, min_length=4)  # exactly 4 output tokens each
    translator = Translator(model, CharacterTokenizer(), search, device="cpu")  # type: ignore[arg-type]
    before = torch.get_num_threads()
    sources = ["a b", "c d e", "f", "g h i j"] * 3
    speed = measure_decode_speed(translator, sources, threads=1)
    assert (speed.sentences, speed.target_tokens, speed.threads) == (12, 48, 1)
    assert speed.seconds > 0 and torch.get_num_threads() == before
    assert speed.sentences_per_second == pytest.approx(12 / speed.seconds)
    assert speed.tokens_per_second == pytest.approx(4 * speed.sentences_per_second)
    with pytest.raises(ValueError, match="no sentences"):
        measure_decode_speed(translator, [], threads=1)
    with pytest.raises(ValueError, match="threads=0"):
        measure_decode_speed(translator, sources, threads=0)
