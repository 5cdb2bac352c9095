"""What greedy and beam search share: the hypothesis record, the length penalty and the length limits.

Conventions used by both searches (and tested):

* A hypothesis's *length* |Y| is the number of decoding steps it took: its tokens plus the EOS that ended
  it. A hypothesis stopped by the length limit has no EOS, so its length is just its token count.
* ``log_prob`` is the raw sum of the chosen tokens' log-probabilities, EOS included when present.
* ``score = log_prob / length_penalty(|Y|)`` ranks hypotheses (section 6.1: alpha = 0.6).
* The output (EOS excluded) is at most ``source length + max_length_offset`` tokens, where the source length
  counts the non-padding source tokens (its EOS included), and at most ``max_length``.
"""

from dataclasses import dataclass, field

import torch
from torch import Tensor

from transformer.config.decode import DecodeConfig
from transformer.decoding.confidence import sentence_confidence


class NonFiniteScoresError(ValueError):
    """The model gave NaN log-probabilities, so no search result can be trusted.

    Notes
    -----
    Damaged weights (a file overwritten in the middle) or weights that overflow make the model's scores NaN;
    the searches used to treat every NaN extension as impossible and return no hypothesis, which a
    translator printed as an empty line with exit status 0. Raised once, after the search, by
    :func:`check_no_nan_scores`.
    """


@dataclass(frozen=True)
class Hypothesis:
    """One translation found by a search.

    Parameters
    ----------
    tokens : list of int
        Output token ids, without BOS and without the final EOS.
    score : float
        ``log_prob`` divided by the length penalty: what hypotheses are ranked by (higher is better).
    log_prob : float
        Sum of the log-probabilities of every generated token, the final EOS included when there is one.
    expected_utility : float or None
        With minimum Bayes risk decoding, the mean utility (chrF or BLEU, 0-100) against the other
        candidates, which ranks the MBR output; None otherwise.
    num_steps : int or None
        The steps the search took, ``|Y|``; None where the maker did not say, read as ``len(tokens) + 1``.
        Left out of equality, so a hypothesis built by hand compares by its tokens and scores alone.

    Notes
    -----
    A hypothesis that reached the length limit without EOS has ``len(tokens)`` generated tokens and no EOS
    term in ``log_prob``; otherwise ``len(tokens) + 1`` steps were taken.
    """

    tokens: list[int]
    score: float
    log_prob: float
    expected_utility: float | None = None
    num_steps: int | None = field(default=None, compare=False)

    @property
    def confidence(self) -> float:
        """The geometric mean of the tokens' probabilities, in [0, 1] (:mod:`~transformer.decoding.confidence`).

        Returns
        -------
        float
            ``exp(log_prob / |Y|)``.

        Notes
        -----
        Free: computed from the search's own sum, with no second pass through the model.
        """
        steps = self.num_steps if self.num_steps is not None else len(self.tokens) + 1
        return sentence_confidence(self.log_prob, steps)


def length_penalty(num_steps: Tensor, alpha: float, form: str) -> Tensor:
    """Compute the divisor that keeps beam search from preferring short outputs.

    Parameters
    ----------
    num_steps : torch.Tensor, any shape, int64
        Hypothesis lengths |Y|: generated tokens including the final EOS.
    alpha : float
        Strength (``DecodeConfig.length_penalty``); 0 gives 1 (no penalty), larger favours longer outputs.
    form : {"gnmt", "power"}
        "gnmt": ((5 + |Y|) / 6)^alpha (Wu et al., 2016, used by the paper); "power": |Y|^alpha.

    Returns
    -------
    torch.Tensor, same shape as ``num_steps``, float32
        The length penalty lp(Y); scores are ``log_prob / lp(Y)``.

    Notes
    -----
    Log-probabilities are negative, so dividing by a larger lp for longer outputs raises their score.
    """
    lengths = num_steps.to(torch.float32)
    if form == "gnmt":
        return ((5.0 + lengths) / 6.0) ** alpha
    if form == "power":
        return lengths**alpha
    raise ValueError(f"length penalty form {form!r} is not one of ('gnmt', 'power')")


def normalise_scores(log_probs: Tensor, num_steps: Tensor, config: DecodeConfig) -> Tensor:
    """Divide summed log-probabilities by the configured length penalty.

    Parameters
    ----------
    log_probs : torch.Tensor, any shape, float32
        Summed token log-probabilities of hypotheses.
    num_steps : torch.Tensor, same shape as ``log_probs``, int64
        Their lengths, final EOS included.
    config : DecodeConfig
        Supplies ``length_penalty`` (alpha) and ``length_penalty_form``.

    Returns
    -------
    torch.Tensor, same shape as ``log_probs``, float32
        Ranking scores; ``-inf`` stays ``-inf``.

    Notes
    -----
    Only the ranking uses the penalty: ``log_prob`` stays the raw sum, so the model's own probability of a
    hypothesis can still be reported. Section 6.1 of the paper ranks beams this way with alpha = 0.6.
    """
    return log_probs / length_penalty(num_steps, config.length_penalty, config.length_penalty_form)


def output_length_limits(
    src_tokens: Tensor, pad_id: int, config: DecodeConfig, position_limit: int | None = None
) -> Tensor:
    """Compute the most output tokens (EOS excluded) each sentence may get.

    Parameters
    ----------
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source token ids, right-padded with ``pad_id``.
    pad_id : int
        Id of the padding token.
    config : DecodeConfig
        Supplies ``max_length_offset``, ``max_length`` and ``min_length``.
    position_limit : int or None
        The most target positions the model can encode (a learned position table's size), or None.

    Returns
    -------
    torch.Tensor, shape (batch,), int64
        ``min(max(source length + max_length_offset, min_length, 1), max_length, position_limit)``.

    Notes
    -----
    Section 6.1: "maximum output length to input length + 50". ``min_length`` wins over the source-relative
    limit; ``max_length`` wins over both (the config guarantees ``max_length >= max(1, min_length)``).
    ``position_limit`` wins over everything: generating token k feeds the decoder k positions, so a model
    with learned positions would otherwise fail in the middle of a search once a hypothesis outgrew its
    table.
    """
    src_lengths = src_tokens.ne(pad_id).sum(dim=1)  # (batch,)
    limits = (src_lengths + config.max_length_offset).clamp(min=max(1, config.min_length))
    if config.max_length is not None:
        limits = limits.clamp(max=config.max_length)
    if position_limit is not None:
        limits = limits.clamp(max=position_limit)
    return limits


def forbid_tokens(step_log_probs: Tensor, step: int, config: DecodeConfig, special_ids: Tensor) -> Tensor:
    """Rule out next tokens a hypothesis may not take.

    Parameters
    ----------
    step_log_probs : torch.Tensor, shape (rows, vocab_size), float32
        Next-token log-probabilities from the step model.
    step : int
        Index of the step (0 for the first generated token).
    config : DecodeConfig
        Supplies ``min_length``.
    special_ids : torch.Tensor, shape (3,), int64
        ``pad_id``, ``bos_id`` and ``eos_id``, in this order.

    Returns
    -------
    torch.Tensor, shape (rows, vocab_size), float32
        A copy with ``-inf`` for padding and BOS at every step, and for EOS while fewer than ``min_length``
        tokens have been generated.

    Notes
    -----
    The remaining probabilities are not renormalised, so ``log_prob`` stays the model's own score. Padding
    and BOS are never output tokens (as in fairseq), unless BOS is also EOS (HuggingFace Marian). Runs
    every step without reading anything back to the host.
    """
    if step < config.min_length:
        return step_log_probs.index_fill(1, special_ids, float("-inf"))
    forbidden = step_log_probs.index_fill(1, special_ids[:2], float("-inf"))
    # Then put EOS back, in case it is also BOS: choosing which ids to forbid instead (a boolean index)
    # would read the ids back to the host, a GPU synchronisation at every step.
    eos_id = special_ids[2:]
    return forbidden.index_copy_(1, eos_id, step_log_probs.index_select(1, eos_id))


def completion_check_interval(device: torch.device) -> int:
    """Choose how many steps a search runs between its checks for finished sentences.

    Parameters
    ----------
    device : torch.device
        Where the search runs.

    Returns
    -------
    int
        1 on the CPU, 4 elsewhere.

    Notes
    -----
    The check (which sentences are done, so they can leave the batch and the loop can end) is the one
    place where a search reads a tensor back to the host. On the CPU that read costs nothing, so checking
    every step drops finished sentences at once. On a GPU it stalls the pipeline: the host waits for the
    step's kernels instead of queueing the next step's. Checking every few steps lets the queue run ahead,
    at the cost of up to ``interval - 1`` steps computed for sentences already done. Their results are
    frozen, so the search gives the same hypotheses whatever the interval (tested with an oracle; a real
    model's float32 arithmetic may round differently in a batch of another size, as it does whenever
    sentences are batched differently). 4 is a guess, not yet measured on a GPU.
    """
    return 1 if device.type == "cpu" else 4


def check_src_tokens(src_tokens: Tensor) -> None:
    """Raise a clear error unless ``src_tokens`` is a batch of token ids.

    Parameters
    ----------
    src_tokens : torch.Tensor, any shape
        Candidate source batch; valid when of shape (batch, src_len) and dtype int64.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For a tensor that is not 2-D or not int64.

    Notes
    -----
    A 1-D sentence or a float tensor would otherwise fail deep inside the model, with a message that names
    neither the argument nor the expected shape.
    """
    if src_tokens.dim() != 2 or src_tokens.dtype != torch.int64:
        raise ValueError(
            "src_tokens must be an int64 tensor of shape (batch, src_len), "
            f"got {src_tokens.dtype} of shape {tuple(src_tokens.shape)}"
        )


def build_hypotheses(
    tokens: Tensor, num_steps: Tensor, ends_with_eos: Tensor, log_probs: Tensor, scores: Tensor
) -> list[Hypothesis]:
    """Convert finished hypotheses from tensors to :class:`Hypothesis` records.

    Parameters
    ----------
    tokens : torch.Tensor, shape (num_hypotheses, max_steps), int64
        Generated tokens, final EOS included; positions past ``num_steps`` are ignored.
    num_steps : torch.Tensor, shape (num_hypotheses,), int64
        Steps taken by each hypothesis.
    ends_with_eos : torch.Tensor, shape (num_hypotheses,), bool
        Whether the last step produced EOS (False when the length limit stopped it).
    log_probs : torch.Tensor, shape (num_hypotheses,), float32
        Summed token log-probabilities.
    scores : torch.Tensor, shape (num_hypotheses,), float32
        Length-normalised scores.

    Returns
    -------
    list of Hypothesis
        One record per row, in row order, with the final EOS removed from ``tokens``.

    Notes
    -----
    Runs once per search, after decoding: the one place that loops over hypotheses.
    """
    output_lengths = (num_steps - ends_with_eos.long()).tolist()
    return [
        Hypothesis(tokens=row[:length], score=score, log_prob=log_prob, num_steps=steps)
        for row, length, score, log_prob, steps in zip(
            tokens.tolist(),
            output_lengths,
            scores.tolist(),
            log_probs.tolist(),
            num_steps.tolist(),
            strict=True,
        )
    ]


def note_nan_scores(nan_seen: Tensor, step_log_probs: Tensor) -> Tensor:
    """Remember whether a step's log-probabilities hold a NaN, without reading anything back to the host.

    Parameters
    ----------
    nan_seen : torch.Tensor, shape (), bool
        Whether an earlier step had one.
    step_log_probs : torch.Tensor, shape (rows, vocab_size), float
        The step model's log-probabilities, before any token is forbidden.

    Returns
    -------
    torch.Tensor, shape (), bool
        ``nan_seen`` or a NaN in this step.

    Notes
    -----
    Only NaN is checked: ``-inf`` is a legitimate zero probability (an oracle's table, a forbidden token),
    while a NaN comes only from non-finite weights or an overflow (``inf - inf`` in the softmax). The flag
    stays on the device and is read once, by :func:`check_no_nan_scores`, so a GPU search is not stalled
    every step. The check reads each row's ``amax``, which is NaN wherever the row holds a NaN (tested), and
    vectorised: ``isnan().any()`` took 2 ms of a beam step at batch 32 on the CPU, ``amax`` 0.08 ms.
    """
    return nan_seen | step_log_probs.amax(dim=-1).isnan().any()


def check_no_nan_scores(nan_seen: Tensor) -> None:
    """Raise NonFiniteScoresError if any step of a search saw a NaN log-probability.

    Parameters
    ----------
    nan_seen : torch.Tensor, shape (), bool
        The flag kept by :func:`note_nan_scores`.

    Returns
    -------
    None

    Notes
    -----
    Called once per search, after its loop: the one extra read back to the host.
    """
    if bool(nan_seen):
        raise NonFiniteScoresError(
            "the model computes NaN scores (its weights are damaged or overflow); nothing was translated"
        )
