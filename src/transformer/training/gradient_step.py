"""One optimizer step of section 5.3: forward and backward over accumulated batches, then Adam and Eq. (3).

The step is normalised by the target tokens of all processes, so N ``torchrun`` processes compute the update
one process would compute from all N shards' batches (tested); losses stay on the device for the caller to
read back when it needs them.
"""

import contextlib

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim.lr_scheduler import LRScheduler

from transformer.data.pipeline.batch import Batch
from transformer.loss import label_smoothed_nll_loss
from transformer.training.distributed import DistributedContext, all_reduce_sum
from transformer.training.precision import autocast


class GradientStep:
    """Forward, backward and update for a group of batches whose gradients are summed (``train.accumulate``).

    Parameters
    ----------
    model : nn.Module
        The model whose parameters are updated (and clipped).
    training_model : nn.Module
        What the forward runs: ``model``, its DistributedDataParallel wrapper, or a compiled version.
    distributed_model : DistributedDataParallel or None
        The wrapper, whose gradient sync is skipped for all but the last batch of a group.
    optimizer : torch.optim.Optimizer
        Adam.
    scheduler : LRScheduler
        The learning rate of Eq. (3), stepped after every update.
    context : DistributedContext
        Rank, world size and device.
    label_smoothing : float
        eps_ls of section 5.4.
    pad_id : int
        Target padding, which the loss ignores.
    clip_norm : float or None
        Gradient norm clipping (not in the paper); None disables it.

    Notes
    -----
    ``precision`` and ``grad_scaler`` are attributes rather than arguments because a resumed run may change
    them after construction (it applies the precision its first segment measured).
    """

    def __init__(
        self,
        model: nn.Module,
        training_model: nn.Module,
        distributed_model: DistributedDataParallel | None,
        optimizer: torch.optim.Optimizer,
        scheduler: LRScheduler,
        context: DistributedContext,
        label_smoothing: float,
        pad_id: int,
        clip_norm: float | None,
    ) -> None:
        self.model = model
        self.training_model = training_model
        self.distributed_model = distributed_model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.context = context
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id
        self.clip_norm = clip_norm
        self.precision = "fp32"
        self.grad_scaler: torch.amp.GradScaler | None = None

    def run(self, group: list[Batch]) -> tuple[Tensor, int]:
        """Take the step.

        Parameters
        ----------
        group : list of Batch
            The batches of one step (fewer than ``train.accumulate`` at an epoch's end), on the device.

        Returns
        -------
        losses : torch.Tensor, shape (2,), float64
            This process's label-smoothed loss sum and NLL sum over the group, still on the device.
        global_tokens : int
            Target tokens of the step over all processes.

        Notes
        -----
        DistributedDataParallel averages gradients over processes; scaling each loss by world_size /
        global_tokens makes the update the gradient of (sum of token losses over all processes) / (all target
        tokens), as one big batch would give.
        """
        self.training_model.train()
        global_tokens = self.global_target_tokens(group)
        normaliser = self.context.world_size / global_tokens
        losses = torch.zeros(2, dtype=torch.float64, device=self.context.device)
        for index, batch in enumerate(group):
            sync = index == len(group) - 1
            with self._maybe_no_sync(sync), autocast(self.precision, self.context.device):
                logits = self.training_model(batch.src_tokens, batch.tgt_input)
            loss, nll = label_smoothed_nll_loss(logits, batch.tgt_output, self.label_smoothing, self.pad_id)
            with self._maybe_no_sync(sync):
                self._backward(loss * normaliser)
            losses += torch.stack([loss.detach(), nll.detach()]).double()
        self._update()
        return losses, global_tokens

    def set_precision(self, precision: str) -> str:
        """Compute in ``precision`` from the next step on, with a gradient scaler in fp16 only.

        Parameters
        ----------
        precision : str
            "fp32", "bf16" or "fp16".

        Returns
        -------
        str
            ``precision``, for the caller to keep.

        Notes
        -----
        fp16 keeps an existing scaler (and so its loss scale); any other precision drops it, since bf16
        and fp32 have fp32's exponent range and need no scaling.
        """
        self.precision = precision
        if precision != "fp16":
            self.grad_scaler = None
        elif self.grad_scaler is None:
            self.grad_scaler = torch.amp.GradScaler("cuda")
        return precision

    def global_target_tokens(self, group: list[Batch]) -> int:
        """Count the step's target tokens over all processes.

        Parameters
        ----------
        group : list of Batch
            This process's batches of the step.

        Returns
        -------
        int
            The sum over processes.

        Notes
        -----
        Counted on the host from the batches' own counts, so a single process makes no device sync here.
        """
        local_tokens = sum(batch.num_target_tokens for batch in group)
        if not self.context.is_distributed:
            return local_tokens
        counts = torch.tensor([local_tokens], dtype=torch.float64, device=self.context.device)
        return int(all_reduce_sum(counts, self.context).item())

    def _maybe_no_sync(self, sync: bool) -> "contextlib.AbstractContextManager[None]":
        if sync or self.distributed_model is None:
            return contextlib.nullcontext()
        return self.distributed_model.no_sync()

    def _backward(self, loss: Tensor) -> None:
        if self.grad_scaler is not None:
            self.grad_scaler.scale(loss).backward()  # type: ignore[no-untyped-call]
        else:
            loss.backward()  # type: ignore[no-untyped-call]

    def _update(self) -> None:
        if self.grad_scaler is not None:
            self.grad_scaler.unscale_(self.optimizer)
        if self.clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
        if self.grad_scaler is not None:
            self.grad_scaler.step(self.optimizer)
            self.grad_scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
