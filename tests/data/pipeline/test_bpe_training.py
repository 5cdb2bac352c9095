"""Sampling the BPE training sentences: uniform, reproducible, in stream order."""

from collections import Counter

from transformer.data.pipeline.bpe_training import sample_sentences


def test_sample_sentences_is_uniform_reproducible_and_in_stream_order() -> None:
    stream = ["", *[f"sentence {index}" for index in range(50)], "   "]
    sample, num_sentences = sample_sentences(stream, 5, seed=3)
    assert num_sentences == 50 and len(sample) == 5
    assert sample == sorted(sample, key=lambda sentence: int(sentence.split()[1]))
    assert sample_sentences(stream, 5, seed=3) == (sample, 50)
    assert sample_sentences(stream, 5, seed=4)[0] != sample
    assert sample_sentences(stream, 80, seed=3) == ([f"sentence {index}" for index in range(50)], 50)
    inclusions = Counter(
        sentence for seed in range(2000) for sentence in sample_sentences(stream, 5, seed)[0]
    )
    rates = [inclusions[f"sentence {index}"] / 2000 for index in range(50)]
    assert min(rates) > 0.07 and max(rates) < 0.13  # each sentence is kept with probability 5/50
