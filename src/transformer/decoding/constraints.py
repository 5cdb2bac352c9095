"""Constraints on what a hypothesis may contain: forced target prefixes and blocked repeated n-grams.

Greedy search, beam search and sampling apply the same rules to each step's log-probabilities, in this order
(:func:`constrain_step`): padding and BOS are never output and EOS not before ``min_length``
(:func:`~transformer.decoding.search.forbid_tokens`); a token that would repeat an n-gram is forbidden
(``no_repeat_ngram``); and while a row is inside its target prefix, only the prefix's next token is allowed,
whatever the other rules say, because the user asked for exactly those tokens.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from transformer.config.decode import DecodeConfig
from transformer.decoding.search import forbid_tokens, output_length_limits
from transformer.decoding.step_model import StepModel


@dataclass(frozen=True)
class TargetPrefixes:
    """Target tokens each sentence's output must start with (interactive translation, Knowles & Koehn 2016).

    Parameters
    ----------
    tokens : torch.Tensor, shape (batch, max_prefix_len), int64
        Prefix token ids, right-padded with any id (positions past ``lengths`` are never read).
    lengths : torch.Tensor, shape (batch,), int64
        Prefix length of each sentence; 0 for a sentence decoded freely.

    Notes
    -----
    The forced tokens are part of the hypothesis: they appear in its output tokens and their model
    log-probabilities count in its ``log_prob`` and score, so a prefix the model finds unlikely shows in the
    score. The search continues freely after the last forced token.
    """

    tokens: Tensor
    lengths: Tensor

    @classmethod
    def from_lists(cls, prefixes: Sequence[Sequence[int]], device: torch.device) -> "TargetPrefixes":
        """Pack per-sentence token lists into padded tensors.

        Parameters
        ----------
        prefixes : sequence of sequence of int
            One list of target token ids per sentence (empty: no prefix).
        device : torch.device
            Where the search runs.

        Returns
        -------
        TargetPrefixes
            The packed prefixes; ``max_prefix_len`` is at least 1 so indexing never meets an empty table.

        Notes
        -----
        Padding uses id 0; it is never read because a row is forced only while ``step < lengths[row]``.
        """
        width = max([1, *(len(prefix) for prefix in prefixes)])
        tokens = torch.zeros((len(prefixes), width), dtype=torch.long)
        for row, prefix in enumerate(prefixes):
            tokens[row, : len(prefix)] = torch.tensor(list(prefix), dtype=torch.long)
        lengths = torch.tensor([len(prefix) for prefix in prefixes], dtype=torch.long)
        return cls(tokens.to(device), lengths.to(device))

    def select(self, rows: Tensor) -> "TargetPrefixes":
        """Take the prefixes of some sentences, e.g. one per hypothesis row.

        Parameters
        ----------
        rows : torch.Tensor, shape (new_rows,), int64
            For each new row, the sentence whose prefix it follows.

        Returns
        -------
        TargetPrefixes
            Prefixes of shape (new_rows, max_prefix_len).

        Notes
        -----
        Beam search repeats each sentence's prefix for its beams; sampling for its samples.
        """
        return TargetPrefixes(self.tokens.index_select(0, rows), self.lengths.index_select(0, rows))


def raise_limits_for_prefixes(
    max_lengths: Tensor, prefixes: TargetPrefixes | None, position_limit: int | None
) -> Tensor:
    """Let every sentence generate at least its prefix and one more token.

    Parameters
    ----------
    max_lengths : torch.Tensor, shape (batch,), int64
        Output length limits from :func:`~transformer.decoding.search.output_length_limits`.
    prefixes : TargetPrefixes or None
        The sentences' prefixes.
    position_limit : int or None
        The most target positions the model can encode, which no limit may pass.

    Returns
    -------
    torch.Tensor, shape (batch,), int64
        ``max(max_lengths, prefix length + 1)``, capped by ``position_limit``.

    Notes
    -----
    A prefix is what the user has already accepted, so it wins over ``max_length`` and the source-relative
    limit; without the extra token the search could not even end the prefixed output with EOS.
    """
    if prefixes is None:
        return max_lengths
    limits = torch.maximum(max_lengths, prefixes.lengths + 1)
    return limits.clamp(max=position_limit) if position_limit is not None else limits


def search_length_limits(
    step_model: StepModel[Any], src_tokens: Tensor, config: DecodeConfig, prefixes: TargetPrefixes | None
) -> tuple[Tensor, int]:
    """Compute each row's output length limit and the number of steps a search loop may take.

    Parameters
    ----------
    step_model : StepModel
        The step model; its ``max_output_length`` (when it has one) caps every limit.
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source token ids, right-padded with ``step_model.pad_id``.
    config : DecodeConfig
        Supplies ``max_length_offset``, ``max_length`` and ``min_length``.
    prefixes : TargetPrefixes or None
        The sentences' forced target prefixes.

    Returns
    -------
    max_lengths : torch.Tensor, shape (batch,), int64
        The most output tokens (EOS excluded) each sentence may get:
        :func:`~transformer.decoding.search.output_length_limits`, raised for prefixes
        (:func:`raise_limits_for_prefixes`).
    max_steps : int
        The largest of ``max_lengths``: the loop's step count and the width of its output table.

    Notes
    -----
    Greedy search and beam search both take their limits from here, so beam search of size 1 stops where
    greedy search does. ``max_steps`` is read back to the host once, before the loop, and never inside it.
    """
    position_limit = getattr(step_model, "max_output_length", None)
    max_lengths = output_length_limits(src_tokens, step_model.pad_id, config, position_limit)  # (batch,)
    max_lengths = raise_limits_for_prefixes(max_lengths, prefixes, position_limit)
    return max_lengths, int(max_lengths.max())


def forbid_repeated_ngrams(step_log_probs: Tensor, history: Tensor, ngram_size: int) -> Tensor:
    """Forbid every next token that would repeat an n-gram already in the hypothesis.

    Parameters
    ----------
    step_log_probs : torch.Tensor, shape (rows, vocab_size), float32
        Next-token log-probabilities.
    history : torch.Tensor, shape (rows, step), int64
        Tokens generated so far by each row.
    ngram_size : int
        n (at least 1); 1 forbids every token already generated.

    Returns
    -------
    torch.Tensor, shape (rows, vocab_size), float32
        A copy with ``-inf`` for the forbidden tokens.

    Notes
    -----
    The last ``n - 1`` tokens are compared with every earlier window of ``n - 1`` tokens; the token that
    followed a matching window is forbidden (fairseq's ``--no-repeat-ngram-size``). Vectorised over rows
    and windows, with no read back to the host. Forbidden tokens are counted with ``scatter_add`` rather than
    scattered as booleans, because several windows may name one token and a scatter of mixed True/False
    values to one index keeps an arbitrary one.
    """
    step = history.size(1)
    if step < ngram_size:
        return step_log_probs
    windows = history.unfold(1, ngram_size, 1)  # (rows, num_windows, ngram_size)
    last = history[:, step - ngram_size + 1 :]  # (rows, ngram_size - 1)
    matches = (windows[:, :, :-1] == last[:, None, :]).all(dim=2)  # (rows, num_windows)
    counts = torch.zeros_like(step_log_probs).scatter_add_(
        1, windows[:, :, -1], matches.to(step_log_probs.dtype)
    )
    return step_log_probs.masked_fill(counts > 0, float("-inf"))


def force_prefix(
    step_log_probs: Tensor, model_log_probs: Tensor, prefixes: TargetPrefixes, step: int
) -> Tensor:
    """Allow only the prefix's token in rows whose prefix is not yet complete.

    Parameters
    ----------
    step_log_probs : torch.Tensor, shape (rows, vocab_size), float32
        Constrained log-probabilities.
    model_log_probs : torch.Tensor, shape (rows, vocab_size), float32
        The model's own log-probabilities, which forced tokens keep.
    prefixes : TargetPrefixes
        One prefix per row.
    step : int
        Index of the token being chosen.

    Returns
    -------
    torch.Tensor, shape (rows, vocab_size), float32
        ``step_log_probs`` where the prefix is complete; elsewhere ``-inf`` except the forced token, which
        has its model log-probability.

    Notes
    -----
    Forcing overrides the other constraints: a prefix that repeats an n-gram or is shorter than
    ``min_length`` is still taken as given.
    """
    if step >= prefixes.tokens.size(1):
        return step_log_probs
    forced_tokens = prefixes.tokens[:, step : step + 1]  # (rows, 1)
    forced = torch.full_like(step_log_probs, float("-inf"))
    forced.scatter_(1, forced_tokens, model_log_probs.gather(1, forced_tokens))
    return torch.where((prefixes.lengths > step)[:, None], forced, step_log_probs)


def constrain_step(
    model_log_probs: Tensor,
    step: int,
    config: DecodeConfig,
    special_ids: Tensor,
    history: Tensor | None,
    prefixes: TargetPrefixes | None,
) -> Tensor:
    """Apply every constraint to one step's log-probabilities.

    Parameters
    ----------
    model_log_probs : torch.Tensor, shape (rows, vocab_size), float32
        The step model's log-probabilities.
    step : int
        Index of the token being chosen (0 for the first).
    config : DecodeConfig
        Supplies ``min_length`` and ``no_repeat_ngram``.
    special_ids : torch.Tensor, shape (3,), int64
        ``pad_id``, ``bos_id`` and ``eos_id``.
    history : torch.Tensor of shape (rows, step), int64, or None
        Tokens generated so far per row; read only with ``no_repeat_ngram``, so a search may pass None
        without it (gathering the history every step would cost a copy for nothing).
    prefixes : TargetPrefixes or None
        One prefix per row, or None.

    Returns
    -------
    torch.Tensor, shape (rows, vocab_size), float32
        The log-probabilities with forbidden tokens at ``-inf``; never renormalised. Always a new tensor
        (``model_log_probs`` is left as it is), which greedy search adds its running sums into.

    Notes
    -----
    The order is in the module docstring: forcing comes last so that it wins.
    """
    step_log_probs = forbid_tokens(model_log_probs, step, config, special_ids)
    if config.no_repeat_ngram:
        if history is None:
            raise ValueError("no_repeat_ngram needs the rows' token history")
        step_log_probs = forbid_repeated_ngrams(step_log_probs, history, config.no_repeat_ngram)
    if prefixes is not None:
        step_log_probs = force_prefix(step_log_probs, model_log_probs, prefixes, step)
    return step_log_probs
