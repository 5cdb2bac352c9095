"""Synthetic inputs for the throughput benchmarks: random token ids of fixed length and a real tokenizer.

Throughput does not depend on what the tokens mean, only on the shapes, so random ids of one fixed length
make every system do exactly the same work with no padding. The tokenizer is a real SentencePiece model of
the right size (trained in about a second on random words), because the trainer and the exporters read its
size, fingerprint and pieces.
"""

import random
from pathlib import Path

import torch
from torch import Tensor

from transformer.data.pipeline.batch import Batch, collate
from transformer.data.pipeline.dataset import EncodedCorpus, FilterReport
from transformer.data.pipeline.special_tokens import EOS_ID
from transformer.data.pipeline.tokenizer import Tokenizer

#: Ids below this are special (pad, bos, eos, unk): random text never uses them.
FIRST_ORDINARY_ID = 4
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def train_synthetic_tokenizer(vocab_size: int, path: Path, seed: int = 0) -> Tokenizer:
    """Train a SentencePiece BPE model of exactly ``vocab_size`` pieces on random words.

    Parameters
    ----------
    vocab_size : int
        Pieces, the four special ones included.
    path : Path
        Where the model file is written.
    seed : int
        Seed of the random words.

    Returns
    -------
    Tokenizer
        The project's tokenizer class, so it round-trips through checkpoints like a real one.

    Notes
    -----
    Random words of 3-9 letters give BPE enough distinct merges for a 32k vocabulary.
    """
    rng = random.Random(seed)
    num_words = max(2 * vocab_size, 200)
    words = ["".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 9))) for _ in range(num_words)]
    sentences = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(max(num_words // 2, 100))]
    return Tokenizer.train(sentences, path, vocab_size)


def random_ids(generator: torch.Generator, num_sentences: int, length: int, vocab_size: int) -> Tensor:
    """Random ordinary token ids: int64 tensor of shape (num_sentences, length)."""
    return torch.randint(FIRST_ORDINARY_ID, vocab_size, (num_sentences, length), generator=generator)


def synthetic_corpus(num_sentences: int, length: int, vocab_size: int, seed: int = 0) -> EncodedCorpus:
    """Sentence pairs of random ids whose collated tensors are exactly ``length`` wide on both sides.

    Parameters
    ----------
    num_sentences : int
        Pairs.
    length : int
        Source length with its EOS, and target length with BOS (input) or EOS (output).
    vocab_size : int
        Vocabulary to draw ids from.
    seed : int
        Seed of the ids.

    Returns
    -------
    EncodedCorpus
        ``length - 1`` random ids per side; the source gets its EOS here, the target gets BOS/EOS at collation.

    Notes
    -----
    A batch of n pairs then holds exactly ``n * length`` target tokens and no padding.
    """
    generator = torch.Generator().manual_seed(seed)
    sources = random_ids(generator, num_sentences, length - 1, vocab_size).tolist()
    targets = random_ids(generator, num_sentences, length - 1, vocab_size).tolist()
    return EncodedCorpus(
        source=[[*ids, EOS_ID] for ids in sources],
        target=targets,
        report=FilterReport(kept=num_sentences, dropped_empty=0, dropped_too_long=0),
    )


def fixed_batches(corpus: EncodedCorpus, sentences_per_batch: int) -> list[Batch]:
    """Cut a corpus into consecutive batches of ``sentences_per_batch`` pairs (the last partial one dropped)."""
    return [
        collate(range(start, start + sentences_per_batch), corpus)
        for start in range(0, len(corpus) - sentences_per_batch + 1, sentences_per_batch)
    ]
