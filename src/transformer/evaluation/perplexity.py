"""Per-token negative log-likelihood and perplexity of reference translations under a model."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transformer.data.batching import TokenBatchSampler, collate
from transformer.data.dataset import encode_corpus
from transformer.data.text_tokenizer import TextTokenizer
from transformer.model.transformer import Transformer
from transformer.training.loss import label_smoothed_nll_loss


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


def corpus_perplexity(
    model: Transformer, tokenizer: TextTokenizer, pairs: Sequence[tuple[str, str]], max_tokens: int = 4096
) -> PerplexityResult:
    """Score reference translations with teacher forcing.

    Parameters
    ----------
    model : Transformer
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
    No length filter is applied beyond ``max_tokens`` itself: every non-empty pair is scored.
    """
    config = model.config
    corpus = encode_corpus(pairs, tokenizer, max_len=max_tokens, eos_id=config.eos_id)
    sampler = TokenBatchSampler(corpus.source_lengths, corpus.target_lengths, max_tokens, shuffle=False)
    device = next(model.parameters()).device
    nll_sum, tokens = 0.0, 0
    was_training = model.training
    model.eval()
    with torch.inference_mode():
        for indices in sampler.batches(0):
            batch = collate(indices, corpus, config.pad_id, config.start_id, config.eos_id).to(device)
            logits = model(batch.src_tokens, batch.tgt_input)
            _, nll = label_smoothed_nll_loss(logits, batch.tgt_output, 0.0, config.pad_id)
            nll_sum += float(nll)
            tokens += batch.num_target_tokens
    model.train(was_training)
    mean = nll_sum / max(tokens, 1)
    return PerplexityResult(mean, math.exp(min(mean, 100.0)), tokens, len(corpus))
