"""corpus_perplexity against the negative log-likelihood summed token by token with torch.log_softmax."""

import math

import pytest
import torch

from transformer import Transformer, TransformerConfig
from transformer.evaluation.perplexity import corpus_perplexity

SOURCE_WORDS = ["the", "a", "man", "dog", "sees", "runs", "big", "small", "red", "house"]
TARGET_WORDS = ["der", "ein", "mann", "hund", "sieht", "läuft", "groß", "klein", "rot", "haus"]
FIRST_ID = 5  # ids 0-3 are special (pad, bos, eos, unk); 4 is left unused
VOCAB_SIZE = FIRST_ID + len(SOURCE_WORDS) + len(TARGET_WORDS)

PAIRS = [
    ("the man sees a dog", "der mann sieht ein hund"),
    ("a dog runs", "ein hund läuft"),
    ("the big red house", "ein groß rot haus"),
    ("", "ein haus"),  # empty side: skipped
    ("small", "klein"),
    ("the small man sees the big dog a red house", "der klein mann sieht der groß hund ein rot haus"),
    ("a man runs", "der mann läuft läuft"),
]


class WordTokenizer:
    """One id per word, source and target words in separate id ranges, so a target encoded with the source
    vocabulary (or the reverse) scores different tokens."""

    vocab_size = VOCAB_SIZE

    def encode(self, text: str) -> list[int]:
        return [FIRST_ID + SOURCE_WORDS.index(word) for word in text.split() if word in SOURCE_WORDS]

    def encode_target(self, text: str) -> list[int]:
        return [FIRST_ID + len(SOURCE_WORDS) + TARGET_WORDS.index(word) for word in text.split()]

    def decode(self, ids: list[int]) -> str:
        return " ".join(TARGET_WORDS[i - FIRST_ID - len(SOURCE_WORDS)] for i in ids)

    def id_to_piece(self, token_id: int) -> str:
        return str(token_id)


def tiny_model(**overrides: object) -> Transformer:
    config = TransformerConfig(
        vocab_size=VOCAB_SIZE,
        d_model=16,
        d_ff=32,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.3,  # corpus_perplexity must switch it off
        **overrides,  # type: ignore[arg-type]
    )
    torch.manual_seed(0)
    return Transformer(config)


def hand_nll(model: Transformer, tokenizer: WordTokenizer) -> tuple[float, int, int]:
    """Summed NLL of every reference token and EOS, one unpadded sentence at a time."""
    config = model.config
    total, tokens, pairs = 0.0, 0, 0
    model.eval()
    with torch.no_grad():
        for source, target in PAIRS:
            source_ids, target_ids = tokenizer.encode(source), tokenizer.encode_target(target)
            if not source_ids or not target_ids:
                continue
            src = torch.tensor([source_ids + [config.eos_id]])
            tgt_input = torch.tensor([[config.start_id] + target_ids])
            expected = target_ids + [config.eos_id]
            log_probs = torch.log_softmax(model(src, tgt_input).double(), dim=-1)[0]
            for position, token in enumerate(expected):
                total -= float(log_probs[position, token])
            tokens += len(expected)
            pairs += 1
    return total, tokens, pairs


@pytest.mark.parametrize("decoder_start", [None, 0], ids=["bos_start", "marian_pad_start"])
def test_matches_log_softmax_token_by_token(decoder_start: int | None) -> None:
    model = tiny_model(decoder_start_id=decoder_start).train()
    tokenizer = WordTokenizer()
    result = corpus_perplexity(model, tokenizer, PAIRS)  # type: ignore[arg-type]
    assert model.training  # the caller's mode is restored
    total, tokens, pairs = hand_nll(model, tokenizer)
    assert (result.num_tokens, result.num_pairs) == (tokens, pairs) == (33, 6)
    assert result.nll_per_token == pytest.approx(total / tokens, rel=1e-5)
    assert result.perplexity == pytest.approx(math.exp(total / tokens), rel=1e-5)
    assert 1.5 < result.perplexity < VOCAB_SIZE * 10  # a real, non-degenerate value


def test_batching_does_not_change_the_value() -> None:
    model = tiny_model()
    tokenizer = WordTokenizer()
    # The longest pair is 11 tokens wide: 12 gives one pair per batch, 30 a few, 4096 one padded batch.
    results = [corpus_perplexity(model, tokenizer, PAIRS, max_tokens=budget) for budget in (12, 30, 4096)]  # type: ignore[arg-type]
    for result in results[1:]:
        assert result.num_tokens == results[0].num_tokens == 33
        assert result.num_pairs == results[0].num_pairs == 6
        assert result.nll_per_token == pytest.approx(results[0].nll_per_token, rel=1e-5)


def test_a_better_model_of_the_references_scores_lower() -> None:
    # Biasing the output towards the reference tokens must lower perplexity; biasing against them raise it.
    model = tiny_model(output_bias=True)
    tokenizer = WordTokenizer()
    baseline = corpus_perplexity(model, tokenizer, PAIRS).perplexity  # type: ignore[arg-type]
    used = sorted({token for _, target in PAIRS for token in tokenizer.encode_target(target)} | {2})
    assert model.output_bias is not None
    with torch.no_grad():
        model.output_bias[used] += 3.0
    better = corpus_perplexity(model, tokenizer, PAIRS).perplexity  # type: ignore[arg-type]
    with torch.no_grad():
        model.output_bias[used] -= 6.0
    worse = corpus_perplexity(model, tokenizer, PAIRS).perplexity  # type: ignore[arg-type]
    assert better < baseline / 2 and worse > baseline * 2
