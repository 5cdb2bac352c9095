"""Per-token negative log-likelihood and perplexity of reference translations under a model.

:func:`sum_batch_losses` is the one implementation of teacher-forced scoring: ``transformer evaluate``
(:func:`corpus_perplexity`) and the trainer's validation (``Trainer.validate``, which adds the sums over
processes) both call it.
"""

import contextlib
import math
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from transformer.architectures import SequenceModel
from transformer.data.pipeline.batch import Batch, collate
from transformer.data.pipeline.dataset import encode_corpus
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.data.pipeline.token_batch_sampler import TokenBatchSampler
from transformer.loss import label_smoothed_nll_loss
from transformer.model.config import TransformerConfig


@dataclass(frozen=True)
class PerplexityResult:
    """How well a model predicts reference translations.

    Parameters
    ----------
    nll_per_token : float
        Mean negative log-likelihood per target BPE token (EOS included), in nats.
    perplexity : float
        exp(nll_per_token), the measure of Table 2 ("per-wordpiece" perplexity).
    num_tokens : int
        Target tokens scored.
    num_pairs : int
        Pairs scored (empty pairs are skipped).

    Notes
    -----
    Perplexities are comparable only between models with the same vocabulary.
    """

    nll_per_token: float
    perplexity: float
    num_tokens: int
    num_pairs: int


def sum_batch_losses(
    model: nn.Module,
    batches: Iterable[Batch],
    label_smoothing: float,
    pad_id: int,
    forward_context: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> Tensor:
    """Score batches with teacher forcing: summed loss, summed NLL and the number of target tokens.

    Parameters
    ----------
    model : torch.nn.Module
        The model (a Transformer or the recurrent baseline, possibly wrapped for distributed training);
        called as ``model(src_tokens, tgt_input)`` and returning logits of shape (batch, tgt_len,
        tgt_vocab_size).
    batches : iterable of Batch
        Padded batches already on the model's device.
    label_smoothing : float
        Smoothing of the reported loss (the NLL is never smoothed); 0 for evaluation, the training value for
        validation, so the validation loss is comparable with the training loss.
    pad_id : int
        Padding id of the targets, excluded from every sum.
    forward_context : callable returning a context manager
        Entered around each forward pass, e.g. the trainer's autocast for reduced precision.

    Returns
    -------
    torch.Tensor, shape (3,), float64
        ``[loss_sum, nll_sum, num_target_tokens]`` on the CPU (``training.distributed.all_reduce_sum`` adds
        them over processes on the job's device).

    Notes
    -----
    Runs in eval mode (no dropout) and without autograd, and puts the model back in the mode it was in.
    Sums are accumulated in float64 one batch at a time, so the result does not depend on how the tokens
    are split into batches beyond float32 rounding inside each batch.
    """
    was_training = model.training
    model.eval()
    sums = torch.zeros(3, dtype=torch.float64)
    try:
        with torch.no_grad():
            for batch in batches:
                with forward_context():
                    logits = model(batch.src_tokens, batch.tgt_input)
                loss, nll = label_smoothed_nll_loss(logits, batch.tgt_output, label_smoothing, pad_id)
                sums += torch.tensor([float(loss), float(nll), batch.num_target_tokens], dtype=torch.float64)
    finally:
        model.train(was_training)
    return sums


def corpus_perplexity(
    model: SequenceModel, tokenizer: TextTokenizer, pairs: Sequence[tuple[str, str]], max_tokens: int = 4096
) -> PerplexityResult:
    """Score reference translations with teacher forcing.

    Parameters
    ----------
    model : Transformer or RNNEncoderDecoder
        The model (its device and dtype are used as they are).
    tokenizer : TextTokenizer
        The model's tokenizer.
    pairs : sequence of (str, str)
        Source sentence and reference translation.
    max_tokens : int
        Token budget per batch.

    Returns
    -------
    PerplexityResult
        NLL per token and perplexity.

    Notes
    -----
    No length filter is applied beyond ``max_tokens`` itself, and for learned positions ``max_positions``
    (such a model cannot encode a longer pair): every other non-empty pair is scored, and ``num_pairs`` says
    how many were.
    """
    config = model.config
    # A learned position table cannot encode longer pairs: leave them out rather than fail (num_pairs says).
    limit = max_tokens
    if isinstance(config, TransformerConfig) and config.positional_encoding == "learned":
        limit = min(max_tokens, config.max_positions)
    corpus = encode_corpus(pairs, tokenizer, max_len=limit, eos_id=config.eos_id)
    sampler = TokenBatchSampler(corpus.source_lengths, corpus.target_lengths, max_tokens, shuffle=False)
    device = next(model.parameters()).device
    batches = (
        collate(indices, corpus, config.pad_id, config.start_id, config.eos_id).to(device)
        for indices in sampler.batches(0)
    )
    _, nll_sum, tokens = sum_batch_losses(model, batches, 0.0, config.pad_id).tolist()
    mean = nll_sum / max(tokens, 1)
    return PerplexityResult(mean, math.exp(min(mean, 100.0)), int(tokens), len(corpus))
