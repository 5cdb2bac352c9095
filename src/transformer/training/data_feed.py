"""What the trainer reads: each process's groups of training batches, and its shard of the validation batches.

Batches are cut by :class:`~transformer.data.pipeline.token_batch_sampler.TokenBatchSampler` from (seed, epoch) alone, identically
on every process, and each process takes its own shard; the position in the epoch lives in the training state,
so a resumed run reads exactly the batches an uninterrupted one would have.
"""

from collections.abc import Iterator, Sequence

import numpy as np

from transformer.architectures import ModelConfig
from transformer.config.train import TrainConfig
from transformer.data.pipeline.batch import Batch, collate
from transformer.data.pipeline.dataset import ParallelCorpus
from transformer.data.pipeline.sharding import shard
from transformer.data.pipeline.token_batch_sampler import TokenBatchSampler
from transformer.data.prepare import TrainingData
from transformer.training.checkpoint import TrainerState
from transformer.training.distributed import DistributedContext


class TrainingFeed:
    """Batches for one process of a run, on its device, padded with the model's special ids.

    Parameters
    ----------
    data : TrainingData
        The encoded training (and validation) corpora.
    recipe : TrainConfig
        ``max_tokens``, ``accumulate``, ``max_epochs`` and ``seed``.
    model_config : ModelConfig
        Where the pad, start and end-of-sentence ids come from.
    context : DistributedContext
        Rank, world size and device.

    Notes
    -----
    Batches are padded with the same ids decoding and perplexity use, so training, scoring and search see
    the same inputs; :func:`~transformer.data.pipeline.batch.collate` is looked up at each call (a test wraps it).
    """

    def __init__(
        self, data: TrainingData, recipe: TrainConfig, model_config: ModelConfig, context: DistributedContext
    ) -> None:
        self.data = data
        self.recipe = recipe
        self.model_config = model_config
        self.context = context
        self.sampler = TokenBatchSampler(
            data.train.source_lengths, data.train.target_lengths, recipe.max_tokens, seed=recipe.seed
        )

    def batch_groups(self, state: TrainerState) -> Iterator[list[Batch]]:
        """Yield the groups of batches of one optimizer step each, from the state's position on.

        Parameters
        ----------
        state : TrainerState
            Its ``epoch`` and ``batches_done_in_epoch`` say where to start, and are advanced as groups are
            yielded (so a checkpoint written after a step records the position after it).

        Returns
        -------
        Iterator[list of Batch]
            Groups of ``recipe.accumulate`` batches (fewer at an epoch's end), until ``max_epochs``.

        Notes
        -----
        Each process takes its shard of the epoch's batches (:func:`~transformer.data.pipeline.sharding.shard`), so N
        processes step through the epoch N times faster and stay in step with each other.
        """
        while self.recipe.max_epochs is None or state.epoch < self.recipe.max_epochs:
            batches = shard(
                self.sampler.batch_index_arrays(state.epoch), self.context.rank, self.context.world_size
            )
            position = state.batches_done_in_epoch
            while position < len(batches):
                indices = batches[position : position + self.recipe.accumulate]
                position += len(indices)
                state.batches_done_in_epoch = position
                yield [self.collate(batch, self.data.train) for batch in indices]
            state.epoch += 1
            state.batches_done_in_epoch = 0

    def validation_batches(self) -> Iterator[Batch] | None:
        """Return this process's shard of the validation batches, in a fixed length-sorted order.

        Returns
        -------
        Iterator[Batch] or None
            The batches, built as they are read; None when the run has no validation set.

        Notes
        -----
        Cut with the training ``max_tokens`` but without shuffling, so every validation pass (and every
        resumed run) sees the same batches; the caller sums the losses over processes.
        """
        valid = self.data.valid
        if valid is None:
            return None
        sampler = TokenBatchSampler(
            valid.source_lengths, valid.target_lengths, self.recipe.max_tokens, shuffle=False
        )
        own_shard = sampler.batches(0)[self.context.rank :: self.context.world_size]
        return (self.collate(indices, valid) for indices in own_shard)

    def collate(self, indices: Sequence[int] | np.ndarray, corpus: ParallelCorpus) -> Batch:
        """Pad one batch with the model's special ids and move it to the device.

        Parameters
        ----------
        indices : sequence of int or numpy.ndarray
            Pair indices into ``corpus``.
        corpus : ParallelCorpus
            The training or validation corpus (in memory or a token store).

        Returns
        -------
        Batch
            Source, decoder input and decoder output tokens, on ``context.device``.

        Notes
        -----
        The decoder input starts with the model's ``start_id`` (BOS, or an imported model's decoder start)
        and the output ends with ``eos_id``: teacher forcing shifted by one position (section 3.1).
        """
        model = self.model_config
        return collate(indices, corpus, model.pad_id, model.start_id, model.eos_id).to(self.context.device)
