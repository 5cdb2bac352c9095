"""Start a training run as one process or one rank of a ``torchrun`` job: data, vocabulary, trainer, lock.

``transformer train`` and ``transformer quickstart`` are :func:`claim_run_dir_if_main` around
:func:`train_experiment`; experiment code calls the same two.
"""

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import torch

from transformer.checkpoint.layout import read_index
from transformer.config.experiment import ExperimentConfig
from transformer.data.prepare import TrainingData, prepare_data
from transformer.training.distributed import (
    broadcast_from_main,
    init_distributed,
    shutdown_distributed,
    wait_for_data_preparation,
)
from transformer.training.progress import ProgressBar
from transformer.training.recipe_ladder import recorded_rung, resolve_ladder
from transformer.training.result import TrainResult
from transformer.training.run_directory import claim_run_directory
from transformer.training.run_lock import LOCK_FILE
from transformer.training.trainer import Trainer


def train_experiment(
    experiment: ExperimentConfig, run_dir: Path, resume: bool, reuse_finished: bool = False
) -> tuple[TrainResult, TrainingData]:
    """Prepare data and train, as one process or one rank of a ``torchrun`` job.

    Parameters
    ----------
    experiment : ExperimentConfig
        What to train.
    run_dir : Path
        Where to write.
    resume : bool
        Continue the latest checkpoint in ``run_dir``; without one (and without ``reuse_finished``) it is an
        error, reported before anything is created.
    reuse_finished : bool
        With ``resume``, return a run that already ended as it is (see :meth:`Trainer.train`).

    Returns
    -------
    TrainResult
        What the run achieved.
    TrainingData
        The prepared data (for evaluation afterwards).

    Raises
    ------
    ValueError
        With ``resume`` and without ``reuse_finished``, when ``run_dir`` holds no checkpoint: a typo in
        ``--output-dir`` must not start a new run under the wrong name.

    Notes
    -----
    Rank 0 resolves the recipe ladder (``ladder:``, by measured speed, or the rung a resumed run recorded)
    and prepares data and vocabulary first; the other ranks then load what it wrote. The trainer sets the
    thread count (``train.threads``, or a measured one when it is null) before building the model.
    """
    if resume and not reuse_finished and read_index(run_dir / "checkpoints").get("latest") is None:
        # Before anything is created: a typo in --output-dir must not start a new run under the wrong name.
        raise ValueError(
            f"--resume: {run_dir} holds no checkpoint to resume (no {run_dir / 'checkpoints' / 'index.json'}); "
            "drop --resume to start a new run there"
        )
    context = init_distributed(experiment.train.device)
    progress = ProgressBar()
    try:
        if context.is_main:
            recorded = recorded_rung(run_dir) if resume else None
            experiment, ladder_note = resolve_ladder(experiment, context.device, recorded)
            if ladder_note:
                progress.message(ladder_note)
        experiment = broadcast_from_main(experiment, context)  # one rung for every process
        if not context.is_main:
            wait_for_data_preparation(context)
        data = prepare_data(
            experiment.data,
            experiment.model.vocab_size,
            run_dir,
            message=progress.message if context.is_main else None,
        )
        if context.is_main:
            wait_for_data_preparation(context)
        trainer = Trainer(experiment, run_dir, data, context, progress)
        if context.is_main:
            progress.message(
                f"model: {trainer.model.num_parameters():,} parameters; device {context.device}, "
                f"{context.world_size} process(es), precision {trainer.precision}, {torch.get_num_threads()} threads"
            )
        return trainer.train(resume=resume, reuse_finished=reuse_finished), data
    finally:
        shutdown_distributed(context)


def is_main_process() -> bool:
    """Whether this process is rank 0 of a ``torchrun`` job, or runs alone.

    Returns
    -------
    bool
        True unless the ``RANK`` environment variable names another rank.

    Notes
    -----
    ``torchrun`` sets ``RANK`` before the process starts, so this holds before the process group exists.
    """
    return int(os.environ.get("RANK", "0")) == 0


@contextlib.contextmanager
def claim_run_dir_if_main(run_dir: Path) -> Iterator[None]:
    """Create and lock the run directory in the main process; no-op in the other ranks.

    Parameters
    ----------
    run_dir : Path
        The run directory of ``prepare``, ``train`` or ``quickstart``.

    Returns
    -------
    Iterator[None]
        A context manager around the training.

    Notes
    -----
    See :func:`claim_run_directory`: a second run of one directory is refused naming the holder's pid, a
    dead holder's lock is taken over (said on standard error), and a run that fails before its first
    checkpoint removes the directory it created. Under ``torchrun`` only rank 0 writes the run directory,
    so only it holds the lock.
    """
    if not is_main_process():
        yield
        return
    with claim_run_directory(run_dir) as replaced:
        if replaced is not None:
            print(
                f"note: took over {run_dir / LOCK_FILE} from {replaced.describe()}, which has ended",
                file=sys.stderr,
            )
        yield
