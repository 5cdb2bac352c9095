"""Simultaneous translation by test-time wait-k (Ma et al., 2019): write while the source is still arriving.

A full-sentence model is made to translate a source that arrives token by token: target token t is written
after reading ``g(t) = min(k + t - 1, |x|)`` source tokens, so the translation starts k tokens behind the
source and keeps that lag. Each step encodes the source prefix read so far (the encoder attends in both
directions, so a longer prefix changes every earlier encoder state) and runs the decoder over the target
prefix against it; the next token is the argmax (greedy), EOS forbidden until the whole source is read
(the model was trained on whole sentences: a prefix looks like a short sentence to it).

The latency measure is Average Lagging (Ma et al., 2019, section 4.1), in source tokens:
``AL = (1 / tau) * sum_{t=1..tau} (g(t) - (t - 1) / r)`` with ``r = |y| / |x|`` and ``tau`` the first target
index at which the whole source has been read. Full-sentence decoding reads everything before writing:
``AL = |x|``. Lengths here exclude EOS on both sides.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transformer.data.pipeline.batch import pad_sequences
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.inference_models import DEFAULT_MAX_INPUT_TOKENS
from transformer.decoding.step_model import TransformerStepModel, inference_context
from transformer.model.masks import build_padding_mask
from transformer.model.transformer import Transformer


@dataclass(frozen=True)
class SimultaneousTranslation:
    """One sentence translated by wait-k.

    Parameters
    ----------
    tokens : list of int
        The target tokens written, without EOS.
    delays : list of int
        ``g(t)`` for each written token (EOS included when it was written): source tokens read before it.
    source_length : int
        ``|x|``, the source tokens without EOS.

    Notes
    -----
    ``delays`` has one entry more than ``tokens`` when the sentence ended with EOS, none more when it stopped
    at its length limit.
    """

    tokens: list[int]
    delays: list[int]
    source_length: int

    @property
    def average_lagging(self) -> float:
        """Average Lagging of this translation, in source tokens (the module docstring's formula).

        Returns
        -------
        float
            AL; 0.0 for an empty source.

        Notes
        -----
        ``r`` uses the written tokens without EOS, as Ma et al. count ``|y|``.
        """
        return average_lagging(self.delays, self.source_length, len(self.tokens))


def average_lagging(delays: Sequence[int], source_length: int, target_length: int) -> float:
    """Compute Average Lagging (Ma et al., 2019) from each target token's delay.

    Parameters
    ----------
    delays : sequence of int
        ``g(t)`` for t = 1, 2, ...: source tokens read before writing target token t.
    source_length : int
        ``|x|``.
    target_length : int
        ``|y|`` (the ratio ``r = |y| / |x|`` uses it).

    Returns
    -------
    float
        AL in source tokens; 0.0 when there is no source or no delay.

    Notes
    -----
    The sum stops at ``tau``, the first t with ``g(t) = |x|``: after the whole source is read, writing faster
    than the reference rate would otherwise pull the average below zero lag.
    """
    if source_length == 0 or not delays:
        return 0.0
    rate = max(target_length, 1) / source_length
    tau = next((index + 1 for index, delay in enumerate(delays) if delay >= source_length), len(delays))
    return sum(delays[t] - t / rate for t in range(tau)) / tau


def wait_k_translate(
    model: Transformer,
    sources: Sequence[Sequence[int]],
    wait: int,
    max_length_offset: int = 50,
) -> list[SimultaneousTranslation]:
    """Translate sources with test-time wait-k, greedy, every sentence of the batch at once.

    Parameters
    ----------
    model : Transformer
        A full-sentence model (switched to eval mode for the call, its flags restored after).
    sources : sequence of sequence of int
        Source ids, each ending with EOS.
    wait : int
        k: source tokens read before the first target token; a k at least the source's length is
        full-sentence greedy decoding.
    max_length_offset : int
        Longest output = source length (EOS included) + this, as :class:`~transformer.config.decode.DecodeConfig`.

    Returns
    -------
    list of SimultaneousTranslation
        Per source, in order.

    Raises
    ------
    ValueError
        For ``wait < 1`` or a source without tokens.

    Notes
    -----
    Without an incremental cache: every step re-encodes each source prefix and re-decodes each target
    prefix, since a longer source prefix changes every encoder state (quadratic in length; fine for
    evaluation, as in Ma et al.'s test-time wait-k). PAD and BOS are never written.
    """
    if wait < 1:
        raise ValueError(f"wait-k needs k >= 1, got {wait}")
    if any(len(source) == 0 for source in sources):
        raise ValueError("wait-k: every source needs at least its EOS")
    config = model.config
    words = [list(source[:-1]) if source[-1] == config.eos_id else list(source) for source in sources]
    limits = [len(source) + max_length_offset for source in sources]
    written: list[list[int]] = [[] for _ in sources]
    delays: list[list[int]] = [[] for _ in sources]
    running = list(range(len(sources)))
    with inference_context(TransformerStepModel(model)):
        while running:
            read = [min(wait + len(written[index]), len(words[index])) for index in running]
            chosen = next_tokens(
                model,
                [words[index][:count] for index, count in zip(running, read, strict=True)],
                [count == len(words[index]) for index, count in zip(running, read, strict=True)],
                [written[index] for index in running],
            )
            still = []
            for index, token, count in zip(running, chosen, read, strict=True):
                delays[index].append(count)
                if token == config.eos_id:
                    continue
                written[index].append(token)
                if len(written[index]) < limits[index]:
                    still.append(index)
            running = still
    return [
        SimultaneousTranslation(tokens, delay, len(source_words))
        for tokens, delay, source_words in zip(written, delays, words, strict=True)
    ]


def next_tokens(
    model: Transformer,
    read: Sequence[Sequence[int]],
    complete: Sequence[bool],
    written: Sequence[Sequence[int]],
) -> list[int]:
    """Choose each row's next target token from the source tokens read so far (one wait-k step).

    Parameters
    ----------
    model : Transformer
        The model, in eval mode under ``torch.inference_mode``.
    read : sequence of sequence of int
        Per row, the source tokens read (no EOS).
    complete : sequence of bool
        Per row, whether ``read`` is the whole source: EOS is appended to it, and only then may EOS be chosen.
    written : sequence of sequence of int
        Per row, the target tokens written so far (no start token).

    Returns
    -------
    list of int
        The argmax token per row; PAD and BOS never.

    Notes
    -----
    The source prefix is encoded afresh and the decoder run over the whole target prefix: a longer source
    prefix changes every encoder state, so nothing can be cached between steps.
    """
    config = model.config
    device = next(model.parameters()).device
    sources = [
        [*tokens, config.eos_id] if whole else list(tokens)
        for tokens, whole in zip(read, complete, strict=True)
    ]
    src_tokens = pad_sequences(sources, config.pad_id).to(device)
    memory = model.encode(src_tokens)
    targets = pad_sequences([[config.start_id, *tokens] for tokens in written], config.pad_id).to(device)
    logits = model.decode(targets, memory, build_padding_mask(src_tokens, config.pad_id))
    rows = torch.arange(len(written), device=device)
    last = logits[
        rows, torch.tensor([len(tokens) for tokens in written], device=device)
    ].float()  # (rows, vocab)
    last[:, config.pad_id] = float("-inf")
    if config.start_id != config.eos_id:
        last[:, config.start_id] = float("-inf")
    partial = torch.tensor([not whole for whole in complete], device=device)
    last[partial, config.eos_id] = float("-inf")  # a prefix is not a sentence
    return [int(token) for token in last.argmax(dim=-1).tolist()]


class WaitKSession:
    """Translate one source that arrives in pieces: feed words as they come, get the target words written.

    Parameters
    ----------
    model : Transformer
        A full-sentence model.
    tokenizer : TextTokenizer
        Its tokenizer.
    wait : int
        k, in source tokens.
    max_length_offset : int
        Longest output = source length (EOS included) + this.

    Notes
    -----
    Each :meth:`feed` adds whole words (the text so far is encoded again, and SentencePiece segments each
    whitespace-separated word on its own, so the tokens of words already read do not change); the target
    tokens the policy allows are written at once, each from exactly the first ``k + t - 1`` source tokens
    (and only while more are known: with exactly that many, the source might be complete, which only
    :meth:`finish` says), so feeding a sentence word by word writes what :func:`wait_k_translate` writes
    for it whole (tested). :meth:`finish` reads the end of the source and writes the rest.
    """

    def __init__(
        self, model: Transformer, tokenizer: TextTokenizer, wait: int, max_length_offset: int = 50
    ) -> None:
        if wait < 1:
            raise ValueError(f"wait-k needs k >= 1, got {wait}")
        self.model = model
        self.tokenizer = tokenizer
        self.wait = wait
        self.max_length_offset = max_length_offset
        self.source_text = ""
        self.source: list[int] = []
        self.written: list[int] = []
        self.delays: list[int] = []
        self.finished = False
        self.ended = False  # EOS written

    def feed(self, words: str) -> str:
        """Read more source words; write the target tokens that become due.

        Parameters
        ----------
        words : str
            Whole words to append to the source (separated from what came before by a space).

        Returns
        -------
        str
            The target text written by this call (detokenised; may be empty).

        Raises
        ------
        ValueError
            After :meth:`finish`: the source is complete.

        Notes
        -----
        Feed whole words: a word split over two calls would be segmented as two words.
        """
        if self.finished:
            raise ValueError("wait-k session: the source was finished; start a new session")
        self.source_text = f"{self.source_text} {words}".strip()
        self.source = self.tokenizer.encode(self.source_text)[: DEFAULT_MAX_INPUT_TOKENS - 1]
        return self._write(complete=False)

    def finish(self) -> str:
        """Mark the source complete and write the rest of the translation.

        Returns
        -------
        str
            The target text written by this call.

        Notes
        -----
        After it, :attr:`translation` holds the whole translation and :attr:`average_lagging` its latency.
        """
        self.finished = True
        return self._write(complete=True)

    @property
    def translation(self) -> str:
        """The target text written so far.

        Returns
        -------
        str
            Detokenised.

        Notes
        -----
        Grows with each call; complete after :meth:`finish`.
        """
        return self.tokenizer.decode(self.written).strip()

    @property
    def average_lagging(self) -> float:
        """Average Lagging so far, in source tokens (:func:`average_lagging`).

        Returns
        -------
        float
            AL over the tokens written.

        Notes
        -----
        Meaningful once finished: before, ``|x|`` is the source read so far.
        """
        return average_lagging(self.delays, len(self.source), len(self.written))

    def _write(self, complete: bool) -> str:
        """Write every token the policy allows now; return their text.

        Before :meth:`finish`, token t is written only while more than ``k + t - 1`` source tokens are known:
        with exactly that many the source might be complete, and the whole source is read with its EOS.
        """
        before = self.translation
        with inference_context(TransformerStepModel(self.model)):
            while not self.ended and len(self.written) < len(self.source) + 1 + self.max_length_offset:
                due = self.wait + len(self.written)
                if not complete and due >= len(self.source):
                    break
                count = min(due, len(self.source))
                whole = complete and count == len(self.source)
                token = next_tokens(self.model, [self.source[:count]], [whole], [self.written])[0]
                self.delays.append(count)
                if token == self.model.config.eos_id:
                    self.ended = True
                else:
                    self.written.append(token)
        text = self.translation
        return text[len(before) :] if text.startswith(before) else text


def translate_text_wait_k(
    model: Transformer, tokenizer: TextTokenizer, sentences: Sequence[str], wait: int, batch_size: int = 64
) -> tuple[list[str], float]:
    """Translate raw sentences with wait-k, in batches of similar length: ``translate --wait-k K``.

    Parameters
    ----------
    model : Transformer
        A full-sentence model.
    tokenizer : TextTokenizer
        Its tokenizer.
    sentences : sequence of str
        Raw source sentences; blank ones translate to "".
    wait : int
        k, in source tokens.
    batch_size : int
        Sentences decoded together.

    Returns
    -------
    tuple
        The translations in input order, and the mean Average Lagging over the non-blank sentences (0.0
        when there are none).

    Notes
    -----
    Sources are cut at :data:`~transformer.decoding.inference_models.DEFAULT_MAX_INPUT_TOKENS` tokens, EOS
    included, as the translator cuts them.
    """
    encoded = [
        [*tokenizer.encode(sentence.strip())[: DEFAULT_MAX_INPUT_TOKENS - 1], model.config.eos_id]
        if sentence.strip()
        else []
        for sentence in sentences
    ]
    kept = [index for index, ids in enumerate(encoded) if ids]
    found = wait_k_translate_batched(model, [encoded[index] for index in kept], wait, batch_size)
    texts = [""] * len(sentences)
    for index, item in zip(kept, found, strict=True):
        texts[index] = tokenizer.decode(item.tokens).strip()
    return texts, sum(item.average_lagging for item in found) / len(found) if found else 0.0


def wait_k_translate_batched(
    model: Transformer, sources: Sequence[Sequence[int]], wait: int, batch_size: int = 64
) -> list[SimultaneousTranslation]:
    """Run :func:`wait_k_translate` over batches of sources of similar length; results in input order.

    Parameters
    ----------
    model : Transformer
        A full-sentence model.
    sources : sequence of sequence of int
        Source ids, each ending with EOS.
    wait : int
        k, in source tokens.
    batch_size : int
        Sentences decoded together.

    Returns
    -------
    list of SimultaneousTranslation
        Per source, in input order.

    Notes
    -----
    Sorting by length keeps each batch's padding small, as the translator's batches do; a sentence's result
    does not depend on its batch (each row reads only its own source prefix).
    """
    order = sorted(range(len(sources)), key=lambda index: len(sources[index]))
    results: dict[int, SimultaneousTranslation] = {}
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        results.update(zip(chunk, wait_k_translate(model, [sources[i] for i in chunk], wait), strict=True))
    return [results[index] for index in range(len(sources))]
