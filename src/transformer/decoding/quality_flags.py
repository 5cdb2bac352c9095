"""Flags on translations a user should not trust blindly: omissions, hallucinations and loops, with evidence.

Each output is teacher-forced through the model twice, after the search (as alignments are):

- with its source, for the cross-attention (heads and decoder layers averaged) and each token's
  log-probability ``log p(y_t | x, y_<t)``;
- with an empty source (EOS alone), for ``log p(y_t | y_<t)``: what the decoder would say with nothing to
  translate.

From these, three flags (:class:`QualityFlag`), each with the span that is its evidence:

- ``omission``: a run of source words (those with a letter or digit) that the output hardly attends to: each
  word's *coverage*, the attention all output tokens give its pieces, is below
  ``FlagThresholds.uncovered_below``, for at least ``omission_words`` words in a row. Evidence: that source
  span.
- ``hallucination``: an output the source does not explain. A token's *source gain* is
  ``log p(y_t | x, y_<t) - log p(y_t | y_<t)``; the output is flagged when its mean gain is below
  ``hallucination_below``. Evidence: the longest run of target words whose gain is below it. The gain, not the
  probability alone, so that an unusual but faithful output is not flagged for being unlikely.
- ``repetition``: a loop, the same run of words repeated back to back; flagged when the copies after the first
  add ``repetition_words`` words or more ("sehr sehr" adds one). Evidence: the repeated target span.

Spans are half-open ``(start, end)`` word indices counted as Pharaoh alignments count them (whitespace words,
from 0). The default thresholds were chosen on one half of a committed test built from the Multi30k validation
set and measured on the other (`python -m benchmarks.quality_flags`; BENCHMARKS.md section 10): they are a
starting point for a model like the README recipe's; measure your own model with the same command. On that
test the gain flagged 1.2% of the references (faithful outputs the model did not choose) as hallucinations
where the probability alone, at the threshold that caught as many, flagged 7.5%.
"""

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer.architectures import SequenceModel
from transformer.data.pipeline.batch import pad_sequences
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.alignment import WORD_START, word_indices
from transformer.decoding.candidate import Candidate, QualityFlag
from transformer.model.transformer import Transformer

#: The flags, in the order a sentence's flags are listed.
FLAG_KINDS = ("omission", "hallucination", "repetition")
#: Outputs per forced pass: a pass holds (rows, length, vocabulary) float32 logits twice, so a request's
#: hundreds of candidates are flagged in slices of this many.
FORCED_ROWS = 64


@dataclass(frozen=True)
class FlagThresholds:
    """Where each flag fires.

    Parameters
    ----------
    uncovered_below : float
        A source word whose coverage (attention received, summed over the output's tokens) is below this
        is uncovered; in (0, 1].
    omission_words : int
        Uncovered source words in a row that make an omission; at least 1.
    hallucination_below : float
        An output whose mean source gain (nats per token) is below this is a hallucination.
    repetition_words : int
        Words that repeated copies must add to make a loop; at least 1.

    Notes
    -----
    The defaults come from `python -m benchmarks.quality_flags` on the README recipe's Multi30k model: on one
    half of its test, the thresholds finding the most faults while flagging at most 5% of the model's own
    translations; on the other half they found 66% of the omissions at precision 0.93, 99% of the
    hallucinations at 1.00 and every loop at 1.00 (experiments/benchmarks/2026-12-04-quality-flags-multi30k.md).
    Raising a threshold of words or lowering ``hallucination_below`` flags less and more surely.
    """

    uncovered_below: float = 0.5
    omission_words: int = 3
    hallucination_below: float = 2.5
    repetition_words: int = 2

    def __post_init__(self) -> None:
        if not 0 < self.uncovered_below <= 1:
            raise ValueError(f"uncovered_below must be in (0, 1], not {self.uncovered_below}")
        if not math.isfinite(self.hallucination_below):
            raise ValueError(f"hallucination_below must be a finite number, not {self.hallucination_below}")
        for name in ("omission_words", "repetition_words"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")


@dataclass(frozen=True)
class SentenceSignals:
    """What the forced passes measured on one output, per word.

    Parameters
    ----------
    source_words : tuple of str
        The source's words (SentencePiece pieces joined), in order.
    source_coverage : tuple of float
        Per source word, the attention its pieces received summed over the output's tokens.
    target_words : tuple of str
        The output's words.
    target_gain : tuple of float
        Per target word, the mean source gain of its tokens (nats).
    mean_gain : float
        The mean source gain over the output's tokens; 0.0 for an empty output.
    mean_log_prob : float
        The mean of ``log p(y_t | x, y_<t)`` over the output's tokens; 0.0 for an empty output.

    Notes
    -----
    Coverage averages the heads and decoder layers: single heads specialise (some park on the source EOS, a
    sink that is no word), so no one head's map is the alignment.
    """

    source_words: tuple[str, ...]
    source_coverage: tuple[float, ...]
    target_words: tuple[str, ...]
    target_gain: tuple[float, ...]
    mean_gain: float
    mean_log_prob: float


def _forced_logits_and_attention(
    model: SequenceModel, src_tokens: Tensor, tgt_tokens: Tensor
) -> tuple[Tensor, Tensor]:
    """Teacher-force a batch; return float32 logits and the cross-attention averaged over layers and heads.

    Returns logits ``(rows, tgt_len, vocab)`` and attention ``(rows, tgt_len, src_len)``.
    """
    if isinstance(model, Transformer):
        logits, weights = model.forward_with_attention(src_tokens, tgt_tokens)
        attention = torch.stack([layer.float().mean(dim=1) for layer in weights.cross]).mean(dim=0)
        return logits.float(), attention
    logits, alignment = model.forward_with_attention(src_tokens, tgt_tokens)
    return logits.float(), alignment.float()


def _words(pieces: Sequence[str]) -> tuple[list[int | None], list[str]]:
    """Each piece's word index and each word's text."""
    indices = word_indices(pieces)
    texts: list[str] = [""] * (max((i for i in indices if i is not None), default=-1) + 1)
    for piece, word in zip(pieces, indices, strict=True):
        if word is not None:
            texts[word] += piece.replace(WORD_START, "")
    return indices, texts


def _per_word(
    values: Sequence[float], indices: Sequence[int | None], num_words: int, mean: bool
) -> list[float]:
    """Sum (or average) per-piece values into their words."""
    totals, counts = [0.0] * num_words, [0] * num_words
    for value, word in zip(values, indices, strict=True):
        if word is not None:
            totals[word] += value
            counts[word] += 1
    if mean:
        return [total / count if count else 0.0 for total, count in zip(totals, counts, strict=True)]
    return totals


def forced_signals(
    model: SequenceModel,
    tokenizer: TextTokenizer,
    sources: Sequence[Sequence[int]],
    outputs: Sequence[Sequence[int]],
) -> list[SentenceSignals]:
    """Teacher-force outputs with and without their sources and measure each one's coverage and source gain.

    Parameters
    ----------
    model : Transformer or RNNEncoderDecoder
        The model, in eval mode (an ensemble's first model).
    tokenizer : TextTokenizer
        Its tokenizer (pieces say where words start).
    sources : sequence of sequence of int
        Per row, the source token ids (EOS and padding included or not).
    outputs : sequence of sequence of int
        Per row, an output's token ids (no BOS, no EOS).

    Returns
    -------
    list of SentenceSignals
        One per row.

    Notes
    -----
    Two passes over each slice of :data:`FORCED_ROWS` outputs: the attention pass (the explicit attention
    formula, as alignments use) and the empty-source pass. The output's final EOS is scored in neither: an
    omission's evidence is which source words went unread, not where the output stopped. Probabilities are
    over the whole vocabulary, whatever shortlist the search used.
    """
    if not outputs:
        return []
    if len(outputs) > FORCED_ROWS:  # bound the (rows, length, vocabulary) logits a pass holds
        return [
            signals
            for start in range(0, len(outputs), FORCED_ROWS)
            for signals in forced_signals(
                model, tokenizer, sources[start : start + FORCED_ROWS], outputs[start : start + FORCED_ROWS]
            )
        ]
    eos_id, pad_id, start_id = model.config.eos_id, model.config.pad_id, model.config.start_id
    source_ids = [[i for i in source if i not in (eos_id, pad_id)] for source in sources]
    device = next(model.parameters()).device
    row_sources = pad_sequences([[*ids, eos_id] for ids in source_ids], pad_id).to(device)
    empty_sources = torch.full((len(outputs), 1), eos_id, dtype=torch.long, device=device)
    decoder_inputs = [[start_id, *output[:-1]] if output else [start_id] for output in outputs]
    tgt_tokens = pad_sequences(decoder_inputs, pad_id).to(device)  # (rows, tgt_len)
    targets = pad_sequences([list(output) or [pad_id] for output in outputs], pad_id).to(device)
    with torch.inference_mode():
        logits, attention = _forced_logits_and_attention(model, row_sources, tgt_tokens)
        empty_logits, _ = _forced_logits_and_attention(model, empty_sources, tgt_tokens)
        picked = targets.unsqueeze(-1)  # (rows, tgt_len, 1)
        # log p(y_t) = logit(y_t) - logsumexp(logits): no (rows, tgt_len, vocab) log-softmax is kept.
        with_source = logits.gather(-1, picked).squeeze(-1) - logits.logsumexp(-1)  # (rows, tgt_len)
        without_source = empty_logits.gather(-1, picked).squeeze(-1) - empty_logits.logsumexp(-1)
    gains, log_probs, attention = (with_source - without_source).cpu(), with_source.cpu(), attention.cpu()
    signals = []
    for row, (source, output) in enumerate(zip(source_ids, outputs, strict=True)):
        source_indices, source_texts = _words([tokenizer.source_id_to_piece(i) for i in source])
        target_indices, target_texts = _words([tokenizer.id_to_piece(i) for i in output])
        piece_coverage = attention[row, : len(output), : len(source)].sum(dim=0).tolist()
        row_gains = gains[row, : len(output)].tolist()
        row_log_probs = log_probs[row, : len(output)].tolist()
        signals.append(
            SentenceSignals(
                tuple(source_texts),
                tuple(_per_word(piece_coverage, source_indices, len(source_texts), mean=False)),
                tuple(target_texts),
                tuple(_per_word(row_gains, target_indices, len(target_texts), mean=True)),
                sum(row_gains) / len(row_gains) if row_gains else 0.0,
                sum(row_log_probs) / len(row_log_probs) if row_log_probs else 0.0,
            )
        )
    return signals


def _longest_run(marked: Sequence[bool]) -> tuple[int, int]:
    """Find the first longest run of True, as a half-open span; (0, 0) when there is none."""
    best, start = (0, 0), None
    for position, flag in enumerate([*marked, False]):
        if flag and start is None:
            start = position
        elif not flag and start is not None:
            if position - start > best[1] - best[0]:
                best = (start, position)
            start = None
    return best


def omission_span(signals: SentenceSignals, uncovered_below: float) -> tuple[int, int, int]:
    """Find the longest run of uncovered source words (those with a letter or digit).

    Parameters
    ----------
    signals : SentenceSignals
        One output's signals.
    uncovered_below : float
        Coverage under which a word is uncovered.

    Returns
    -------
    tuple of (int, int, int)
        ``(start, end, words)``: a half-open span of source words and the content words in it; (0, 0, 0) when
        every word is covered.

    Notes
    -----
    Words of punctuation alone neither count nor break a run: a model may rightly leave a comma unread. The span
    runs from the run's first content word to its last, so it may hold punctuation; ``words`` does not.
    """
    content = [any(character.isalnum() for character in word) for word in signals.source_words]
    positions = [position for position, is_content in enumerate(content) if is_content]
    marked = [signals.source_coverage[position] < uncovered_below for position in positions]
    start, end = _longest_run(marked)
    return (positions[start], positions[end - 1] + 1, end - start) if end > start else (0, 0, 0)


def hallucination_span(signals: SentenceSignals, hallucination_below: float) -> tuple[int, int]:
    """Find the longest run of target words whose source gain is below a threshold.

    Parameters
    ----------
    signals : SentenceSignals
        One output's signals.
    hallucination_below : float
        Gain (nats per token) under which a word is not explained by the source.

    Returns
    -------
    tuple of (int, int)
        A half-open span of target words; (0, 0) when there is none.

    Notes
    -----
    The evidence of a hallucination flag, which itself looks at the mean gain of the whole output.
    """
    return _longest_run([gain < hallucination_below for gain in signals.target_gain])


def repetition_span(words: Sequence[str]) -> tuple[int, int, int]:
    """Find the back-to-back repeat of a run of words whose copies add the most words.

    Parameters
    ----------
    words : sequence of str
        A sentence's words.

    Returns
    -------
    tuple of (int, int, int)
        ``(start, end, added)``: the half-open span of all copies and the words the copies after the first
        add; ``(0, 0, 0)`` without a repeat.

    Notes
    -----
    Words are compared case-insensitively with the punctuation that is part of them, so "Mann, Mann" is not
    a repeat of "Mann" but "Hund Hund Hund" adds two words. Runs up to half the sentence are tried: O(n^2)
    per sentence, a few microseconds for a translation's length.
    """
    lowered = [word.lower() for word in words]
    best = (0, 0, 0)
    for width in range(1, len(lowered) // 2 + 1):
        for start in range(len(lowered) - 2 * width + 1):
            copies = 1
            while (
                lowered[start + copies * width : start + (copies + 1) * width]
                == lowered[start : start + width]
            ):
                copies += 1
            added = (copies - 1) * width
            if added > best[2]:
                best = (start, start + copies * width, added)
    return best


def sentence_flags(signals: SentenceSignals, thresholds: FlagThresholds) -> tuple[QualityFlag, ...]:
    """Decide one output's flags from its signals.

    Parameters
    ----------
    signals : SentenceSignals
        From :func:`forced_signals`.
    thresholds : FlagThresholds
        Where each flag fires.

    Returns
    -------
    tuple of QualityFlag
        The flags that fire, in the order of :data:`FLAG_KINDS`; empty for a trusted output.

    Notes
    -----
    Scores: an omission's is the uncovered content words in its span, a hallucination's the output's mean
    source gain (lower is worse), a repetition's the words its copies add.
    """
    flags = []
    start, end, words = omission_span(signals, thresholds.uncovered_below)
    if words >= thresholds.omission_words:
        flags.append(QualityFlag("omission", float(words), source_span=(start, end)))
    if signals.target_words and signals.mean_gain < thresholds.hallucination_below:
        start, end = hallucination_span(signals, thresholds.hallucination_below)
        span = (start, end) if end > start else (0, len(signals.target_words))
        flags.append(QualityFlag("hallucination", signals.mean_gain, target_span=span))
    start, end, added = repetition_span(signals.target_words)
    if added >= thresholds.repetition_words:
        flags.append(QualityFlag("repetition", float(added), target_span=(start, end)))
    return tuple(flags)


def flag_candidates(
    model: SequenceModel,
    tokenizer: TextTokenizer,
    src_tokens: Tensor,
    candidates: list[list[Candidate]],
    thresholds: FlagThresholds,
) -> list[list[Candidate]]:
    """Add quality flags to a batch's candidates.

    Parameters
    ----------
    model : SequenceModel
        The (first) model decoded.
    tokenizer : TextTokenizer
        Its tokenizer.
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        The batch's source ids, one row per sentence.
    candidates : list of list of Candidate
        Per sentence of the batch, its candidates.
    thresholds : FlagThresholds
        Where each flag fires.

    Returns
    -------
    list of list of Candidate
        The same candidates, each with its ``flags`` set (an empty tuple when none fires).

    Notes
    -----
    One :func:`forced_signals` call for every candidate of the batch, each row against its own sentence.
    """
    sources = src_tokens.tolist()
    rows = [sentence for sentence, found in enumerate(candidates) for _ in found]
    outputs = [candidate.tokens for found in candidates for candidate in found]
    signals = iter(forced_signals(model, tokenizer, [sources[sentence] for sentence in rows], outputs))
    return [
        [
            dataclasses.replace(candidate, flags=sentence_flags(next(signals), thresholds))
            for candidate in found
        ]
        for found in candidates
    ]
