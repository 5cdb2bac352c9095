"""Label-smoothed cross-entropy that ignores padding (paper section 5.4, "Label Smoothing")."""

from typing import Any

import torch
from torch import Tensor


def label_smoothed_nll_loss(
    logits: Tensor, target: Tensor, epsilon: float, ignore_index: int
) -> tuple[Tensor, Tensor]:
    """Sum the label-smoothed cross-entropy and the plain negative log-likelihood over real tokens.

    Parameters
    ----------
    logits : torch.Tensor, shape (batch, tgt_len, vocab_size)
        Unnormalised scores from the model; any float dtype (computed in float32).
    target : torch.Tensor, shape (batch, tgt_len), int64
        Gold next tokens; positions equal to ``ignore_index`` (padding) contribute nothing.
    epsilon : float
        Label smoothing eps_ls (0.1 in the paper): the target distribution is
        (1 - eps) * one_hot(gold) + eps / vocab_size.
    ignore_index : int
        Token id that marks padding.

    Returns
    -------
    loss : torch.Tensor, shape (), float32 (float64 for float64 logits)
        Sum over real tokens of the smoothed cross-entropy (what training minimises).
    nll : torch.Tensor, shape (), same dtype as loss
        Sum over real tokens of -log p(gold) (for perplexity), without gradient.

    Notes
    -----
    Equals ``F.cross_entropy(..., label_smoothing=epsilon, reduction="sum", ignore_index=...)`` (tested) but
    computes both sums from one log-sum-exp per token, in float32 chunks of rows, and keeps no
    (tokens, vocab) log-probability tensor: with a 32k vocabulary that tensor and its float32 copy of the
    logits were the largest activations of a training step. The gradient (softmax minus the smoothed target)
    is written in the logits' dtype. The paper: label smoothing "hurts perplexity, as the model learns
    to be more unsure, but improves accuracy and BLEU score".
    """
    real = target.ne(ignore_index)  # (batch, tgt_len)
    loss, nll = _SmoothedCrossEntropy.apply(logits, target.clamp(min=0), real, epsilon)  # type: ignore[no-untyped-call]
    return loss, nll.detach()


#: Elements of the float32 working copy per chunk of rows on the CPU: small enough to stay in cache, large
#: enough that the per-chunk Python overhead is negligible.
CHUNK_ELEMENTS = 1 << 20
#: The same on a GPU, where each chunk costs several kernel launches and caches do not decide: CPU-sized
#: chunks made the loss launch ~5,000 kernels per base-model step at 25k tokens and starve an H100.
ACCELERATOR_CHUNK_ELEMENTS = 1 << 26


def rows_per_chunk(logits: Tensor) -> int:
    """Rows of ``logits`` converted to the compute dtype at a time.

    Parameters
    ----------
    logits : torch.Tensor, shape (..., vocab_size)
        The logits the loss reads.

    Returns
    -------
    int
        At least 1: ``CHUNK_ELEMENTS // vocab_size`` on the CPU, ``ACCELERATOR_CHUNK_ELEMENTS // vocab_size``
        elsewhere.

    Notes
    -----
    The chunking bounds the float32 working copy (64M elements, 256 MB, on a GPU); the result does not
    depend on it (tested).
    """
    elements = CHUNK_ELEMENTS if logits.device.type == "cpu" else ACCELERATOR_CHUNK_ELEMENTS
    return max(1, elements // logits.size(-1))


def _compute_dtype(logits: Tensor) -> torch.dtype:
    """Float32 for half-precision logits, their own dtype otherwise (float64 stays float64)."""
    return torch.float32 if logits.dtype in (torch.float16, torch.bfloat16) else logits.dtype


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Label-smoothed cross-entropy with a hand-written backward, computed in float32 chunks of rows.

    Per real token, with lse = logsumexp(logits): nll = lse - logit[gold] and the smoothed loss is
    lse - (1 - eps) * logit[gold] - eps * mean(logits), so no (tokens, vocab) log-probability tensor is kept;
    the gradient is softmax(logits) - (1 - eps) * one_hot(gold) - eps / vocab, rebuilt from the saved lse.
    Low-precision logits are converted to float32 one chunk at a time, never as a whole.
    """

    @staticmethod
    def forward(
        ctx: Any, logits: Tensor, target: Tensor, real: Tensor, epsilon: float
    ) -> tuple[Tensor, Tensor]:
        vocab_size = logits.size(-1)
        flat_logits = logits.reshape(-1, vocab_size)  # (tokens, vocab)
        flat_target = target.reshape(-1, 1)  # (tokens, 1)
        dtype = _compute_dtype(logits)
        lse = torch.empty(flat_logits.size(0), dtype=dtype, device=logits.device)
        gold = torch.empty_like(lse)
        mean = torch.empty_like(lse)
        rows = rows_per_chunk(logits)
        for start in range(0, flat_logits.size(0), rows):
            chunk = flat_logits[start : start + rows].to(dtype)  # (rows, vocab)
            lse[start : start + rows] = torch.logsumexp(chunk, dim=-1)
            gold[start : start + rows] = chunk.gather(1, flat_target[start : start + rows]).squeeze(1)
            mean[start : start + rows] = chunk.mean(dim=-1)
        weight = real.reshape(-1).to(dtype)  # (tokens,) 1 on real tokens, 0 on padding
        nll = ((lse - gold) * weight).sum()
        loss = ((lse - (1.0 - epsilon) * gold - epsilon * mean) * weight).sum()
        ctx.save_for_backward(logits, flat_target, weight, lse)
        ctx.epsilon = epsilon
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx: Any, loss_grad: Tensor, _nll_grad: Tensor | None) -> tuple[Tensor, None, None, None]:
        logits, flat_target, weight, lse = ctx.saved_tensors
        epsilon: float = ctx.epsilon
        vocab_size = logits.size(-1)
        flat_logits = logits.reshape(-1, vocab_size)
        grad = torch.empty_like(flat_logits)
        scale = (weight * loss_grad.to(lse.dtype))[:, None]  # (tokens, 1)
        rows = rows_per_chunk(logits)
        for start in range(0, flat_logits.size(0), rows):
            stop = start + rows
            # Out of place first: for float32 logits .to() returns the saved tensor itself.
            chunk = (flat_logits[start:stop].to(lse.dtype) - lse[start:stop, None]).exp_()  # softmax
            chunk.sub_(epsilon / vocab_size)
            chunk.scatter_add_(
                1,
                flat_target[start:stop],
                torch.full_like(flat_target[start:stop], -(1.0 - epsilon), dtype=chunk.dtype),
            )
            grad[start:stop] = chunk.mul_(scale[start:stop])
        return grad.view_as(logits), None, None, None
