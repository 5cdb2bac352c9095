"""Which runs an experiment invocation means: the selected variants times the seeds, and which are done.

A run is one variant with one seed, in ``OUTPUT_DIR/runs/VARIANT-sSEED/``. Its configuration is resolved and
validated when it is planned, before anything trains, and compared with what its results line and its run
directory recorded, so a run is skipped only when it was made with the very same configuration.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer.experiments.common.plan import (
    ExperimentPlan,
    Variant,
    config_differences,
    refuse_overridden_keys,
    run_config,
    set_dotted,
)
from transformer.experiments.common.worker import RUN_FILE


@dataclass(frozen=True)
class PlannedRun:
    """One variant with one seed, and where it runs.

    Parameters
    ----------
    variant : Variant
        The variant.
    seed : int
        Its seed, from 1.
    run_dir : Path
        ``OUTPUT_DIR/runs/VARIANT-sSEED``.
    config : dict of str to Any
        The resolved run configuration (:func:`~transformer.experiments.common.plan.run_config`).

    Notes
    -----
    The name ``VARIANT-sSEED`` is the run's identity in logs and messages.
    """

    variant: Variant
    seed: int
    run_dir: Path
    config: dict[str, Any]

    @property
    def name(self) -> str:
        """The run's name, e.g. ``A1-s2``.

        Returns
        -------
        str
            Variant name and seed.

        Notes
        -----
        Also the name of its directory under ``runs/``.
        """
        return f"{self.variant.name}-s{self.seed}"


def plan_runs(
    plan: ExperimentPlan,
    output_dir: Path,
    seeds: int | Sequence[int],
    only: Sequence[str] | None,
    device: str,
    threads: int | None,
) -> list[PlannedRun]:
    """Resolve the runs of the selected variants and seeds.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    output_dir : Path
        The experiment directory.
    seeds : int or sequence of int
        A count (seeds 1 .. seeds) or the seeds themselves (``--seeds 1,5,7``).
    only : sequence of str or None
        ``--only``: variant or group names.
    device : str
        ``train.device`` for every run.
    threads : int or None
        ``train.threads`` for every run (None: measured by the trainer).

    Returns
    -------
    list of PlannedRun
        In table order, seeds innermost.

    Notes
    -----
    Every configuration is validated here, before anything trains: a bad variant stops the experiment at
    once with its name.
    """
    seed_list = resolve_seeds(seeds)
    selected = plan.select(only)
    refuse_overridden_keys(plan, selected)
    runs = []
    for variant in selected:
        for seed in seed_list:
            config = run_config(plan, variant, seed)
            set_dotted(config, "train.device", device)
            set_dotted(config, "train.threads", threads)
            runs.append(PlannedRun(variant, seed, output_dir / "runs" / f"{variant.name}-s{seed}", config))
    return runs


def resolve_seeds(seeds: int | Sequence[int]) -> tuple[int, ...]:
    """Turn ``--seeds`` into the seeds themselves.

    Parameters
    ----------
    seeds : int or sequence of int
        A count n (seeds 1 .. n) or explicit seeds.

    Returns
    -------
    tuple of int
        The seeds, in the order given.

    Raises
    ------
    ValueError
        For no seed, a negative seed or a seed named twice.

    Notes
    -----
    A seed named twice is refused because its two runs would share a directory.
    """
    chosen = tuple(range(1, seeds + 1)) if isinstance(seeds, int) else tuple(seeds)
    if not chosen:
        raise ValueError(f"--seeds {seeds}: at least one seed")
    if any(seed < 0 for seed in chosen) or len(set(chosen)) != len(chosen):
        raise ValueError(f"--seeds {','.join(map(str, chosen))}: seeds must be distinct and non-negative")
    return chosen


def check_recorded(run: PlannedRun, recorded: dict[str, Any] | None, results_path: Path) -> bool:
    """Tell whether a run is already done, refusing one recorded with another configuration.

    Parameters
    ----------
    run : PlannedRun
        The run as planned now.
    recorded : dict or None
        Its line in ``results.jsonl``, if any.
    results_path : Path
        ``results.jsonl``, for the message.

    Returns
    -------
    bool
        True when the run has a result with the same configuration (skip it).

    Raises
    ------
    ValueError
        Naming the run and every differing key when the recorded configuration (or the one in its run
        directory's ``run.json``) differs from the plan.

    Notes
    -----
    A run recorded with another configuration is never silently reused nor overwritten: rerun in another
    ``--output-dir``, or delete the run's line and directory to redo it.
    """
    sources = []
    if recorded is not None:
        sources.append((str(results_path), recorded["config"]))
    run_file = run.run_dir / RUN_FILE
    if run_file.exists():
        sources.append((str(run_file), json.loads(run_file.read_text(encoding="utf-8"))["config"]))
    for source, config in sources:
        differences = config_differences(config, run.config)
        if differences:
            raise ValueError(
                f"{source}: run {run.name} was made with another configuration ({'; '.join(differences)}); "
                "use another --output-dir, or delete its results line and its run directory to redo it"
            )
    return recorded is not None
