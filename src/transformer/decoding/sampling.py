"""Sampling: draw each next token at random from the model's truncated, renormalised distribution.

Used for sampled back-translation (Edunov et al. 2018) and for the candidates of minimum Bayes risk
decoding (Freitag et al. 2023 recommend epsilon sampling). Every sentence gets ``nbest`` independent
samples, decoded as rows of one batch by the same step loop as greedy search, so sampling runs in the
cached path, in int8, with target prefixes and every other constraint.

The random numbers are not drawn from a global generator: each one is a hash of the seed, the sentence's
source tokens, the sample's index and the step (a counter-based generator, like Philox's use in JAX). A
sentence's random numbers are therefore the same whatever else it is batched with, in whatever order, on
whatever device; the price is that identical source lines get identical samples. The samples themselves are
then identical for any step model whose scores do not depend on the batch (tested with oracles and with the
CLI); a real model's float32 scores may differ in their last bits between batch shapes (see
:func:`~transformer.decoding.search.completion_check_interval`), which changes a draw only when its uniform
falls within that difference of a boundary between two tokens.
"""

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from transformer.config.decode import DecodeConfig
from transformer.decoding.constraints import TargetPrefixes
from transformer.decoding.greedy import run_token_loop
from transformer.decoding.search import Hypothesis, check_src_tokens
from transformer.decoding.step_model import Decodable, StepModel, as_step_model, inference_context

_MASK_32 = 0xFFFFFFFF
_UNIFORM_BITS = 24  # float32 holds 24-bit integers exactly, so every uniform is exact and below 1


def _multiply_mod_2_32(values: Tensor, factor: int) -> Tensor:
    """``values * factor mod 2**32`` for int64 values below 2**32, without int64 overflow."""
    low, high = factor & 0xFFFF, factor >> 16
    return (values * low + (((values * high) & 0xFFFF) << 16)) & _MASK_32


def hash_32(values: Tensor) -> Tensor:
    """Mix 32-bit integers into well-spread 32-bit integers.

    Parameters
    ----------
    values : torch.Tensor, any shape, int64
        Integers from 0 to 2**32 - 1.

    Returns
    -------
    torch.Tensor, same shape, int64
        Their hashes, from 0 to 2**32 - 1.

    Notes
    -----
    Chris Wellons's "lowbias32" integer hash (xorshift-multiply rounds). Products are taken modulo 2**32 in
    16-bit halves so no int64 product overflows: signed overflow is not a behaviour PyTorch promises.
    Right shifts of non-negative int64 values are logical, as the hash needs.
    """
    values = values ^ (values >> 16)
    values = _multiply_mod_2_32(values, 0x7FEB352D)
    values = values ^ (values >> 15)
    values = _multiply_mod_2_32(values, 0x846CA68B)
    return values ^ (values >> 16)


def combine_keys(keys: Tensor, values: Tensor | int) -> Tensor:
    """Fold values into keys: a new, well-mixed key per (key, value) pair.

    Parameters
    ----------
    keys : torch.Tensor, shape (rows,), int64
        Keys from 0 to 2**32 - 1.
    values : torch.Tensor of shape (rows,), int64, or int
        What to fold in (a token, a sample index, a step); only its low 32 bits count.

    Returns
    -------
    torch.Tensor, shape (rows,), int64
        The combined keys.

    Notes
    -----
    The golden-ratio constant keeps (0, 0) from hashing to 0, the hash's fixed point.
    """
    mixed = hash_32(torch.as_tensor(values, device=keys.device) & _MASK_32)
    return hash_32(((keys ^ mixed) + 0x9E3779B9) & _MASK_32)


def sentence_keys(src_tokens: Tensor, pad_id: int, seed: int) -> Tensor:
    """Derive one random-number key per sentence from the seed and its source tokens.

    Parameters
    ----------
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source token ids, right-padded with ``pad_id``.
    pad_id : int
        The padding id, which is skipped so padding never changes a key.
    seed : int
        ``DecodeConfig.seed``.

    Returns
    -------
    torch.Tensor, shape (batch,), int64
        Keys from 0 to 2**32 - 1.

    Notes
    -----
    A key depends on the sentence's tokens, not its place in the batch: this is what makes samples
    independent of batching.
    """
    keys = torch.full((src_tokens.size(0),), seed & _MASK_32, dtype=torch.long, device=src_tokens.device)
    keys = combine_keys(hash_32(keys), (seed >> 32) & _MASK_32)
    for column in src_tokens.unbind(dim=1):
        keys = torch.where(column != pad_id, combine_keys(keys, column), keys)
    return keys


def counter_uniforms(row_keys: Tensor, step: int) -> Tensor:
    """Draw one uniform number in [0, 1) per row for one step.

    Parameters
    ----------
    row_keys : torch.Tensor, shape (rows,), int64
        Each row's key (sentence and sample).
    step : int
        The step, folded into the key.

    Returns
    -------
    torch.Tensor, shape (rows,), float32
        Multiples of 2**-24 from 0 to 1 - 2**-24.

    Notes
    -----
    24 bits: a float32 holds them exactly, so a uniform is never rounded up to 1.
    """
    bits = combine_keys(row_keys, step) >> (32 - _UNIFORM_BITS)
    return bits.to(torch.float32) / float(1 << _UNIFORM_BITS)


def sampling_distribution(step_log_probs: Tensor, config: DecodeConfig) -> tuple[Tensor, Tensor | None]:
    """Turn a step's log-probabilities into the truncated distribution sampling draws from.

    Parameters
    ----------
    step_log_probs : torch.Tensor, shape (rows, vocab_size), float32
        Constrained log-probabilities (forbidden tokens at ``-inf``).
    config : DecodeConfig
        Supplies ``temperature``, ``top_k``, ``top_p`` and ``epsilon``.

    Returns
    -------
    probabilities : torch.Tensor, shape (rows, vocab_size), float32
        Unnormalised probabilities of the kept tokens (0 for the others), in the order of ``order``.
    order : torch.Tensor of shape (rows, vocab_size), int64, or None
        The token id of each column, most probable first; None when nothing is truncated (columns are ids).

    Notes
    -----
    Applied in this order: the temperature divides the log-probabilities; top-k keeps the ``top_k`` most
    probable tokens; top-p keeps, of those, the most probable ones until their renormalised probability
    reaches ``top_p`` (the token that crosses it included); epsilon drops tokens whose probability under
    the temperature-scaled distribution is below ``epsilon`` (Hewitt et al. 2022 truncate on the model's
    own probabilities, not on a renormalised remainder). Each rule keeps a prefix of the sorted order, and
    the most probable token is always kept. Ties are sorted stably (lowest id first), so top-k 1 picks what
    greedy search picks.
    """
    probabilities = torch.softmax(step_log_probs / config.temperature, dim=-1).nan_to_num(nan=0.0)
    if config.top_k == 0 and config.top_p == 1.0 and config.epsilon == 0.0:
        return probabilities, None
    probabilities, order = probabilities.sort(dim=-1, descending=True, stable=True)  # (rows, vocab)
    ranks = torch.arange(probabilities.size(1), device=probabilities.device)
    keep = ranks < config.top_k if config.top_k else torch.ones_like(ranks, dtype=torch.bool)
    keep = keep.expand_as(probabilities)
    if config.top_p < 1.0:
        kept = probabilities * keep
        kept = kept / kept.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(kept.dtype).tiny)
        mass_before = kept.cumsum(dim=-1) - kept  # (rows, vocab): probability ranked strictly higher
        keep = keep & (mass_before < config.top_p)
    if config.epsilon > 0.0:
        keep = keep & (probabilities >= config.epsilon)
    keep = keep | (ranks == 0)
    return probabilities * keep, order


def sample_tokens(step_log_probs: Tensor, uniforms: Tensor, config: DecodeConfig) -> Tensor:
    """Draw one token per row by inverting the truncated distribution's cumulative sum.

    Parameters
    ----------
    step_log_probs : torch.Tensor, shape (rows, vocab_size), float32
        Constrained log-probabilities.
    uniforms : torch.Tensor, shape (rows,), float32
        One uniform number in [0, 1) per row (:func:`counter_uniforms`).
    config : DecodeConfig
        The sampling settings.

    Returns
    -------
    torch.Tensor, shape (rows,), int64
        The drawn token ids.

    Notes
    -----
    Token i is drawn when ``cumsum[i - 1] <= u * total < cumsum[i]``, so each kept token is drawn with
    probability proportional to its probability and a zero-probability token never is. One uniform per
    row (instead of one per token, as the Gumbel-max trick needs) keeps the generator cheap; the index is
    clamped to the last kept token against rounding at the top. A row with no allowed token gets some
    token of probability zero, and its hypothesis ends there (the search sees a ``-inf`` total).
    """
    probabilities, order = sampling_distribution(step_log_probs, config)
    cumulative = probabilities.cumsum(dim=-1)  # (rows, vocab)
    thresholds = uniforms[:, None] * cumulative[:, -1:]  # (rows, 1)
    positive = (probabilities > 0).long()
    last_positive = (positive * torch.arange(positive.size(1), device=positive.device)).amax(dim=-1)
    index = (cumulative <= thresholds).sum(dim=-1).clamp(max=last_positive)  # (rows,)
    return index if order is None else order.gather(1, index[:, None]).squeeze(1)


def sample_search(
    model_or_step_model: Decodable,
    src_tokens: Tensor,
    config: DecodeConfig,
    prefixes: Sequence[Sequence[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Draw ``config.nbest`` samples per sentence.

    Parameters
    ----------
    model_or_step_model : Transformer, RNNEncoderDecoder or StepModel
        The model or any step model.
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source token ids, each row ending with EOS and right-padded with the pad id.
    config : DecodeConfig
        ``nbest`` (samples per sentence), the sampling settings, the seed, length limits and constraints.
    prefixes : sequence of sequence of int, optional
        A target prefix per sentence, forced before sampling continues.

    Returns
    -------
    list of list of Hypothesis
        Per input sentence, its samples sorted by ``score`` (best first, equal scores in draw order);
        ``log_prob`` is the model's own (temperature 1, untruncated) log-probability of the sample.

    Notes
    -----
    Each sample is one row: a sentence is repeated ``nbest`` times (:meth:`StepModel.reorder`, so the
    encoder runs once per sentence) and every row runs greedy search's step loop with a sampled choice
    instead of the argmax. Reporting the model's log-probability rather than the sampling distribution's
    makes scores comparable across settings (and is what MBR and ``--scores`` need).
    """
    check_src_tokens(src_tokens)
    if src_tokens.size(0) == 0:
        return []
    step_model = as_step_model(model_or_step_model, config.use_cache)
    batch_size, num_samples = src_tokens.size(0), config.nbest
    rows = torch.arange(batch_size, device=src_tokens.device).repeat_interleave(num_samples)
    sample_indices = torch.arange(num_samples, device=src_tokens.device).repeat(batch_size)
    row_keys = combine_keys(sentence_keys(src_tokens, step_model.pad_id, config.seed)[rows], sample_indices)
    packed = TargetPrefixes.from_lists(prefixes, src_tokens.device).select(rows) if prefixes else None

    def choose(step_log_probs: Tensor, totals: Tensor, active_ids: Tensor, step: int) -> Tensor:
        return sample_tokens(step_log_probs, counter_uniforms(row_keys[active_ids], step), config)

    with inference_context(step_model):
        hypotheses = _run_samples(step_model, src_tokens, rows, config, packed, choose)
    return [
        sorted(hypotheses[sentence * num_samples : (sentence + 1) * num_samples], key=_negated_score)
        for sentence in range(batch_size)
    ]


def _run_samples(
    step_model: StepModel[Any],
    src_tokens: Tensor,
    rows: Tensor,
    config: DecodeConfig,
    prefixes: TargetPrefixes | None,
    choose: Any,
) -> list[Hypothesis]:
    """Start the step model once per sentence, repeat its rows per sample, run the token loop."""
    state = step_model.start(src_tokens)
    step_model.reorder(state, rows)
    return run_token_loop(step_model, state, src_tokens.index_select(0, rows), config, prefixes, choose)


def _negated_score(hypothesis: Hypothesis) -> float:
    """Sort key putting the best score first."""
    return -hypothesis.score
