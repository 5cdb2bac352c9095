"""The training loop of section 5: token batches, Adam with warm-up, label smoothing, checkpoints.

One :class:`Trainer` serves a single process and every rank of a ``torchrun`` job alike: each rank takes its
own shard of the (identically ordered) batches, gradients are averaged by DistributedDataParallel, and losses
are normalised by the global number of target tokens, so N processes compute the same update as one process
that sees all N shards' batches (tested).
"""

import contextlib
import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor, nn
from torch import distributed as dist
from torch.nn.parallel import DistributedDataParallel

from transformer.allocator import allocator_note
from transformer.architectures import build_model, model_width
from transformer.autotune.model_tuning import ModelTuning, tune_model
from transformer.autotune.thread_probe import usable_cpus
from transformer.checkpoint import CheckpointError, describe_mismatch
from transformer.config import ExperimentConfig
from transformer.data.batching import BATCH_ORDER_VERSION, Batch, TokenBatchSampler, collate, shard
from transformer.data.dataset import ParallelCorpus
from transformer.data.prepare import TOKENIZER_FILE, TrainingData
from transformer.evaluation.perplexity import sum_batch_losses
from transformer.loss import label_smoothed_nll_loss
from transformer.model.transformer import Transformer
from transformer.training.checkpoint import (
    CheckpointManager,
    TrainerState,
    TrainingCheckpoint,
    load_training_checkpoint,
    optimizer_tensors,
    restore_optimizer,
)
from transformer.training.distributed import (
    DistributedContext,
    all_reduce_sum,
    barrier,
    broadcast_from_main,
)
from transformer.training.metrics import MetricsLog
from transformer.training.precision import autocast, check_precision
from transformer.training.reproducibility import deterministic_algorithms, reconcile_tuning, tuning_record
from transformer.training.schedule import TimeBudget, build_scheduler, crossed_multiple, scale_for_peak


class Reporter(Protocol):
    """Receives progress from the trainer (the CLI draws a progress bar with it).

    Notes
    -----
    Called on rank 0 only. The library itself never prints.
    """

    def start(self, total_steps: int, initial_step: int) -> None:
        """Announce that training begins (or resumes at ``initial_step``).

        Parameters
        ----------
        total_steps : int
            ``train.max_steps``, the step count at which the run ends if nothing else stops it first.
        initial_step : int
            Optimizer steps already done: 0 for a fresh run, the checkpoint's step after ``--resume``.

        Returns
        -------
        None

        Notes
        -----
        Called once per :meth:`Trainer.train`, after the checkpoint is restored. The autotuning notes of the
        trainer's constructor arrive through :meth:`message` before it, so :meth:`message` must work
        unstarted.
        """

    def update(self, step: int, metrics: dict[str, Any]) -> None:
        """Report the training metrics at a log step.

        Parameters
        ----------
        step : int
            The optimizer step just finished.
        metrics : dict[str, Any]
            The ``metrics.jsonl`` train record: ``train_loss``, ``train_nll``, ``learning_rate``,
            ``tokens_per_second``, ``padding_ratio``, ``tokens_seen``, ``elapsed_seconds``, ``epoch``.

        Returns
        -------
        None

        Notes
        -----
        Called every ``train.log_every`` steps, not every step: reading the losses back is a host sync the
        loop makes only then, so ``step`` can jump by more than one between calls.
        """

    def message(self, text: str) -> None:
        """Tell the user something (data statistics, validation, checkpoints).

        Parameters
        ----------
        text : str
            One line, without a trailing newline.

        Returns
        -------
        None

        Notes
        -----
        Can come before :meth:`start` (autotuning notes) and after :meth:`close` (the time-limit note of
        :meth:`Trainer.train`), so an implementation must not assume it is open.
        """

    def close(self) -> None:
        """Announce that training ended.

        Returns
        -------
        None

        Notes
        -----
        Called from a ``finally`` block, so it runs also when training raises (a diverged loss, an
        interrupt); it must not raise itself, or it would hide the original error.
        """


class SilentReporter:
    """A reporter that ignores everything (for library use and tests).

    Notes
    -----
    Satisfies the :class:`Reporter` protocol. The trainer also gives it to every rank but 0 in place of the
    caller's reporter, so a ``torchrun`` job prints each line once.
    """

    def start(self, total_steps: int, initial_step: int) -> None:
        """Ignore the start of training.

        Parameters
        ----------
        total_steps : int
            ``train.max_steps``; unused.
        initial_step : int
            Steps already done; unused.

        Returns
        -------
        None

        Notes
        -----
        Does nothing, so library use and tests write nothing to the terminal.
        """

    def update(self, step: int, metrics: dict[str, Any]) -> None:
        """Ignore a log step's metrics.

        Parameters
        ----------
        step : int
            The optimizer step; unused.
        metrics : dict[str, Any]
            The train record; unused.

        Returns
        -------
        None

        Notes
        -----
        The same record still reaches ``metrics.jsonl`` on rank 0: silencing the reporter loses nothing.
        """

    def message(self, text: str) -> None:
        """Ignore a message.

        Parameters
        ----------
        text : str
            The line; unused.

        Returns
        -------
        None

        Notes
        -----
        Warnings are dropped too, such as a damaged checkpoint skipped on resume; the time-limit note stays
        available as :attr:`TrainResult.schedule_note`.
        """

    def close(self) -> None:
        """Ignore the end of training.

        Returns
        -------
        None

        Notes
        -----
        Holds no resources, so there is nothing to release and it cannot raise.
        """


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is left untouched.

    Notes
    -----
    Raised when the losses are read back (log, validation and checkpoint steps, or every
    :meth:`Trainer.train_step`), before anything is saved, so the diverged weights never replace a good
    checkpoint. The message names the first bad step and the latest checkpoint to resume from.
    """


@dataclass
class TrainResult:
    """What a finished (or stopped) training run achieved.

    Parameters
    ----------
    step : int
        Optimizer steps done.
    tokens_seen : int
        Target tokens trained on.
    elapsed_seconds : float
        Training wall-clock time, resumed segments included.
    valid_loss : float or None
        Final validation loss per token (label-smoothed), if validated.
    valid_perplexity : float or None
        Final validation perplexity (from the unsmoothed NLL).
    best_valid_loss : float or None
        Best validation loss seen.
    checkpoint : Path or None
        The last checkpoint written.
    stop_reason : str
        "max_steps", "max_epochs" or "max_minutes".
    schedule_note : str
        When the time limit stopped the run: how much of ``max_steps`` it did and whether the learning rate
        was annealed to zero in time; empty otherwise.

    Notes
    -----
    Returned by :meth:`Trainer.train` on every rank. The losses are summed over ranks, so they agree
    everywhere, but ``checkpoint`` is None on every rank except 0, the only one that writes.
    """

    step: int
    tokens_seen: int
    elapsed_seconds: float
    valid_loss: float | None
    valid_perplexity: float | None
    best_valid_loss: float | None
    checkpoint: Path | None
    stop_reason: str
    schedule_note: str = ""


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
        self.tuning = self._tune_defaults()
        self.precision = self.tuning.precision or self.recipe.precision
        if data.tokenizer.vocab_size != experiment.model.vocab_size:
            raise ValueError(
                f"model.vocab_size={experiment.model.vocab_size} but the tokenizer {data.tokenizer.model_path} "
                f"has {data.tokenizer.vocab_size} pieces"
            )
        torch.manual_seed(self.recipe.seed)
        self.model = build_model(experiment.model).to(self.device)
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
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=1.0,  # the scheduler supplies the absolute rate
            betas=(self.recipe.adam_beta1, self.recipe.adam_beta2),
            eps=self.recipe.adam_epsilon,
            # One fused kernel per step on GPUs; on the CPU the fused path measured within noise of foreach.
            fused=self.device.type == "cuda",
        )
        scale = self.recipe.learning_rate_scale
        if self.recipe.peak_learning_rate is not None:
            scale = scale_for_peak(
                self.recipe.peak_learning_rate, model_width(experiment.model), self.recipe.warmup_steps
            )
        self._segment_started: float | None = None  # perf_counter() when this process began training
        self._segment_start_elapsed = 0.0  # state.elapsed_seconds then (earlier segments of a resumed run)
        self._clock_start: float | None = None  # segment seconds at the end of the segment's first step
        self._clock_led_at: int | None = None  # the first step at which the clock led the schedule
        self._position = 0.0  # where the schedule stood after the last step
        self.time_budget = (
            TimeBudget(60.0 * self.recipe.max_minutes, self.recipe.max_steps)
            if self.recipe.max_minutes is not None
            else None
        )
        self.scheduler = build_scheduler(
            self.optimizer,
            model_width(experiment.model),
            self.recipe.warmup_steps,
            scale,
            self.recipe.max_steps,
            self.recipe.cooldown_steps,
            self.clock_step if self.time_budget is not None else None,
        )
        self.grad_scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        self.sampler = TokenBatchSampler(
            data.train.source_lengths,
            data.train.target_lengths,
            self.recipe.max_tokens,
            seed=self.recipe.seed,
        )
        self.checkpoints = CheckpointManager(run_dir / "checkpoints", self.recipe.keep_checkpoints)
        self.state = TrainerState(
            experiment=experiment.to_dict(),
            tokenizer_fingerprint=data.tokenizer.fingerprint,
            tuning=tuning_record(self.tuning),
        )
        self._last_valid: tuple[float, float] | None = None
        self._last_valid_step = -1
        self._last_checkpoint: tuple[int, Path | None] | None = None

    def _tune_defaults(self) -> ModelTuning:
        """Resolve the automatic defaults on rank 0 and give every rank the same answer."""
        threads = self.recipe.threads
        if threads is None and self.context.is_distributed and self.device.type == "cpu":
            # Several processes share this machine's CPUs: split them instead of timing one process alone.
            threads = max(1, usable_cpus() // self.context.world_size)
        tuning = ModelTuning()
        if self.context.is_main:
            tuning = tune_model(
                self.experiment.model,
                self.device,
                self.recipe.max_tokens,
                self.recipe.precision,
                threads,
            )
        tuning = broadcast_from_main(tuning, self.context)
        torch.set_num_threads(threads or tuning.threads or torch.get_num_threads())
        return tuning

    def segment_seconds(self) -> float:
        """Wall-clock seconds this process has trained (0 before the first step).

        Returns
        -------
        float
            Time since :meth:`train` began its loop; earlier segments of a resumed run are not counted.

        Notes
        -----
        ``max_minutes`` limits each invocation: ``--resume`` of a run that stopped on its time limit trains
        for another ``max_minutes`` rather than stopping at once. The learning-rate schedule reads this clock
        to end its cool-down at the limit.
        """
        if self._segment_started is None:
            return 0.0
        return time.perf_counter() - self._segment_started

    def clock_step(self) -> float:
        """Return the step of the schedule that the time budget's clock has reached.

        Returns
        -------
        float
            0.0 without ``max_minutes`` or before the segment's first step has ended; then
            ``max_steps`` times the share of the budget used since (:meth:`TimeBudget.schedule_step`).

        Notes
        -----
        The schedule, validation and checkpoints follow ``max(step, clock_step())``, so when the time limit
        binds the whole recipe (warm-up, decay, cool-down, checkpoint spacing) is fitted into it. The first
        step is not counted: it carries one-off costs that would otherwise let the clock lead on a machine
        that is in fact fast enough.
        """
        if self.time_budget is None or self._clock_start is None or self._segment_started is None:
            return 0.0
        return self.time_budget.schedule_step(self.segment_seconds(), self._clock_start)

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

        Notes
        -----
        Without ``resume``, a run directory that already holds checkpoints is refused rather than
        overwritten. A non-finite loss raises :class:`TrainingDivergedError` before anything is saved.
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
        schedule_note = self._schedule_note() if stop_reason == "max_minutes" else ""
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

    def _schedule_note(self) -> str:
        """Say how much of the schedule a run stopped by its time limit did, and whether it cooled down."""
        share = self.state.step / self.recipe.max_steps
        done = f"stopped by max_minutes={self.recipe.max_minutes} at step {self.state.step} of {self.recipe.max_steps} ({share:.0%} of the schedule)"
        if self.recipe.cooldown_steps > 0:
            return f"{done}; warm-up and cool-down followed the clock, annealing the learning rate to zero within the time limit"
        return (
            f"warning: {done} without a cool-down (train.cooldown_steps is 0), at learning rate "
            f"{self.scheduler.get_last_lr()[0]:.2e}; --resume continues it"
        )

    def _load_or_refuse_existing(self, resume: bool) -> None:
        latest = self.checkpoints.latest()
        if latest is None:
            if resume:
                self.reporter.message(
                    f"no checkpoint in {self.checkpoints.checkpoint_dir}; starting from scratch"
                )
            return
        if not resume:
            raise ValueError(
                f"{self.run_dir} already holds checkpoints ({latest.name}); pass --resume to continue it "
                "or choose another --output-dir"
            )
        checkpoint = self._newest_readable_checkpoint()
        self.restore(checkpoint)
        self._last_checkpoint = (self.state.step, checkpoint.path)
        self.reporter.message(f"resumed from {checkpoint.path} at step {self.state.step}")

    def _adopt_batch_order(self, checkpoint_path: Path | None) -> None:
        """Warn when a checkpoint's epoch may have been cut by another sampler version; record this one's."""
        saved = self.state.batch_order
        if saved != BATCH_ORDER_VERSION and self.state.batches_done_in_epoch > 0:
            consequence = (
                f"the rest of epoch {self.state.epoch} follows this version's order {BATCH_ORDER_VERSION}, "
                "so some of its pairs come twice and others not at all (later epochs are unaffected)"
            )
            if saved is None:
                self.reporter.message(
                    f"warning: {checkpoint_path} does not record its sampler's batch order; if it was written "
                    f"before the order changed (2026-11-24), {consequence}"
                )
            else:
                self.reporter.message(
                    f"warning: {checkpoint_path} was cut into batches by sampler order {saved}: {consequence}"
                )
        self.state.batch_order = BATCH_ORDER_VERSION

    def _newest_readable_checkpoint(self) -> TrainingCheckpoint:
        """Load the newest checkpoint that reads back whole, warning about each damaged one skipped."""
        failures = []
        for path in self.checkpoints.newest_first():
            try:
                return load_training_checkpoint(path)
            except CheckpointError as error:
                failures.append(str(error))
                self.reporter.message(f"warning: skipping a damaged checkpoint: {error}")
        raise CheckpointError(
            f"{self.checkpoints.checkpoint_dir}: no readable checkpoint to resume from ({'; '.join(failures)})"
        )

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
        describe_mismatch(self.experiment.model, checkpoint.model_config, str(checkpoint.path))
        if checkpoint.state is None:
            raise CheckpointError(
                f"{checkpoint.path}: weights-only checkpoint; cannot resume training from it"
            )
        saved_processes = sum(1 for key in checkpoint.optimizer_tensors if key.startswith("rng.cpu.rank"))
        if saved_processes != self.context.world_size:
            raise CheckpointError(
                f"{checkpoint.path}: saved by {saved_processes} training process(es), resumed by "
                f"{self.context.world_size}; resume with the same number (torchrun --nproc-per-node "
                f"{saved_processes}): the data position and random states are per process"
            )
        if checkpoint.state.tokenizer_fingerprint != self.data.tokenizer.fingerprint:
            raise CheckpointError(
                f"{checkpoint.path}: vocabulary differs from {self.data.tokenizer.model_path} "
                "(tokenizer fingerprints do not match)"
            )
        self._adopt_recorded_tuning(checkpoint.state.tuning)
        self.model.load_state_dict(
            {name: tensor.to(self.device) for name, tensor in checkpoint.weights.items()}, strict=False
        )
        restore_optimizer(self.optimizer, checkpoint.optimizer_tensors, checkpoint.state.param_groups)
        self.scheduler.load_state_dict(checkpoint.state.scheduler)
        if self.grad_scaler is not None and checkpoint.state.grad_scaler:
            self.grad_scaler.load_state_dict(checkpoint.state.grad_scaler)
        torch.set_rng_state(checkpoint.optimizer_tensors[f"rng.cpu.rank{self.context.rank}"])
        cuda_key = f"rng.cuda.rank{self.context.rank}"
        if self.device.type == "cuda" and cuda_key in checkpoint.optimizer_tensors:
            torch.cuda.set_rng_state(checkpoint.optimizer_tensors[cuda_key], self.device)
        self.state = checkpoint.state
        self.state.tuning = tuning_record(self.tuning)
        self._adopt_batch_order(checkpoint.path)

    def _adopt_recorded_tuning(self, recorded: dict[str, Any] | None) -> None:
        """Apply the automatic defaults the run measured at its start, where this process measured others."""
        adopted = reconcile_tuning(recorded, self.tuning)
        self.tuning = adopted.tuning
        if self.device.type == "cpu" and self.tuning.threads is not None:
            torch.set_num_threads(self.tuning.threads)
        self.precision = self.tuning.precision or self.recipe.precision
        if self.precision != "fp16":
            self.grad_scaler = None
        elif self.grad_scaler is None:
            self.grad_scaler = torch.amp.GradScaler("cuda")
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
        self._segment_started = time.perf_counter()
        self._clock_start, self._clock_led_at = None, None
        self._position = float(self.state.step)
        try:
            for group in self._batch_groups():
                losses, tokens = self._accumulate_and_step(group)
                self.state.step += 1
                if self._clock_start is None:
                    self._clock_start = self.segment_seconds()
                self.state.tokens_seen += tokens
                self.state.elapsed_seconds = self._segment_start_elapsed + self.segment_seconds()
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
            self._segment_started = None

    def _end_step(
        self, interval: "IntervalStats", metrics: MetricsLog | None, final: bool
    ) -> "IntervalStats":
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
        step = self.state.step
        clock = self.clock_step()
        if clock > step and self._clock_led_at is None:
            self._clock_led_at = step
            self.reporter.message(
                f"time budget: max_minutes={self.recipe.max_minutes} binds; from step {step} the schedule, "
                "validation and checkpoints follow the clock (warm-up and cool-down keep their shares of "
                "the time)"
            )
        previous, self._position = self._position, max(self._position, float(step), clock)
        return previous, self._position

    def _stop_reason(self) -> str:
        if self.state.step >= self.recipe.max_steps:
            return "max_steps"
        minutes = self.recipe.max_minutes
        if minutes is not None and self.segment_seconds() >= 60 * minutes:
            return "max_minutes"
        return ""

    def _batch_groups(self) -> Iterator[list[Batch]]:
        while self.recipe.max_epochs is None or self.state.epoch < self.recipe.max_epochs:
            batches = shard(
                self.sampler.batch_index_arrays(self.state.epoch), self.context.rank, self.context.world_size
            )
            position = self.state.batches_done_in_epoch
            while position < len(batches):
                indices = batches[position : position + self.recipe.accumulate]
                position += len(indices)
                self.state.batches_done_in_epoch = position
                yield [self._collate(batch, self.data.train) for batch in indices]
            self.state.epoch += 1
            self.state.batches_done_in_epoch = 0

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

        Notes
        -----
        Raises :class:`TrainingDivergedError` if the loss is not finite (after the update, which is then
        never saved). Benchmarks call this to time exactly what training runs; the training loop itself
        leaves the losses on the device and reads them back only at log, validation and checkpoint steps.
        """
        losses, tokens = self._accumulate_and_step(group)
        totals = all_reduce_sum(losses, self.context).cpu()
        self._raise_if_diverged(totals[None, :], self.state.step + 1)
        return float(totals[0]), float(totals[1]), tokens

    def _accumulate_and_step(self, group: list[Batch]) -> tuple[Tensor, int]:
        """Forward, backward and update; return this rank's (loss, nll) sums, shape (2,), still on the device."""
        self.training_model.train()
        global_tokens = self._global_target_tokens(group)
        # DDP averages gradients over ranks; scaling by world_size / global_tokens makes the update the
        # gradient of (sum of token losses over all ranks) / (all target tokens), as in one big batch.
        normaliser = self.context.world_size / global_tokens
        losses = torch.zeros(2, dtype=torch.float64, device=self.device)
        for index, batch in enumerate(group):
            sync = index == len(group) - 1
            with self._maybe_no_sync(sync), autocast(self.precision, self.device):
                logits = self.training_model(batch.src_tokens, batch.tgt_input)
            loss, nll = label_smoothed_nll_loss(
                logits, batch.tgt_output, self.recipe.label_smoothing, self.experiment.model.pad_id
            )
            with self._maybe_no_sync(sync):
                self._backward(loss * normaliser)
            losses += torch.stack([loss.detach(), nll.detach()]).double()
        self._optimizer_step()
        return losses, global_tokens

    def _global_target_tokens(self, group: list[Batch]) -> int:
        """Target tokens of the step over all processes (counted on the host: no device sync alone)."""
        local_tokens = sum(batch.num_target_tokens for batch in group)
        if not self.context.is_distributed:
            return local_tokens
        counts = torch.tensor([local_tokens], dtype=torch.float64, device=self.device)
        return int(all_reduce_sum(counts, self.context).item())

    def _settle_losses(self, interval: "IntervalStats") -> None:
        """Read the interval's pending step losses back (one sync), summed over ranks, and check them."""
        pending = interval.take_pending()
        if pending is None:
            return
        per_step = all_reduce_sum(pending, self.context).cpu()  # (steps, 2): loss and nll sums
        first_step = self.state.step - per_step.size(0) + 1
        self._raise_if_diverged(per_step, first_step)
        interval.loss_sum += float(per_step[:, 0].sum())
        interval.nll_sum += float(per_step[:, 1].sum())

    def _raise_if_diverged(self, per_step: Tensor, first_step: int) -> None:
        """Raise :class:`TrainingDivergedError` naming the first step whose loss is not finite."""
        finite = torch.isfinite(per_step[:, 0])
        if bool(finite.all()):
            return
        bad = int((~finite).nonzero()[0, 0])
        raise TrainingDivergedError(
            f"loss became {float(per_step[bad, 0])} at step {first_step + bad}; the last good checkpoint is "
            f"{self.checkpoints.latest() or 'none'} (try a lower learning rate or train.clip_norm)"
        )

    def _maybe_no_sync(self, sync: bool) -> "contextlib.AbstractContextManager[None]":
        if sync or self.distributed_model is None:
            return contextlib.nullcontext()
        return self.distributed_model.no_sync()

    def _backward(self, loss: Tensor) -> None:
        if self.grad_scaler is not None:
            self.grad_scaler.scale(loss).backward()  # type: ignore[no-untyped-call]
        else:
            loss.backward()  # type: ignore[no-untyped-call]

    def _optimizer_step(self) -> None:
        if self.grad_scaler is not None:
            self.grad_scaler.unscale_(self.optimizer)
        if self.recipe.clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.recipe.clip_norm)
        if self.grad_scaler is not None:
            self.grad_scaler.step(self.optimizer)
            self.grad_scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def _collate(self, indices: Sequence[int] | np.ndarray, corpus: ParallelCorpus) -> Batch:
        """Pad one batch with the model's special ids (as decoding and perplexity do) and move it to the device."""
        model = self.experiment.model
        return collate(indices, corpus, model.pad_id, model.start_id, model.eos_id).to(self.device)

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
        if self.data.valid is None:
            return None
        sampler = TokenBatchSampler(
            self.data.valid.source_lengths,
            self.data.valid.target_lengths,
            self.recipe.max_tokens,
            shuffle=False,
        )
        shard = sampler.batches(0)[self.context.rank :: self.context.world_size]
        sums = sum_batch_losses(
            self.model,
            (self._collate(indices, self.data.valid) for indices in shard),
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

    def _log_train(self, interval: "IntervalStats", metrics: MetricsLog | None) -> None:
        record = {
            "kind": "train",
            "step": self.state.step,
            "epoch": self.state.epoch,
            "train_loss": interval.loss_sum / max(interval.tokens, 1),
            "train_nll": interval.nll_sum / max(interval.tokens, 1),
            "learning_rate": self.scheduler.get_last_lr()[0],
            "tokens_per_second": interval.tokens / max(interval.seconds(), 1e-9),
            "padding_ratio": interval.padding_ratio(),
            "tokens_seen": self.state.tokens_seen,
            "elapsed_seconds": self.state.elapsed_seconds,
        }
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
        self.state.grad_scaler = self.grad_scaler.state_dict() if self.grad_scaler is not None else None
        rng = self._gather_rng_states()
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

    def _gather_rng_states(self) -> dict[str, Tensor]:
        """Every rank's random state, so each rank resumes its own dropout stream."""
        states = {f"rng.cpu.rank{self.context.rank}": torch.get_rng_state()}
        if self.device.type == "cuda":
            states[f"rng.cuda.rank{self.context.rank}"] = torch.cuda.get_rng_state(self.device)
        if not self.context.is_distributed:
            return states
        gathered: list[dict[str, Tensor] | None] = [None] * self.context.world_size
        dist.all_gather_object(gathered, {key: value.cpu() for key, value in states.items()})
        return {key: value for item in gathered if item for key, value in item.items()}


class IntervalStats:
    """Sums of losses, tokens and padding between two training log records.

    Notes
    -----
    Internal to the trainer. Step losses are kept as device tensors until :meth:`take_pending` collects
    them, so training on a GPU does not wait for each step's loss to reach the host.
    """

    def __init__(self) -> None:
        self.loss_sum = 0.0
        self.nll_sum = 0.0
        self.tokens = 0
        self.steps = 0
        self._pending: list[Tensor] = []
        self._padding_sum = 0.0
        self._started = time.perf_counter()

    def add(self, losses: Tensor, tokens: int, padding_ratio: float) -> None:
        """Account for one optimizer step.

        Parameters
        ----------
        losses : torch.Tensor, shape (2,)
            This rank's label-smoothed loss sum and NLL sum for the step, float64, still on the device.
        tokens : int
            Target tokens of the step over all ranks.
        padding_ratio : float
            Mean padding fraction of the step's batches.

        Returns
        -------
        None

        Notes
        -----
        ``losses`` is only queued: :meth:`take_pending` stacks the queue at the next log, validation or
        checkpoint step, so a GPU step never waits for its loss to reach the host. Until then ``loss_sum``
        and ``nll_sum`` lag behind ``tokens``.
        """
        self._pending.append(losses)
        self.tokens += tokens
        self.steps += 1
        self._padding_sum += padding_ratio

    def take_pending(self) -> Tensor | None:
        """Return the step losses not yet read back, and forget them.

        Returns
        -------
        torch.Tensor, shape (steps, 2), or None
            One row per queued step, (loss sum, NLL sum) of this rank, on the device; None if nothing is
            queued.

        Notes
        -----
        The rows are still per rank: the trainer all-reduces them before adding them to ``loss_sum`` and
        ``nll_sum``, and keeps them per step so a non-finite loss can be traced to the step that made it.
        """
        if not self._pending:
            return None
        pending, self._pending = torch.stack(self._pending), []
        return pending

    def seconds(self) -> float:
        """Wall-clock time since the interval began.

        Returns
        -------
        float
            Seconds since this object was created, by ``time.perf_counter``.

        Notes
        -----
        The trainer starts a new interval after each log record, so this times the steps since the last
        one. It is read after the losses are synced to the host, so on a GPU it covers finished work and
        tokens/s is not inflated by queued kernels.
        """
        return time.perf_counter() - self._started

    def padding_ratio(self) -> float:
        """Mean fraction of padding cells in the interval's batches.

        Returns
        -------
        float
            The mean over steps of each step's mean batch padding ratio; 0.0 for an empty interval.

        Notes
        -----
        A mean of means: steps weigh equally whatever their batch count, which differs only at an epoch's
        end. High values mean the token batcher wastes compute on padding.
        """
        return self._padding_sum / max(self.steps, 1)
