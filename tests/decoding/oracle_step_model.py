"""An oracle step model: next-token probabilities from hand-set tables, so tests know every score."""

import itertools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

PAD, BOS, EOS = 0, 1, 2
A, B, C = 3, 4, 5  # the "words"
VOCAB_SIZE = 6

Table = dict[tuple[int, ...], dict[int, float]]


@dataclass
class TableState:
    table_ids: list[int]
    prefixes: list[tuple[int, ...]]


class TableStepModel:
    """Implements the StepModel protocol from probability tables keyed by the generated prefix.

    Source sentence ``[A + k, ..., EOS, PAD...]`` is decoded with ``tables[k]``. A prefix missing from its
    table is followed by EOS for sure; a token missing from a distribution has probability 0.
    """

    pad_id, bos_id, eos_id = PAD, BOS, EOS

    def __init__(self, *tables: Table) -> None:
        self.tables = tables
        self.rows_per_step: list[int] = []

    def start(self, src_tokens: Tensor) -> TableState:
        table_ids = (src_tokens[:, 0] - A).tolist()
        return TableState(table_ids, [() for _ in table_ids])

    def log_probs(self, state: TableState, last_tokens: Tensor) -> Tensor:
        self.rows_per_step.append(len(last_tokens))
        rows = []
        for row, token in enumerate(last_tokens.tolist()):
            if token != BOS:
                state.prefixes[row] = (*state.prefixes[row], token)
            distribution = self.tables[state.table_ids[row]].get(state.prefixes[row], {EOS: 1.0})
            probabilities = [distribution.get(token_id, 0.0) for token_id in range(VOCAB_SIZE)]
            rows.append([math.log(p) if p > 0 else -math.inf for p in probabilities])
        return torch.tensor(rows, dtype=torch.float32)

    def reorder(self, state: TableState, row_indices: Tensor) -> None:
        indices = row_indices.tolist()
        state.table_ids = [state.table_ids[i] for i in indices]
        state.prefixes = [state.prefixes[i] for i in indices]


def oracle_sources(*table_ids: int, lengths: tuple[int, ...] | None = None) -> Tensor:
    """Source batch that selects ``tables[k]`` per row; row i has ``lengths[i]`` real tokens (EOS last)."""
    lengths = lengths or (2,) * len(table_ids)
    width = max(lengths)
    rows = [[A + k] * (n - 1) + [EOS] + [PAD] * (width - n) for k, n in zip(table_ids, lengths, strict=True)]
    return torch.tensor(rows)


def log(*probabilities: float) -> float:
    """Log of a product of probabilities, for expected values written by hand."""
    return sum(math.log(p) for p in probabilities)


def gnmt_penalty(num_steps: int, alpha: float) -> float:
    return ((5 + num_steps) / 6) ** alpha


def random_tables(seed: int, num_tables: int, max_prefix_len: int) -> list[Table]:
    """Random next-token distributions over EOS, A, B and C after every prefix of up to ``max_prefix_len``.

    Longer prefixes are followed by EOS for sure (see :class:`TableStepModel`), so hypotheses end anywhere
    from the first step to step ``max_prefix_len + 1``: sentences of a batch finish at different steps.
    """
    generator = torch.Generator().manual_seed(seed)
    tables = []
    for _ in range(num_tables):
        table: Table = {}
        for prefix_len in range(max_prefix_len + 1):
            for prefix in itertools.product((A, B, C), repeat=prefix_len):
                weights = torch.rand(4, generator=generator) + 0.05
                table[prefix] = dict(zip((EOS, A, B, C), (weights / weights.sum()).tolist(), strict=True))
        tables.append(table)
    return tables
