"""One padded batch of sentence pairs, and how a batch of corpus pairs becomes one.

:func:`collate` takes the pair indices of one batch (as
:class:`~transformer.data.pipeline.token_batch_sampler.TokenBatchSampler` cuts them) and builds a :class:`Batch`:
the sources ending with EOS, the decoder input (BOS + target) and the decoder output (target + EOS), each
right-padded into one id tensor, with the token counts the loss and the logs use.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from transformer.data.pipeline.dataset import ParallelCorpus
from transformer.data.pipeline.special_tokens import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Batch:
    """One padded batch of sentence pairs, ready for the model and the loss.

    Parameters
    ----------
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source ids ending with EOS, right-padded with the pad id.
    tgt_input : torch.Tensor, shape (batch, tgt_len), int64
        BOS followed by the target ids: the decoder input (teacher forcing), right-padded.
    tgt_output : torch.Tensor, shape (batch, tgt_len), int64
        The target ids followed by EOS: what the decoder must predict at each position, right-padded.
    num_source_tokens : int
        Non-pad cells of ``src_tokens``.
    num_target_tokens : int
        Non-pad cells of ``tgt_output``: the number of tokens the loss averages over.
    padding_ratio : float
        Pad cells over all cells of ``src_tokens`` and ``tgt_output`` together.
    indices : list[int]
        Position in the corpus of each row.

    Notes
    -----
    ``tgt_input[:, 1:]`` equals ``tgt_output[:, :-1]`` wherever both are real tokens.
    """

    src_tokens: Tensor
    tgt_input: Tensor
    tgt_output: Tensor
    num_source_tokens: int
    num_target_tokens: int
    padding_ratio: float
    indices: list[int]

    def __len__(self) -> int:
        return len(self.indices)

    def to(self, device: torch.device | str) -> "Batch":
        """Move the tensors to a device.

        Parameters
        ----------
        device : torch.device or str
            The destination, e.g. "cuda".

        Returns
        -------
        Batch
            A batch with the same counts and tensors on ``device``.

        Notes
        -----
        Copies to a CUDA device are non-blocking, which overlaps them with compute when the batch
        is in pinned memory (:meth:`pin_memory`); other copies are synchronous so the result is
        safe to read at once.
        """
        non_blocking = torch.device(device).type == "cuda"
        return Batch(
            src_tokens=self.src_tokens.to(device, non_blocking=non_blocking),
            tgt_input=self.tgt_input.to(device, non_blocking=non_blocking),
            tgt_output=self.tgt_output.to(device, non_blocking=non_blocking),
            num_source_tokens=self.num_source_tokens,
            num_target_tokens=self.num_target_tokens,
            padding_ratio=self.padding_ratio,
            indices=self.indices,
        )

    def pin_memory(self) -> "Batch":
        """Copy the tensors to page-locked memory so :meth:`to` can copy to the GPU asynchronously.

        Returns
        -------
        Batch
            A batch with pinned tensors.

        Notes
        -----
        ``torch.utils.data.DataLoader(pin_memory=True)`` calls this on custom batch types.
        """
        return Batch(
            src_tokens=self.src_tokens.pin_memory(),
            tgt_input=self.tgt_input.pin_memory(),
            tgt_output=self.tgt_output.pin_memory(),
            num_source_tokens=self.num_source_tokens,
            num_target_tokens=self.num_target_tokens,
            padding_ratio=self.padding_ratio,
            indices=self.indices,
        )


def pad_sequences(sequences: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    """Stack id sequences into one right-padded tensor.

    Parameters
    ----------
    sequences : Sequence[Sequence[int]]
        Token ids per row; at least one row.
    pad_id : int
        Fill value after each row's last id.

    Returns
    -------
    torch.Tensor, shape (len(sequences), longest), int64
        Row i holds ``sequences[i]`` followed by padding.

    Notes
    -----
    Builds the array in numpy, then shares its memory with the tensor.
    """
    longest = max(len(ids) for ids in sequences)
    padded = np.full((len(sequences), longest), pad_id, dtype=np.int64)
    for row, ids in enumerate(sequences):
        padded[row, : len(ids)] = ids
    return torch.from_numpy(padded)


def collate(
    indices: Sequence[int] | np.ndarray,
    corpus: ParallelCorpus,
    pad_id: int = PAD_ID,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> Batch:
    """Build the padded tensors of one batch of corpus pairs.

    Parameters
    ----------
    indices : Sequence[int] or numpy.ndarray, shape (batch_size,)
        Positions in ``corpus`` of the pairs, e.g. one batch of
        :meth:`~transformer.data.pipeline.token_batch_sampler.TokenBatchSampler.batches` or
        :meth:`~transformer.data.pipeline.token_batch_sampler.TokenBatchSampler.batch_index_arrays`.
    corpus : ParallelCorpus
        Source ids (ending with EOS) and target ids (without BOS/EOS): an
        :class:`~transformer.data.pipeline.dataset.EncodedCorpus` or a store-backed
        :class:`~transformer.data.pipeline.stored_corpus.StoredCorpus`.
    pad_id, bos_id, eos_id : int
        Special ids; the defaults are the tokenizer's.

    Returns
    -------
    Batch
        ``src_tokens``, ``tgt_input`` = BOS + target and ``tgt_output`` = target + EOS, right-padded.

    Raises
    ------
    ValueError
        For an empty batch or an index outside the corpus, negative ones included.

    Notes
    -----
    Negative indices are refused too: Python indexing would silently pick pairs from the end of the corpus.
    """
    indices = [int(index) for index in indices]  # plain ints: Batch.indices is recorded and compared
    if not indices:
        raise ValueError("collate: the batch has no indices")
    for index in indices:
        if not 0 <= index < len(corpus):
            raise ValueError(f"collate: index {index} is outside the corpus of {len(corpus)} pairs")
    sources = [corpus.source[index] for index in indices]
    targets = [corpus.target[index] for index in indices]
    src_tokens = pad_sequences(sources, pad_id)  # (batch, src_len)
    tgt_input = pad_sequences([[bos_id, *target] for target in targets], pad_id)  # (batch, tgt_len)
    tgt_output = pad_sequences([[*target, eos_id] for target in targets], pad_id)  # (batch, tgt_len)
    num_source_tokens = sum(len(source) for source in sources)
    num_target_tokens = sum(len(target) + 1 for target in targets)
    num_cells = src_tokens.numel() + tgt_output.numel()
    return Batch(
        src_tokens=src_tokens,
        tgt_input=tgt_input,
        tgt_output=tgt_output,
        num_source_tokens=num_source_tokens,
        num_target_tokens=num_target_tokens,
        padding_ratio=1.0 - (num_source_tokens + num_target_tokens) / num_cells,
        indices=indices,
    )
