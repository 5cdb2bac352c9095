"""The experiments ``transformer experiment NAME`` knows, and the modules each package provides.

Every experiment is a package with the same modules (docs/experiments.md):

* ``settings``: the scales and, for a *training* experiment, ``build_plan(scale) -> ExperimentPlan``;
* ``run``: what the experiment does beyond the shared runner's training and scoring: ``measure(**inputs) ->
  dict`` (extra metrics the worker computes on each trained model), or, for a *measurement* that trains
  nothing (Table 1), ``run_measurement(output_dir, device, scale, report, allow_dirty) -> Path``; absent when
  the shared worker's scores are all the experiment needs;
* ``report``: ``render_table(plan, records) -> str`` and ``plot(plan, records, output_dir) -> list[Path]``
  (the experiment directory's ``table.md`` and figures);
* ``verdicts``: ``render_verdicts(plan, records, experiment_dir) -> str``, its generated section of
  EXPERIMENTS.md (:mod:`transformer.experiments.common.generated_sections`), where it has one.

Modules are imported on first use, so listing the experiments costs nothing and running one never imports the
others and their dependencies.
"""

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from transformer.experiments.common.plan import ExperimentPlan, MeasureHook

#: Experiment name -> its package.
EXPERIMENTS = {
    "table1": "transformer.experiments.table1",
    "table2": "transformer.experiments.table2",
    "positions": "transformer.experiments.positions",
    "attention-scoring": "transformer.experiments.attention_scoring",
    "rnn-baseline": "transformer.experiments.rnn_baseline",
}
#: The scales every experiment accepts.
SCALES = ("tiny", "cpu", "gpu", "paper")
#: The modules an experiment's package may hold, in the order a run uses them.
PARTS = ("settings", "run", "report", "verdicts")
#: A measurement's entry point: ``(output_dir, device, scale, report, allow_dirty) -> report path``.
Measurement = Callable[[Path, str, str, Callable[[str], None], bool], Path]


def experiment_part(name: str, part: str) -> ModuleType | None:
    """Import one module of a named experiment's package.

    Parameters
    ----------
    name : str
        An experiment name, e.g. ``"table2"``.
    part : str
        One of :data:`PARTS`: ``"settings"``, ``"run"``, ``"report"`` or ``"verdicts"``.

    Returns
    -------
    module or None
        The module, e.g. ``transformer.experiments.table2.settings``; None when the package has no such module
        (``table2`` has no ``run``, ``table1`` no ``verdicts``).

    Raises
    ------
    ValueError
        Listing the known names for an unknown experiment, or the parts for an unknown part.

    Notes
    -----
    Imported on demand, so running one experiment never imports the others and their dependencies.
    """
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose one of {', '.join(sorted(EXPERIMENTS))}")
    if part not in PARTS:
        raise ValueError(f"unknown module {part!r} of an experiment; choose one of {', '.join(PARTS)}")
    module = f"{EXPERIMENTS[name]}.{part}"
    if importlib.util.find_spec(module) is None:
        return None
    return importlib.import_module(module)


def measurement(name: str) -> Measurement | None:
    """Return a measurement experiment's entry point, or None for a training experiment.

    Parameters
    ----------
    name : str
        An experiment name.

    Returns
    -------
    callable or None
        ``run.run_measurement`` of the experiment's package (Table 1's), None where it has none.

    Notes
    -----
    ``transformer experiment`` calls a measurement instead of the training runner, and refuses the options
    that only a training uses.
    """
    run = experiment_part(name, "run")
    found: Measurement | None = getattr(run, "run_measurement", None)
    return found


def build_plan(name: str, scale: str) -> ExperimentPlan:
    """Build a training experiment's plan at a scale.

    Parameters
    ----------
    name : str
        An experiment name.
    scale : str
        One of :data:`SCALES`.

    Returns
    -------
    ExperimentPlan
        ``settings.build_plan(scale)`` of the experiment's package.

    Raises
    ------
    ValueError
        For a measurement (it has no plan of runs) or a scale the experiment does not run at.

    Notes
    -----
    The plan is rebuilt from the code whenever it is needed (running, reporting), never stored: the records
    keep each run's resolved configuration, which the runner compares with the plan's.
    """
    settings = experiment_part(name, "settings")
    builder: Callable[[str], ExperimentPlan] | None = getattr(settings, "build_plan", None)
    if builder is None:
        raise ValueError(f"{name} is a measurement: it has no plan of training runs")
    return builder(scale)


def measure_hook(name: str) -> MeasureHook | None:
    """Return the experiment's extra measurement of each trained run, if it has one.

    Parameters
    ----------
    name : str
        An experiment name.

    Returns
    -------
    callable or None
        ``measure(model=..., tokenizer=..., pairs=..., config=..., run_dir=...) -> dict`` from the package's
        ``run`` module, or None.

    Notes
    -----
    Called by the worker after training, on the scored model, so the extra metrics land in the same
    result line as perplexity and BLEU.
    """
    hook: MeasureHook | None = getattr(experiment_part(name, "run"), "measure", None)
    return hook
