"""Resuming a run: which checkpoint to load, what refuses it, and what a resumed run warns about.

The trainer applies what these functions decide (:meth:`transformer.training.trainer.Trainer.restore`); they
hold the rules, so each reads on its own: the newest checkpoint that loads whole, a checkpoint of another model,
vocabulary or number of processes refused, and a warning where the sampler that cut the checkpoint's epoch
into batches was another version.
"""

from pathlib import Path

from transformer.architectures import ModelConfig
from transformer.checkpoint.layout import CheckpointError
from transformer.checkpoint.model_checkpoint import describe_mismatch
from transformer.data.pipeline.token_batch_sampler import BATCH_ORDER_VERSION
from transformer.training.checkpoint import (
    CheckpointManager,
    TrainerState,
    TrainingCheckpoint,
    load_training_checkpoint,
)
from transformer.training.reporting import Reporter


def checkpoint_to_resume(
    checkpoints: CheckpointManager, resume: bool, run_dir: Path, reporter: Reporter
) -> TrainingCheckpoint | None:
    """Decide what a run directory's checkpoints mean for a training that starts in it.

    Parameters
    ----------
    checkpoints : CheckpointManager
        The run's checkpoints.
    resume : bool
        ``--resume``.
    run_dir : Path
        The run directory, named when it is refused.
    reporter : Reporter
        Told when ``--resume`` finds nothing and the run starts from scratch.

    Returns
    -------
    TrainingCheckpoint or None
        The checkpoint to resume from; None to start from scratch.

    Raises
    ------
    ValueError
        When the directory holds checkpoints and ``resume`` is False: they are never overwritten.
    CheckpointError
        When none of its checkpoints loads.

    Notes
    -----
    The command refuses ``--resume`` with nothing to resume before it creates anything; a run that reaches
    here with ``resume`` and no checkpoint was started by the library, and starts from scratch with a note.
    """
    latest = checkpoints.latest()
    if latest is None:
        if resume:
            reporter.message(f"no checkpoint in {checkpoints.checkpoint_dir}; starting from scratch")
        return None
    if not resume:
        raise ValueError(
            f"{run_dir} already holds checkpoints ({latest.name}); pass --resume to continue it "
            "or choose another --output-dir"
        )
    return newest_readable_checkpoint(checkpoints, reporter)


def newest_readable_checkpoint(checkpoints: CheckpointManager, reporter: Reporter) -> TrainingCheckpoint:
    """Load the newest checkpoint of a run that reads back whole.

    Parameters
    ----------
    checkpoints : CheckpointManager
        The run's checkpoints.
    reporter : Reporter
        Told about each damaged checkpoint skipped.

    Returns
    -------
    TrainingCheckpoint
        The newest loadable one.

    Raises
    ------
    CheckpointError
        When none loads, naming each one's error.

    Notes
    -----
    A checkpoint cut short or altered (its weights' checksum fails) is skipped with a warning, so a run killed
    while a disk filled up resumes from the checkpoint before.
    """
    failures = []
    for path in checkpoints.newest_first():
        try:
            return load_training_checkpoint(path)
        except CheckpointError as error:
            failures.append(str(error))
            reporter.message(f"warning: skipping a damaged checkpoint: {error}")
    raise CheckpointError(
        f"{checkpoints.checkpoint_dir}: no readable checkpoint to resume from ({'; '.join(failures)})"
    )


def resumable_state(
    checkpoint: TrainingCheckpoint,
    model_config: ModelConfig,
    world_size: int,
    tokenizer_fingerprint: str,
    tokenizer_path: Path | None,
) -> TrainerState:
    """Check that a checkpoint continues this run, and return its training state.

    Parameters
    ----------
    checkpoint : TrainingCheckpoint
        The checkpoint to resume.
    model_config : ModelConfig
        This run's model.
    world_size : int
        Training processes of this run.
    tokenizer_fingerprint : str
        SHA-256 of this run's SentencePiece model.
    tokenizer_path : Path or None
        That model's file, named when the vocabularies differ.

    Returns
    -------
    TrainerState
        The checkpoint's state.

    Raises
    ------
    CheckpointError
        For a weights-only checkpoint, another model config (naming the fields), another number of processes
        (naming both) or another vocabulary.

    Notes
    -----
    The data position and random states are per process (each rank's shard of the epoch), so a checkpoint
    saved by another number of processes would skip or repeat batches: it is refused with the ``torchrun``
    option that resumes it.
    """
    describe_mismatch(model_config, checkpoint.model_config, str(checkpoint.path))
    if checkpoint.state is None:
        raise CheckpointError(f"{checkpoint.path}: weights-only checkpoint; cannot resume training from it")
    saved_processes = sum(1 for key in checkpoint.optimizer_tensors if key.startswith("rng.cpu.rank"))
    if saved_processes != world_size:
        raise CheckpointError(
            f"{checkpoint.path}: saved by {saved_processes} training process(es), resumed by "
            f"{world_size}; resume with the same number (torchrun --nproc-per-node "
            f"{saved_processes}): the data position and random states are per process"
        )
    if checkpoint.state.tokenizer_fingerprint != tokenizer_fingerprint:
        raise CheckpointError(
            f"{checkpoint.path}: vocabulary differs from {tokenizer_path} (tokenizer fingerprints do not match)"
        )
    return checkpoint.state


def batch_order_warning(state: TrainerState, checkpoint: TrainingCheckpoint) -> str | None:
    """Say what resuming mid-epoch under another sampler version does, if it applies.

    Parameters
    ----------
    state : TrainerState
        The checkpoint's state (its ``batch_order``, epoch and position in it).
    checkpoint : TrainingCheckpoint
        The checkpoint, named in the warning.

    Returns
    -------
    str or None
        The warning, or None when the versions agree or the checkpoint ended an epoch.

    Notes
    -----
    The rest of the epoch follows this version's order, so some pairs come twice and others not at all;
    later epochs are unaffected. A checkpoint written before the order was versioned (``batch_order`` None)
    may or may not have been cut by this version.
    """
    saved = state.batch_order
    if saved == BATCH_ORDER_VERSION or state.batches_done_in_epoch == 0:
        return None
    consequence = (
        f"the rest of epoch {state.epoch} follows this version's order {BATCH_ORDER_VERSION}, "
        "so some of its pairs come twice and others not at all (later epochs are unaffected)"
    )
    if saved is None:
        return (
            f"warning: {checkpoint.path} does not record its sampler's batch order; if it was written "
            f"before the order changed (2026-11-24), {consequence}"
        )
    return f"warning: {checkpoint.path} was cut into batches by sampler order {saved}: {consequence}"
