"""Translation speed: sentences and output tokens per second of a search over a fixed set of sentences."""

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transformer.decoding.translator import Translator

#: Sentences translated once, untimed, before the clock starts (allocator and kernel warm-up).
WARMUP_SENTENCES = 8


@dataclass(frozen=True)
class DecodeSpeed:
    """How fast one search translated a set of sentences.

    Parameters
    ----------
    sentences : int
        Sentences translated.
    target_tokens : int
        Output tokens of the best hypotheses, EOS excluded.
    seconds : float
        Wall-clock seconds of the timed translation (tokenizing, batching, searching and detokenizing).
    threads : int
        PyTorch CPU threads during the timing.

    Notes
    -----
    Output tokens depend on the model (a model that stops early writes fewer), so sentences per second is the
    figure that compares models on the same input; tokens per second says how fast each writes.
    """

    sentences: int
    target_tokens: int
    seconds: float
    threads: int

    @property
    def sentences_per_second(self) -> float:
        """Sentences translated per second.

        Returns
        -------
        float
            ``sentences / seconds``.

        Notes
        -----
        Infinite speeds cannot occur: the timing of a non-empty set is positive.
        """
        return self.sentences / max(self.seconds, 1e-9)

    @property
    def tokens_per_second(self) -> float:
        """Output tokens written per second.

        Returns
        -------
        float
            ``target_tokens / seconds``.

        Notes
        -----
        EOS is not counted: a sentence's output tokens are the tokens its translation holds
        (``Candidate.tokens``).
        """
        return self.target_tokens / max(self.seconds, 1e-9)


def measure_decode_speed(translator: Translator, sources: Sequence[str], threads: int) -> DecodeSpeed:
    """Time a translator over sentences, with a fixed number of CPU threads.

    Parameters
    ----------
    translator : Translator
        The model, its tokenizer and the search to time.
    sources : sequence of str
        Source sentences, e.g. the validation set.
    threads : int
        PyTorch CPU threads during the timing (restored afterwards).

    Returns
    -------
    DecodeSpeed
        Sentences, output tokens, seconds and threads.

    Raises
    ------
    ValueError
        For no sentences or threads below 1.

    Notes
    -----
    The first :data:`WARMUP_SENTENCES` sentences are translated once before the clock starts. Batching is the
    translator's (sentences of similar length together, ``max_tokens`` source tokens a batch), as in
    ``transformer translate``.
    """
    if not sources:
        raise ValueError("measure_decode_speed: no sentences to translate")
    if threads < 1:
        raise ValueError(f"measure_decode_speed: threads={threads} must be at least 1")
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        translator.translate_nbest(sources[:WARMUP_SENTENCES])
        started = time.perf_counter()
        results = translator.translate_nbest(sources)
        seconds = time.perf_counter() - started
    finally:
        torch.set_num_threads(previous)
    tokens = sum(len(candidates[0].tokens) for candidates in results if candidates)
    return DecodeSpeed(len(sources), tokens, seconds, threads)
