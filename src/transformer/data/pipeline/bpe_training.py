"""Learn the joint BPE vocabulary with SentencePiece: sample the sentences, run the trainer in memory.

Paper section 5.1: "byte-pair encoding, which has a shared source-target vocabulary of about 37000 tokens". The
trainer sees sentences of both languages mixed, drawn reproducibly (:func:`sample_sentences`), and returns the
serialized model (:func:`train_model_bytes`); :meth:`transformer.data.pipeline.tokenizer.Tokenizer.train`
checks the options, calls both and writes the file.
"""

import io
import math
import random
import re
from collections.abc import Iterable, Sequence

import sentencepiece

from transformer.data.pipeline.special_tokens import BOS_ID, EOS_ID, PAD_ID, SPECIAL_PIECES, UNK_ID

# SentencePiece's BPE merges are identical for any thread count (measured on Multi30k with 1, 2 and
# 16 threads), but the model file records num_threads in its trainer spec. A fixed value keeps the
# serialized bytes, and so the fingerprint, independent of the machine that trained the model.
TRAINING_THREADS = 8
# Seeds our sampling of ``seed_sentences`` sentences from a larger corpus. SentencePiece's own sampling
# (shuffle_input_sentence) ignores set_random_generator_seed in version 0.2 and so differs from process
# to process (measured), so we sample in Python and hand SentencePiece a fixed list.
SAMPLING_SEED = 0

_VOCABULARY_TOO_LARGE = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")


def sample_sentences(texts: Iterable[str], max_sentences: int, seed: int) -> tuple[list[str], int]:
    """Draw a uniform random sample of the non-empty sentences of a stream, reproducibly.

    Parameters
    ----------
    texts : Iterable[str]
        Sentences; each is stripped and empty ones are skipped.
    max_sentences : int
        Sample size; a stream with no more sentences than this is returned whole.
    seed : int
        Seed of the sampling.

    Returns
    -------
    sample : list[str]
        The sampled sentences in stream order.
    num_sentences : int
        Non-empty sentences in the stream.

    Notes
    -----
    Reservoir sampling, Algorithm L (Li, 1994): one pass, memory for ``max_sentences`` sentences,
    and a random draw only per replacement, not per sentence.
    """
    rng = random.Random(seed)
    reservoir: list[tuple[int, str]] = []
    next_replacement = max_sentences
    weight = 1.0
    num_sentences = 0
    for text in texts:
        sentence = text.strip()
        if not sentence:
            continue
        if len(reservoir) < max_sentences:
            reservoir.append((num_sentences, sentence))
            if len(reservoir) == max_sentences:
                weight, next_replacement = _next_skip(rng, weight, max_sentences, num_sentences)
        elif num_sentences == next_replacement:
            reservoir[rng.randrange(max_sentences)] = (num_sentences, sentence)
            weight, next_replacement = _next_skip(rng, weight, max_sentences, num_sentences)
        num_sentences += 1
    reservoir.sort()
    return [sentence for _, sentence in reservoir], num_sentences


def _next_skip(rng: random.Random, weight: float, sample_size: int, position: int) -> tuple[float, int]:
    # Algorithm L: shrink the acceptance weight, then jump a geometric number of sentences.
    # 1 - random() lies in (0, 1]; the clamps keep the logarithms and the skip finite for extreme draws.
    weight *= math.exp(math.log(1.0 - rng.random()) / sample_size)
    weight = min(max(weight, 1e-300), 1.0 - 1e-16)
    skip = min(math.log(1.0 - rng.random()) / math.log1p(-weight), 2.0**62)
    return weight, position + math.floor(skip) + 1


def train_model_bytes(
    sentences: list[str], vocab_size: int, character_coverage: float, user_symbols: Sequence[str] = ()
) -> bytes:
    """Run the SentencePiece BPE trainer in memory and return the serialized model.

    Parameters
    ----------
    sentences : list[str]
        The training sentences (already sampled).
    vocab_size : int
        Number of pieces, special pieces included.
    character_coverage : float
        Fraction of characters covered by the vocabulary; the rest map to ``<unk>``.
    user_symbols : sequence of str
        Pieces never split (SentencePiece's ``user_defined_symbols``).

    Returns
    -------
    bytes
        The serialized ModelProto.

    Notes
    -----
    ``hard_vocab_limit`` stays on: a request the corpus cannot fill is an error, not a silently
    smaller vocabulary. ``minloglevel=2`` keeps the trainer quiet on stderr.
    """
    model_writer = io.BytesIO()
    try:
        sentencepiece.SentencePieceTrainer.Train(
            sentence_iterator=iter(sentences),
            model_writer=model_writer,
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            input_sentence_size=0,  # all of them: the sampling is done
            shuffle_input_sentence=False,
            pad_id=PAD_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            unk_id=UNK_ID,
            pad_piece=SPECIAL_PIECES[PAD_ID],
            bos_piece=SPECIAL_PIECES[BOS_ID],
            eos_piece=SPECIAL_PIECES[EOS_ID],
            unk_piece=SPECIAL_PIECES[UNK_ID],
            num_threads=TRAINING_THREADS,
            minloglevel=2,
            user_defined_symbols=list(user_symbols),  # none: the same model as before the option
        )
    except RuntimeError as error:
        raise _explain_training_failure(error, len(sentences), vocab_size) from None
    return model_writer.getvalue()


def _explain_training_failure(error: RuntimeError, num_sentences: int, vocab_size: int) -> ValueError:
    """Turn a SentencePiece training failure into a one-line ValueError.

    Parameters
    ----------
    error : RuntimeError
        What SentencePiece raised.
    num_sentences : int
        Sentences given to the trainer.
    vocab_size : int
        The requested vocabulary size.

    Returns
    -------
    ValueError
        The error to raise.

    Notes
    -----
    SentencePiece reports an empty corpus as a failed internal check, so the count decides.
    """
    if num_sentences == 0:
        return ValueError("Tokenizer.train: the corpus has no non-empty sentences to train on")
    too_large = _VOCABULARY_TOO_LARGE.search(str(error))
    if too_large:
        return ValueError(
            f"Tokenizer.train: vocab_size={vocab_size} is too large for these {num_sentences} "
            f"training sentences; SentencePiece allows at most {too_large.group(2)}"
        )
    return ValueError(f"Tokenizer.train: SentencePiece failed: {error}")
