"""Label-smoothed cross-entropy that ignores padding (paper section 5.4, "Label Smoothing")."""

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
    loss : torch.Tensor, shape (), float32
        Sum over real tokens of the smoothed cross-entropy (what training minimises).
    nll : torch.Tensor, shape (), float32
        Sum over real tokens of -log p(gold) (for perplexity), without gradient.

    Notes
    -----
    Equals ``F.cross_entropy(..., label_smoothing=epsilon, reduction="sum", ignore_index=...)`` (tested) but
    computes one log-softmax for both sums. The paper: label smoothing "hurts perplexity, as the model learns
    to be more unsure, but improves accuracy and BLEU score".
    """
    log_probs = torch.log_softmax(logits.float(), dim=-1)  # (batch, tgt_len, vocab_size)
    real = target.ne(ignore_index)
    gold_log_probs = log_probs.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    nll_per_token = -gold_log_probs.masked_fill(~real, 0.0)
    uniform_per_token = -log_probs.mean(dim=-1).masked_fill(~real, 0.0)
    loss = (1.0 - epsilon) * nll_per_token.sum() + epsilon * uniform_per_token.sum()
    return loss, nll_per_token.sum().detach()
