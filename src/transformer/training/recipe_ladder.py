"""Pick the recipe that the machine's measured speed pays for within ``train.max_minutes`` (``ladder:``)."""

import json
from collections.abc import Callable
from pathlib import Path

import torch

from transformer.autotune.cache import ProbeCache
from transformer.autotune.model_tuning import default_probe_cache, tune_model
from transformer.autotune.throughput_probe import decide_training_throughput
from transformer.checkpoint.layout import read_index
from transformer.config.experiment import ExperimentConfig, experiment_from_dict
from transformer.config.files import apply_override
from transformer.config.ladder import LadderRung
from transformer.model.config import TransformerConfig

#: The share of the budget spent training (the rest validates and saves checkpoints), from the
#: Multi30k runs' logs: 10 validations and checkpoints cost 3-6% of 28 minutes on 2 cores.
TRAINING_SHARE = 0.95

#: Measures a rung: (experiment with the rung applied, device) -> target tokens per second.
Speedometer = Callable[[ExperimentConfig, torch.device], float]


def apply_rung(experiment: ExperimentConfig, rung: LadderRung, source: str = "ladder") -> ExperimentConfig:
    """Return the configuration with a rung's overrides applied and the rung recorded as chosen.

    Parameters
    ----------
    experiment : ExperimentConfig
        The file's configuration.
    rung : LadderRung
        One of its ``ladder.rungs``.
    source : str
        Names the origin in error messages.

    Returns
    -------
    ExperimentConfig
        The configuration to train, ``ladder.choose`` set to the rung's name.

    Notes
    -----
    Goes through the same ``section.key=value`` parsing as ``--set``, so a rung says in the YAML exactly what
    a user would type to get the same recipe by hand.
    """
    values = experiment.to_dict()
    for override in rung.overrides:
        apply_override(values, override)
    values["ladder"]["choose"] = rung.name
    return experiment_from_dict(values, source=f"{source} rung {rung.name!r}")


def measured_speed(experiment: ExperimentConfig, device: torch.device, cache: ProbeCache) -> float:
    """Measure (or read from the cache) how many target tokens per second a rung trains at here.

    Parameters
    ----------
    experiment : ExperimentConfig
        A rung's configuration.
    device : torch.device
        The training device.
    cache : ProbeCache
        The probes' cache.

    Returns
    -------
    float
        Target tokens per second, in the precision and thread count ``auto`` resolves to for it.

    Raises
    ------
    ValueError
        For a recurrent model: the ladder's probe builds Transformers.

    Notes
    -----
    Resolves threads and precision first, as the trainer will, so the speed is the one the run will see.
    """
    model, recipe = experiment.model, experiment.train
    if not isinstance(model, TransformerConfig):
        raise ValueError("ladder: rungs must be Transformer models (model.architecture: transformer)")
    tuning = tune_model(model, device, recipe.max_tokens, recipe.precision, recipe.threads, cache)
    precision = tuning.precision or recipe.precision
    speed, _ = decide_training_throughput(model, recipe.max_tokens, precision, device, cache)
    return speed


def recorded_rung(run_dir: Path) -> str | None:
    """Return the rung a run directory's latest checkpoint was trained with, if any.

    Parameters
    ----------
    run_dir : Path
        A training run's directory.

    Returns
    -------
    str or None
        ``ladder.choose`` recorded in the latest checkpoint's ``trainer_state.json`` (the index's ``latest``);
        "none" for a checkpoint that records no ladder (written before ladders, or trained without one);
        None without a checkpoint.

    Notes
    -----
    ``--resume`` keeps this rung whatever the machine measures now: another rung would be another model. A
    checkpoint from before the ladder trained the file's values as they are, hence "none".
    """
    latest = read_index(run_dir / "checkpoints").get("latest")
    if latest is None:
        return None
    try:
        state = json.loads(
            (run_dir / "checkpoints" / latest / "trainer_state.json").read_text(encoding="utf-8")
        )
    except (OSError, ValueError):
        return None  # the trainer's own resume reports a damaged checkpoint, naming it
    choose = state.get("experiment", {}).get("ladder", {}).get("choose")
    return str(choose) if choose and choose != "auto" else "none"


def resolve_ladder(
    experiment: ExperimentConfig,
    device: torch.device,
    recorded: str | None = None,
    speedometer: Speedometer | None = None,
) -> tuple[ExperimentConfig, str | None]:
    """Choose the rung of ``experiment.ladder`` to train, and say why in one line.

    Parameters
    ----------
    experiment : ExperimentConfig
        The configuration as the user gave it.
    device : torch.device
        The training device.
    recorded : str or None
        The rung a resumed run was trained with (:func:`recorded_rung`); it wins over everything.
    speedometer : callable or None
        Measures a rung's target tokens per second; default: :func:`measured_speed` with the user's cache.

    Returns
    -------
    experiment : ExperimentConfig
        The configuration to train (unchanged without a ladder or with ``choose: none``).
    note : str or None
        The log line naming the rung and the measurements behind it; None without a ladder.

    Notes
    -----
    With ``choose: auto`` and a time budget, rungs are measured from the largest down and the first whose
    projected tokens (speed x ``max_minutes`` x :data:`TRAINING_SHARE`) reach its ``min_target_tokens`` is
    taken; the last rung is the fallback. Without ``max_minutes`` nothing binds and the first rung is taken
    unmeasured.
    """
    ladder = experiment.ladder
    if not ladder.rungs or ladder.choose == "none":
        return experiment, None
    by_name = {rung.name: rung for rung in ladder.rungs}
    override = "override with --set ladder.choose=NAME (or none)"
    if recorded == "none":
        return experiment, "recipe ladder: none, as the run was started (the file's values as they are)"
    if recorded is not None and recorded in by_name:
        return apply_rung(
            experiment, by_name[recorded]
        ), f"recipe ladder: {recorded!r}, as the run was started"
    if ladder.choose != "auto":
        return apply_rung(experiment, by_name[ladder.choose]), f"recipe ladder: {ladder.choose!r}, as chosen"
    minutes = experiment.train.max_minutes
    if minutes is None:
        first = ladder.rungs[0]
        return apply_rung(experiment, first), f"recipe ladder: {first.name!r}: no train.max_minutes to fit"
    if speedometer is None:
        cache = default_probe_cache()

        def speedometer(config: ExperimentConfig, device: torch.device) -> float:
            return measured_speed(config, device, cache)

    seconds = 60.0 * minutes * TRAINING_SHARE
    findings = []
    for index, rung in enumerate(ladder.rungs):
        candidate = apply_rung(experiment, rung)
        speed = speedometer(candidate, device)
        tokens = speed * seconds
        findings.append(
            f"{rung.name!r} {speed:,.0f} tokens/s -> {tokens / 1e6:.1f}M (needs {rung.min_target_tokens / 1e6:.1f}M)"
        )
        if tokens >= rung.min_target_tokens or index == len(ladder.rungs) - 1:
            note = (
                f"recipe ladder: {rung.name!r} for max_minutes={minutes:g}: measured "
                f"{'; '.join(findings)}; {override}"
            )
            return candidate, note
    raise AssertionError("unreachable: the last rung is always taken")
