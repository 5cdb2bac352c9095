"""Turn sentence pairs into token ids and drop the pairs training cannot use.

Pairs with an empty side or longer than ``max_len`` tokens are dropped and counted in a :class:`FilterReport`,
never silently (:func:`encode_corpus`). :class:`EncodedCorpus` holds the kept ids in memory;
:class:`ParallelCorpus` is what batching reads from it or from a token store.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from transformer.data.pipeline.special_tokens import EOS_ID
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.data.pipeline.tokenizer import Tokenizer


@dataclass(frozen=True)
class FilterReport:
    """How many sentence pairs :func:`encode_corpus` kept and why it dropped the others.

    Parameters
    ----------
    kept : int
        Pairs kept.
    dropped_empty : int
        Pairs with a side that is empty (or encodes to no tokens).
    dropped_too_long : int
        Pairs with a side longer than ``max_len`` tokens, EOS included.
    max_len : int or None
        The length limit that was applied, for :meth:`describe`.

    Notes
    -----
    Every input pair lands in exactly one count, so ``total`` equals the number of pairs given to
    :func:`encode_corpus`: a drop can be seen in the log, never lost.
    """

    kept: int
    dropped_empty: int
    dropped_too_long: int
    max_len: int | None = None

    @property
    def total(self) -> int:
        """Number of pairs before filtering.

        Returns
        -------
        int
            ``kept + dropped_empty + dropped_too_long``.

        Notes
        -----
        Derived rather than stored, so a report cannot hold a total that disagrees with its counts.
        """
        return self.kept + self.dropped_empty + self.dropped_too_long

    def describe(self) -> str:
        """Summarize the filter in one line for logs.

        Returns
        -------
        str
            E.g. "kept 28990 of 29000 pairs; dropped 2 with an empty side, 8 longer than 100 tokens".

        Notes
        -----
        The library never prints; the caller logs this.
        """
        limit = f"{self.max_len} tokens" if self.max_len is not None else "max_len"
        return (
            f"kept {self.kept} of {self.total} pairs; dropped {self.dropped_empty} with an empty side, "
            f"{self.dropped_too_long} longer than {limit}"
        )


@dataclass
class EncodedCorpus:
    """Token ids of the sentence pairs kept for training or validation.

    Parameters
    ----------
    source : list[list[int]]
        Source ids per pair, each ending with ``EOS_ID``.
    target : list[list[int]]
        Target ids per pair, without BOS or EOS (:func:`transformer.data.pipeline.batch.collate` adds them).
    report : FilterReport
        What the length and emptiness filter kept and dropped.
    pair_indices : list[int] or None
        For each kept pair, its position in the pairs given to :func:`encode_corpus`, e.g. to find
        the reference text of a validation sentence; None when unknown.

    Notes
    -----
    The two sides are stored asymmetrically on purpose: the source needs only EOS, while the target becomes
    two sequences at collation (start token + target as decoder input, target + EOS as output, one position
    apart), so it is kept bare. ``source_lengths`` and ``target_lengths`` are what
    :class:`transformer.data.pipeline.token_batch_sampler.TokenBatchSampler` takes.
    """

    source: list[list[int]]
    target: list[list[int]]
    report: FilterReport
    pair_indices: list[int] | None = None

    def __post_init__(self) -> None:
        if len(self.source) != len(self.target):
            raise ValueError(
                f"EncodedCorpus: {len(self.source)} source sequences but {len(self.target)} target sequences"
            )
        if self.pair_indices is not None and len(self.pair_indices) != len(self.source):
            raise ValueError(
                f"EncodedCorpus: {len(self.pair_indices)} pair_indices for {len(self.source)} pairs"
            )

    def __len__(self) -> int:
        return len(self.source)

    @property
    def source_lengths(self) -> np.ndarray:
        """Source length of each pair, EOS included.

        Returns
        -------
        numpy.ndarray, shape (num_pairs,), int64
            ``len(source[i])`` for each pair ``i``.

        Notes
        -----
        Computed on each access (the lists may still be appended to); pass it once to
        :class:`~transformer.data.pipeline.token_batch_sampler.TokenBatchSampler` rather than reading it per batch.
        """
        return np.fromiter((len(ids) for ids in self.source), dtype=np.int64, count=len(self.source))

    @property
    def target_lengths(self) -> np.ndarray:
        """Target length of each pair, without BOS or EOS.

        Returns
        -------
        numpy.ndarray, shape (num_pairs,), int64
            ``len(target[i])`` for each pair ``i``.

        Notes
        -----
        One less than the decoder's sequence length: collation adds BOS to the decoder input and EOS to the
        output, so the batch sampler budgets ``target_lengths + 1`` tokens per pair.
        """
        return np.fromiter((len(ids) for ids in self.target), dtype=np.int64, count=len(self.target))


class ParallelCorpus(Protocol):
    """What batching and training read from a corpus of encoded pairs, wherever the ids live.

    Notes
    -----
    :class:`EncodedCorpus` holds the ids as Python lists; :class:`transformer.data.pipeline.stored_corpus.StoredCorpus`
    reads them from a memory-mapped token store. :func:`transformer.data.pipeline.batch.collate` reads
    ``source[i]`` and ``target[i]`` (sequences of ints: source ending with EOS, target bare), and
    :class:`transformer.data.pipeline.token_batch_sampler.TokenBatchSampler` the two length arrays.
    """

    def __len__(self) -> int: ...

    @property
    def source(self) -> Sequence[Sequence[int]]:
        """Source ids per pair, each ending with EOS.

        Returns
        -------
        Sequence[Sequence[int]]
            Indexable by pair.

        Notes
        -----
        Read one pair at a time by collation.
        """
        ...

    @property
    def target(self) -> Sequence[Sequence[int]]:
        """Target ids per pair, without BOS or EOS.

        Returns
        -------
        Sequence[Sequence[int]]
            Indexable by pair.

        Notes
        -----
        Read one pair at a time by collation.
        """
        ...

    @property
    def source_lengths(self) -> np.ndarray:
        """Source length of each pair, EOS included.

        Returns
        -------
        numpy.ndarray, shape (num_pairs,), int64
            One length per pair.

        Notes
        -----
        Passed once to the batch sampler.
        """
        ...

    @property
    def target_lengths(self) -> np.ndarray:
        """Target length of each pair, without BOS or EOS.

        Returns
        -------
        numpy.ndarray, shape (num_pairs,), int64
            One length per pair.

        Notes
        -----
        Passed once to the batch sampler.
        """
        ...

    @property
    def report(self) -> FilterReport:
        """What the length and emptiness filter kept and dropped.

        Returns
        -------
        FilterReport
            The counts, for the log.

        Notes
        -----
        A store keeps the counts of the encoding that built it.
        """
        ...


def encode_corpus(
    pairs: Sequence[tuple[str, str]], tokenizer: TextTokenizer, max_len: int, eos_id: int = EOS_ID
) -> EncodedCorpus:
    """Tokenize sentence pairs, dropping those with an empty side or longer than ``max_len``.

    Parameters
    ----------
    pairs : Sequence[tuple[str, str]]
        (source, target) sentences, e.g. from
        :func:`~transformer.data.pipeline.text_files.read_parallel_files`.
    tokenizer : TextTokenizer
        The joint vocabulary (or a converted model's source/target vocabularies).
    max_len : int
        Longest sequence kept, in tokens, counting the EOS each side gets (the source stores it;
        the target gets it, or BOS, at collation).
    eos_id : int
        End-of-sentence id appended to each source (this project's tokenizer: 2).

    Returns
    -------
    EncodedCorpus
        Ids of the kept pairs in input order, with a :class:`FilterReport` of the drops.

    Raises
    ------
    ValueError
        If ``max_len < 2`` or if no pair survives, quoting the report.

    Notes
    -----
    Over-long pairs are dropped, not truncated: a truncated target would teach the model to stop mid-sentence
    and a truncated source would no longer match its translation.
    """
    if max_len < 2:
        raise ValueError(f"encode_corpus: max_len={max_len} must be at least 2 (one token plus EOS)")
    if isinstance(tokenizer, Tokenizer):  # one batched call into SentencePiece per side
        source_ids = tokenizer.encode_batch([source for source, _ in pairs])
        target_ids = tokenizer.encode_batch([target for _, target in pairs])
    else:
        source_ids = [tokenizer.encode(source) for source, _ in pairs]
        target_ids = [tokenizer.encode_target(target) for _, target in pairs]
    corpus = EncodedCorpus(source=[], target=[], report=FilterReport(0, 0, 0, max_len), pair_indices=[])
    dropped_empty = dropped_too_long = 0
    for pair_index, (source, target) in enumerate(zip(source_ids, target_ids, strict=True)):
        if not source or not target:
            dropped_empty += 1
        elif len(source) + 1 > max_len or len(target) + 1 > max_len:
            dropped_too_long += 1
        else:
            corpus.source.append([*source, eos_id])
            corpus.target.append(target)
            corpus.pair_indices.append(pair_index)  # type: ignore[union-attr]
    corpus.report = FilterReport(len(corpus.source), dropped_empty, dropped_too_long, max_len)
    if not corpus.source:
        raise ValueError(f"encode_corpus: no sentence pair is left: {corpus.report.describe()}")
    return corpus
