"""Perplexity of references through a step model: teacher forcing one token per decoder step.

For engines with no whole-sequence forward pass (an ONNX export's decoder step): the references are batched as
:func:`~transformer.evaluation.perplexity.corpus_perplexity` batches them and fed through the step model one
position at a time.
"""

import math
from collections.abc import Sequence
from typing import Any

from transformer.data.pipeline.batch import collate
from transformer.data.pipeline.dataset import encode_corpus
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.data.pipeline.token_batch_sampler import TokenBatchSampler
from transformer.decoding.step_model import StepModel, inference_context
from transformer.evaluation.perplexity import PerplexityResult


def step_model_perplexity(
    step_model: StepModel[Any],
    tokenizer: TextTokenizer,
    pairs: Sequence[tuple[str, str]],
    max_positions: int | None = None,
    max_tokens: int = 4096,
) -> PerplexityResult:
    """Perplexity of reference translations under a step model, fed one reference token per step.

    Parameters
    ----------
    step_model : StepModel
        What decodes (an ONNX export's, :class:`~transformer.interop.onnx_step_model.OnnxStepModel`).
    tokenizer : TextTokenizer
        The model's tokenizer.
    pairs : sequence of (str, str)
        Source sentence and reference translation.
    max_positions : int or None
        Positions the step model can encode; longer pairs are left out (``num_pairs`` says), as
        :func:`corpus_perplexity` leaves them out for a learned table.
    max_tokens : int
        Token budget per batch.

    Returns
    -------
    PerplexityResult
        NLL per token and perplexity over the same tokens :func:`corpus_perplexity` counts (EOS included,
        padding not).

    Notes
    -----
    For engines with no whole-sequence forward pass: teacher forcing through the incremental step gives the
    same sums, since cached and uncached decoding give the same logits, which makes this also a parity check
    of an export against :func:`corpus_perplexity` (tested).
    """
    limit = min(max_tokens, max_positions) if max_positions is not None else max_tokens
    pad_id = step_model.pad_id
    corpus = encode_corpus(pairs, tokenizer, max_len=limit, eos_id=step_model.eos_id)
    sampler = TokenBatchSampler(corpus.source_lengths, corpus.target_lengths, max_tokens, shuffle=False)
    nll_sum, tokens = 0.0, 0
    with inference_context(step_model):
        for indices in sampler.batches(0):
            batch = collate(indices, corpus, pad_id, step_model.bos_id, step_model.eos_id)
            state = step_model.start(batch.src_tokens)
            for position in range(batch.tgt_input.size(1)):
                log_probs = step_model.log_probs(state, batch.tgt_input[:, position])  # (batch, vocab)
                targets = batch.tgt_output[:, position]
                real = targets != pad_id
                picked = log_probs.gather(1, targets[:, None])[:, 0]
                nll_sum -= float(picked[real].double().sum())
                tokens += int(real.sum())
    mean = nll_sum / max(tokens, 1)
    return PerplexityResult(mean, math.exp(min(mean, 100.0)), tokens, len(corpus))
