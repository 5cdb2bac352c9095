"""The experiments ``transformer experiment NAME`` knows, and what each module must provide.

Two kinds of module. A *training* experiment defines ``build_plan(scale) -> ExperimentPlan`` and
``render_table(plan, records) -> str``, optionally ``measure(**inputs) -> dict`` (extra metrics computed by the
worker on the trained model), ``plot(plan, records, output_dir) -> list[Path]`` and ``render_verdicts(plan,
records, experiment_dir) -> str`` (its generated section of EXPERIMENTS.md, :mod:`transformer.experiments.report`);
the runner trains its variants. A *measurement* (Table 1: timing layers, nothing trained) defines ``run_measurement(output_dir,
device, scale, report, allow_dirty) -> Path`` instead. Modules are imported on first use, so listing the
experiments costs nothing.
"""

import importlib
from types import ModuleType

from transformer.experiments.plan import MeasureHook

#: Experiment name -> module.
EXPERIMENTS = {
    "table1": "transformer.experiments.table1",
    "table2": "transformer.experiments.table2",
    "positions": "transformer.experiments.positions",
    "attention-scoring": "transformer.experiments.attention_scoring",
    "rnn-baseline": "transformer.experiments.rnn_baseline",
}
#: The scales every experiment accepts.
SCALES = ("tiny", "cpu", "gpu", "paper")


def experiment_module(name: str) -> ModuleType:
    """Import the module of a named experiment.

    Parameters
    ----------
    name : str
        An experiment name, e.g. ``"table2"``.

    Returns
    -------
    module
        The experiment's module.

    Raises
    ------
    ValueError
        Listing the known names for an unknown one.

    Notes
    -----
    Imported on demand, so running one experiment never imports the others and their dependencies.
    """
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose one of {', '.join(sorted(EXPERIMENTS))}")
    return importlib.import_module(EXPERIMENTS[name])


def measure_hook(name: str) -> MeasureHook | None:
    """Return the experiment's extra measurement, if it has one.

    Parameters
    ----------
    name : str
        An experiment name.

    Returns
    -------
    callable or None
        ``measure(model=..., tokenizer=..., pairs=..., config=..., run_dir=...) -> dict`` or None.

    Notes
    -----
    Called by the worker after training, on the scored model, so the extra metrics land in the same
    result line as perplexity and BLEU.
    """
    hook: MeasureHook | None = getattr(experiment_module(name), "measure", None)
    return hook
