"""The training loop of section 5: token batches, Adam with warm-up, label smoothing, checkpoints.

One :class:`Trainer` serves a single process and every rank of a ``torchrun`` job alike: each rank takes its
own shard of the (identically ordered) batches, gradients are averaged by DistributedDataParallel, and losses
are normalised by the global number of target tokens, so N processes compute the same update as one process
that sees all N shards' batches (tested).
"""

import math
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from transformer.allocator import allocator_note
from transformer.architectures import build_model
from transformer.config.experiment import ExperimentConfig
from transformer.data.pipeline.batch import Batch
from transformer.data.pipeline.token_batch_sampler import BATCH_ORDER_VERSION
from transformer.data.prepare import TOKENIZER_FILE, TrainingData
from transformer.evaluation.perplexity import sum_batch_losses
from transformer.metrics_log import MetricsLog
from transformer.model.transformer import Transformer
from transformer.training.checkpoint import (
    CheckpointManager,
    TrainerState,
    TrainingCheckpoint,
    optimizer_tensors,
    restore_optimizer,
)
from transformer.training.data_feed import TrainingFeed
from transformer.training.distributed import (
    DistributedContext,
    all_reduce_sum,
    barrier,
    gather_rng_states,
)
from transformer.training.gradient_step import GradientStep
from transformer.training.interval_stats import IntervalStats
from transformer.training.measured_defaults import reconcile_tuning, tune_training_defaults, tuning_record
from transformer.training.optimizer import build_optimizer_and_schedule
from transformer.training.precision import autocast, check_precision
from transformer.training.reporting import Reporter, SilentReporter
from transformer.training.reproducibility import deterministic_algorithms
from transformer.training.result import TrainResult, raise_if_diverged, time_limit_note
from transformer.training.resume import batch_order_warning, checkpoint_to_resume, resumable_state
from transformer.training.run_clock import RunClock
from transformer.training.schedule import TimeBudget, crossed_multiple


class Trainer:
    """Train a Transformer (or the recurrent baseline) on encoded parallel data with the paper's recipe.

    Parameters
    ----------
    experiment : ExperimentConfig
        Model, data, recipe.
    run_dir : Path
        Where checkpoints (``checkpoints/``) and ``metrics.jsonl`` go.
    data : TrainingData
        Encoded corpora and tokenizer.
    context : DistributedContext
        Rank, world size and device (a single CPU process by default).
    reporter : Reporter or None
        Progress sink on rank 0.

    Notes
    -----
    Adam(0.9, 0.98, 1e-9) with the learning rate of Eq. (3); label smoothing 0.1; gradient accumulation over
    ``train.accumulate`` batches. ``precision: auto``, ``threads: null`` and ``attention_implementation:
    auto`` are resolved by measurement on the machine at hand (``transformer.autotune``), once per machine
    and model shape, and each decision is reported in one line. The model is whatever ``experiment.model``
    describes (:func:`transformer.architectures.build_model`); everything else is the same for every
    architecture. Call :meth:`train`.
    """

    def __init__(
        self,
        experiment: ExperimentConfig,
        run_dir: Path,
        data: TrainingData,
        context: DistributedContext | None = None,
        reporter: Reporter | None = None,
    ) -> None:
        self.experiment = experiment
        self.recipe = experiment.train
        self.run_dir = run_dir
        self.data = data
        self.context = context or DistributedContext()
        self.reporter: Reporter = (
            reporter if reporter is not None and self.context.is_main else SilentReporter()
        )
        self.device = self.context.device
        check_precision(self.recipe.precision, self.device)
        self.tuning = tune_training_defaults(experiment.model, self.recipe, self.context)
        if data.tokenizer.vocab_size != experiment.model.vocab_size:
            raise ValueError(
                f"model.vocab_size={experiment.model.vocab_size} but the tokenizer {data.tokenizer.model_path} "
                f"has {data.tokenizer.vocab_size} pieces"
            )
        self._build_model()
        self._segment_start_elapsed = 0.0  # state.elapsed_seconds when this segment began (earlier segments)
        self.clock = RunClock(
            TimeBudget(60.0 * self.recipe.max_minutes, self.recipe.max_steps)
            if self.recipe.max_minutes is not None
            else None
        )
        self.optimizer, self.scheduler = build_optimizer_and_schedule(
            self.model,
            experiment.model,
            self.recipe,
            self.device,
            self.clock.clock_step if self.clock.time_budget is not None else None,
        )
        self.gradient_step = GradientStep(
            self.model,
            self.training_model,
            self.distributed_model,
            self.optimizer,
            self.scheduler,
            self.context,
            self.recipe.label_smoothing,
            experiment.model.pad_id,
            self.recipe.clip_norm,
        )
        self.precision = self.gradient_step.set_precision(self.tuning.precision or self.recipe.precision)
        self.feed = TrainingFeed(data, self.recipe, experiment.model, self.context)
        self.checkpoints = CheckpointManager(run_dir / "checkpoints", self.recipe.keep_checkpoints)
        self.state = TrainerState(
            experiment=experiment.to_dict(),
            tokenizer_fingerprint=data.tokenizer.fingerprint,
            tuning=tuning_record(self.tuning),
        )
        self._last_valid: tuple[float, float] | None = None
        self._last_valid_step = -1
        self._last_checkpoint: tuple[int, Path | None] | None = None

    def _build_model(self) -> None:
        """Initialise the model from the seed, apply the attention threshold, wrap it for DDP and compile."""
        torch.manual_seed(self.recipe.seed)
        self.model = build_model(self.experiment.model).to(self.device)
        if isinstance(self.model, Transformer) and self.tuning.explicit_max_length is not None:
            self.model.set_explicit_attention_max_length(self.tuning.explicit_max_length)
        for note in self.tuning.notes:
            self.reporter.message(note)
        allocator = allocator_note(dict(os.environ))
        if allocator is not None:
            self.reporter.message(allocator)
        self.training_model: nn.Module = self.model
        self.distributed_model: DistributedDataParallel | None = None
        if self.context.is_distributed:
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            self.distributed_model = DistributedDataParallel(self.model, device_ids=device_ids)
            self.training_model = self.distributed_model
        if self.recipe.compile:
            # The training forward only: validation, search and checkpoints use the plain model.
            self.training_model = torch.compile(self.training_model)  # type: ignore[assignment]

    def train(self, resume: bool = False, reuse_finished: bool = False) -> TrainResult:
        """Run until ``max_steps``, ``max_epochs`` or ``max_minutes``.

        Parameters
        ----------
        resume : bool
            Continue from the run directory's latest checkpoint (weights, optimizer, schedule, data position,
            random state), so the result equals an uninterrupted run's.
        reuse_finished : bool
            With ``resume``, return at once if the latest checkpoint ended the run, whatever stopped it (the
            quick start run twice). Without it, a run its time limit stopped trains for another
            ``max_minutes``.

        Returns
        -------
        TrainResult
            Steps, tokens, validation loss and perplexity, last checkpoint.

        Raises
        ------
        TrainingDivergedError
            When a loss is not finite, before anything is saved.

        Notes
        -----
        Without ``resume``, a run directory that already holds checkpoints is refused rather than overwritten.
        """
        self._load_or_refuse_existing(resume)
        metrics = (
            MetricsLog(
                self.run_dir / "metrics.jsonl",
                self.run_dir / "tensorboard" if self.recipe.tensorboard else None,
            )
            if self.context.is_main
            else None
        )
        if metrics is not None and metrics.drop_after(self.state.step):
            self.reporter.message(
                f"metrics.jsonl: dropped the records after step {self.state.step} (redone now)"
            )
        self.reporter.start(self.recipe.max_steps, self.state.step)
        try:
            finished = self.state.stop_reason if reuse_finished else None
            with deterministic_algorithms(self.recipe.deterministic, self.device):
                stop_reason = finished or self._train_loop(metrics)
            if self._last_checkpoint is not None and self._last_checkpoint[0] == self.state.step:
                # Saved at this very step (or resumed a finished run): nothing new to write.
                valid, checkpoint = self._last_valid or self.validate(), self._last_checkpoint[1]
            else:
                validated_now = self._last_valid_step == self.state.step and self._last_valid is not None
                valid = self._last_valid if validated_now else self._validate_and_log(metrics)
                checkpoint = self._save_checkpoint(valid[0] if valid else None)
        finally:
            self.reporter.close()
            if metrics is not None:
                metrics.close()
        schedule_note = ""
        if stop_reason == "max_minutes":
            schedule_note = time_limit_note(
                self.state.step, self.recipe, float(self.scheduler.get_last_lr()[0])
            )
        if schedule_note:
            self.reporter.message(schedule_note)
        return TrainResult(
            step=self.state.step,
            tokens_seen=self.state.tokens_seen,
            elapsed_seconds=self.state.elapsed_seconds,
            valid_loss=valid[0] if valid else None,
            valid_perplexity=valid[1] if valid else None,
            best_valid_loss=self.state.best_valid_loss,
            checkpoint=checkpoint,
            stop_reason=stop_reason,
            schedule_note=schedule_note,
        )

    def _load_or_refuse_existing(self, resume: bool) -> None:
        checkpoint = checkpoint_to_resume(self.checkpoints, resume, self.run_dir, self.reporter)
        if checkpoint is not None:
            self.restore(checkpoint)
            self._last_checkpoint = (self.state.step, checkpoint.path)
            self.reporter.message(f"resumed from {checkpoint.path} at step {self.state.step}")

    def restore(self, checkpoint: TrainingCheckpoint) -> None:
        """Load weights, optimizer, schedule, data position and random state from a checkpoint.

        Parameters
        ----------
        checkpoint : TrainingCheckpoint
            A full training checkpoint of this run.

        Returns
        -------
        None

        Notes
        -----
        Refuses (CheckpointError) a weights-only checkpoint and one whose model config or tokenizer differs
        from this run's. Each rank restores its own saved random state (``rng.cpu.rank{r}``), so dropout
        continues as in an uninterrupted run; the data position is per process too (each rank's shard of the
        epoch), so a checkpoint saved by another number of processes is refused (CheckpointError naming both
        numbers) rather than resumed with shards that would skip or repeat batches.
        """
        state = resumable_state(
            checkpoint,
            self.experiment.model,
            self.context.world_size,
            self.data.tokenizer.fingerprint,
            self.data.tokenizer.model_path,
        )
        self._adopt_recorded_tuning(state.tuning)
        self.model.load_state_dict(
            {name: tensor.to(self.device) for name, tensor in checkpoint.weights.items()}, strict=False
        )
        restore_optimizer(self.optimizer, checkpoint.optimizer_tensors, state.param_groups)
        self.scheduler.load_state_dict(state.scheduler)
        if self.gradient_step.grad_scaler is not None and state.grad_scaler:
            self.gradient_step.grad_scaler.load_state_dict(state.grad_scaler)
        torch.set_rng_state(checkpoint.optimizer_tensors[f"rng.cpu.rank{self.context.rank}"])
        cuda_key = f"rng.cuda.rank{self.context.rank}"
        if self.device.type == "cuda" and cuda_key in checkpoint.optimizer_tensors:
            torch.cuda.set_rng_state(checkpoint.optimizer_tensors[cuda_key], self.device)
        warning = batch_order_warning(state, checkpoint)
        if warning is not None:
            self.reporter.message(warning)
        self.state = state
        self.state.tuning = tuning_record(self.tuning)
        self.state.batch_order = BATCH_ORDER_VERSION

    def _adopt_recorded_tuning(self, recorded: dict[str, Any] | None) -> None:
        """Apply the automatic defaults the run measured at its start, where this process measured others."""
        adopted = reconcile_tuning(recorded, self.tuning)
        self.tuning = adopted.tuning
        if self.device.type == "cpu" and self.tuning.threads is not None:
            torch.set_num_threads(self.tuning.threads)
        self.precision = self.gradient_step.set_precision(self.tuning.precision or self.recipe.precision)
        if isinstance(self.model, Transformer) and self.tuning.explicit_max_length is not None:
            self.model.set_explicit_attention_max_length(self.tuning.explicit_max_length)
        for note in adopted.notes:
            self.reporter.message(note)

    def _train_loop(self, metrics: MetricsLog | None) -> str:
        reason = self._stop_reason()
        if reason:  # a resumed run that had already finished
            return reason
        interval = IntervalStats()
        self.state.stop_reason = None
        self._segment_start_elapsed = self.state.elapsed_seconds
        self.clock.start_segment(self.state.step)
        try:
            for group in self.feed.batch_groups(self.state):
                losses, tokens = self.gradient_step.run(group)
                self.state.step += 1
                self.clock.step_done()
                self.state.tokens_seen += tokens
                self.state.elapsed_seconds = self._segment_start_elapsed + self.clock.segment_seconds()
                interval.add(losses, tokens, sum(batch.padding_ratio for batch in group) / len(group))
                reason = self._stop_reason()
                self.state.stop_reason = reason or None  # saved with a checkpoint of this step
                interval = self._end_step(interval, metrics, final=bool(reason))
                if reason:
                    return reason
            self._settle_losses(interval)
            self.state.stop_reason = "max_epochs"
            return "max_epochs"
        finally:
            self.clock.end_segment()

    def _end_step(self, interval: IntervalStats, metrics: MetricsLog | None, final: bool) -> IntervalStats:
        """Log, validate and save as the step number says; return the interval the next step adds to."""
        step = self.state.step
        previous, position = self._advance_position()
        # The last step is always validated and saved: a checkpoint written there without a validation loss
        # could not become the best, and the run would report an older loss as its final one.
        validate = final or crossed_multiple(previous, position, self.recipe.validate_every)
        save = final or crossed_multiple(previous, position, self.recipe.checkpoint_every)
        log = step % self.recipe.log_every == 0
        if log or validate or save:
            # Losses stay on the device between these points: reading them back is a host sync.
            self._settle_losses(interval)
        if log:
            self._log_train(interval, metrics)
            interval = IntervalStats()
        valid = self._validate_and_log(metrics) if validate else None
        if save:
            self._save_checkpoint(valid[0] if valid else None)
        return interval

    def _advance_position(self) -> tuple[float, float]:
        """Move the schedule's position to this step (or the clock's, if it leads); return before and after."""
        previous, position, clock_took_the_lead = self.clock.advance(self.state.step)
        if clock_took_the_lead:
            self.reporter.message(
                f"time budget: max_minutes={self.recipe.max_minutes} binds; from step {self.state.step} the "
                "schedule, validation and checkpoints follow the clock (warm-up and cool-down keep their "
                "shares of the time)"
            )
        return previous, position

    def _stop_reason(self) -> str:
        if self.state.step >= self.recipe.max_steps:
            return "max_steps"
        minutes = self.recipe.max_minutes
        if minutes is not None and self.clock.segment_seconds() >= 60 * minutes:
            return "max_minutes"
        return ""

    def train_step(self, group: list[Batch]) -> tuple[float, float, int]:
        """Take one optimizer step over a group of batches whose gradients are accumulated.

        Parameters
        ----------
        group : list of Batch
            ``train.accumulate`` batches (fewer at the end of an epoch), already on the device.

        Returns
        -------
        loss_sum : float
            Label-smoothed loss summed over the target tokens of all processes.
        nll_sum : float
            Negative log-likelihood summed likewise.
        num_tokens : int
            Target tokens in the group, over all processes.

        Raises
        ------
        TrainingDivergedError
            If the loss is not finite (after the update, which is then never saved).

        Notes
        -----
        Benchmarks call this to time exactly what training runs; the training loop itself leaves the losses on
        the device and reads them back only at log, validation and checkpoint steps.
        """
        losses, tokens = self.gradient_step.run(group)
        totals = all_reduce_sum(losses, self.context).cpu()
        raise_if_diverged(totals[None, :], self.state.step + 1, self.checkpoints.latest())
        return float(totals[0]), float(totals[1]), tokens

    def _settle_losses(self, interval: IntervalStats) -> None:
        """Read the interval's pending step losses back (one sync), summed over ranks, and check them."""
        pending = interval.take_pending()
        if pending is None:
            return
        per_step = all_reduce_sum(pending, self.context).cpu()  # (steps, 2): loss and nll sums
        first_step = self.state.step - per_step.size(0) + 1
        raise_if_diverged(per_step, first_step, self.checkpoints.latest())
        interval.loss_sum += float(per_step[:, 0].sum())
        interval.nll_sum += float(per_step[:, 1].sum())

    def validate(self) -> tuple[float, float] | None:
        """Compute the validation loss per token and the perplexity.

        Returns
        -------
        tuple of (float, float) or None
            Label-smoothed loss per target token and perplexity exp(NLL per token); None without
            validation data.

        Notes
        -----
        Every rank evaluates its shard; the sums are added over ranks. Runs in eval mode (no dropout) and in
        the training precision.
        """
        batches = self.feed.validation_batches()
        if batches is None:
            return None
        sums = sum_batch_losses(
            self.model,
            batches,
            self.recipe.label_smoothing,
            self.experiment.model.pad_id,
            forward_context=lambda: autocast(self.precision, self.device),
        )
        sums = all_reduce_sum(sums, self.context)
        tokens = max(float(sums[2]), 1.0)
        return float(sums[0]) / tokens, math.exp(min(float(sums[1]) / tokens, 100.0))

    def _validate_and_log(self, metrics: MetricsLog | None) -> tuple[float, float] | None:
        result = self.validate()
        self._last_valid, self._last_valid_step = result, self.state.step
        if result is None:
            return None
        loss, perplexity = result
        if metrics is not None:
            metrics.write(
                {"kind": "valid", "step": self.state.step, "valid_loss": loss, "valid_perplexity": perplexity}
            )
        self.reporter.message(f"step {self.state.step}: valid loss {loss:.4f}, perplexity {perplexity:.2f}")
        return result

    def _log_train(self, interval: IntervalStats, metrics: MetricsLog | None) -> None:
        record = interval.train_record(self.state, float(self.scheduler.get_last_lr()[0]))
        if metrics is not None:
            metrics.write(record)
        self.reporter.update(self.state.step, record)

    def _save_checkpoint(self, valid_loss: float | None) -> Path | None:
        self.state.valid_loss = valid_loss
        if valid_loss is not None and (
            self.state.best_valid_loss is None or valid_loss < self.state.best_valid_loss
        ):
            self.state.best_valid_loss = valid_loss
        self.state.scheduler = self.scheduler.state_dict()
        self.state.param_groups = self.optimizer.state_dict()["param_groups"]
        self.state.grad_scaler = (
            self.gradient_step.grad_scaler.state_dict()
            if self.gradient_step.grad_scaler is not None
            else None
        )
        rng = gather_rng_states(self.context)
        path = None
        if self.context.is_main:
            tensors = {**optimizer_tensors(self.optimizer), **rng}
            path = self.checkpoints.save(
                self.model,
                self.experiment.model,
                {TOKENIZER_FILE: self.data.tokenizer.serialized()},
                self.state,
                tensors,
            )
            self.reporter.message(f"saved {path}")
        barrier(self.context)
        self._last_checkpoint = (self.state.step, path)
        return path
