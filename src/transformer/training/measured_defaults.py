"""The automatic defaults of a training run: measured once on rank 0, shared, recorded, and kept on resume.

``train.threads: null``, ``train.precision: auto`` and ``model.attention_implementation: auto`` are timings of
the model's own products on the machine at hand (:mod:`transformer.autotune`). Every process must compute with
the same values, and a resumed run with the values its first segment measured, or it would compute differently
from an uninterrupted run (:mod:`transformer.training.reproducibility`).
"""

from dataclasses import dataclass
from typing import Any

import torch

from transformer.architectures import ModelConfig
from transformer.autotune.model_tuning import ModelTuning, tune_model
from transformer.autotune.thread_probe import usable_cpus
from transformer.config.train import TrainConfig
from transformer.training.distributed import DistributedContext, broadcast_from_main


def tune_training_defaults(
    model_config: ModelConfig, recipe: TrainConfig, context: DistributedContext
) -> ModelTuning:
    """Resolve the automatic defaults on rank 0, give every rank the same answer, and apply the thread count.

    Parameters
    ----------
    model_config : ModelConfig
        The model whose products are timed.
    recipe : TrainConfig
        ``precision``, ``threads`` and ``max_tokens`` (the probe's batch size).
    context : DistributedContext
        Rank, world size and device.

    Returns
    -------
    ModelTuning
        The values resolved, with one log line each; PyTorch's thread count is already set.

    Notes
    -----
    Several processes on one machine share its CPUs: each gets an equal share instead of a timing of one
    process alone, which would give every process all of them.
    """
    threads = recipe.threads
    if threads is None and context.is_distributed and context.device.type == "cpu":
        threads = max(1, usable_cpus() // context.world_size)
    tuning = ModelTuning()
    if context.is_main:
        tuning = tune_model(model_config, context.device, recipe.max_tokens, recipe.precision, threads)
    tuning = broadcast_from_main(tuning, context)
    torch.set_num_threads(threads or tuning.threads or torch.get_num_threads())
    return tuning


@dataclass(frozen=True)
class AdoptedTuning:
    """The automatic defaults a resumed run applies, and what it says about them.

    Parameters
    ----------
    tuning : ModelTuning
        The values to apply: the recorded ones where this run measured a different value.
    notes : list of str
        One line per value taken from the record instead of this run's measurement.

    Notes
    -----
    Built by :func:`reconcile_tuning`; the trainer applies ``tuning`` before it loads the checkpoint's
    weights and optimizer state, so the first resumed step already computes as the first segment did.
    """

    tuning: ModelTuning
    notes: list[str]


def tuning_record(tuning: ModelTuning) -> dict[str, Any]:
    """Record the automatic defaults a run measured, for its checkpoints' training state.

    Parameters
    ----------
    tuning : ModelTuning
        What the run resolved (None for a value the configuration set explicitly).

    Returns
    -------
    dict
        ``{"precision": str | None, "threads": int | None, "explicit_max_length": int | None}``.

    Notes
    -----
    Only measured values are recorded: a value the configuration gives is read from the configuration on
    resume, so changing it there (say, more threads on a bigger machine) still takes effect.
    """
    return {
        "precision": tuning.precision,
        "threads": tuning.threads,
        "explicit_max_length": tuning.explicit_max_length,
    }


def reconcile_tuning(recorded: dict[str, Any] | None, measured: ModelTuning) -> AdoptedTuning:
    """Choose the automatic defaults of a resumed run: the values its first segment measured.

    Parameters
    ----------
    recorded : dict or None
        :func:`tuning_record` of the checkpoint; None for a checkpoint written before runs recorded it.
    measured : ModelTuning
        What this process measured (or read from the cache).

    Returns
    -------
    AdoptedTuning
        The values to apply, with a note for each recorded value that replaced a measured one.

    Notes
    -----
    A measurement that flips (a busy machine, a deleted cache, another thread count) would otherwise change
    the arithmetic halfway through a run, and a resumed run would no longer equal an uninterrupted one. A value
    is taken from the record only where this run measured one too: a value now set in the configuration wins.
    """
    if not recorded:
        return AdoptedTuning(measured, [])
    adopted = ModelTuning(
        precision=measured.precision,
        explicit_max_length=measured.explicit_max_length,
        threads=measured.threads,
        notes=list(measured.notes),
    )
    notes = []
    for name in ("precision", "threads", "explicit_max_length"):
        now, before = getattr(measured, name), recorded.get(name)
        if now is not None and before is not None and now != before:
            setattr(adopted, name, before)
            notes.append(
                f"resume: {name}={before!r} as the run measured at its start (measured now: {now!r}), "
                "so the resumed run computes as an uninterrupted one"
            )
    return AdoptedTuning(adopted, notes)
