"""Training and validation curves of an experiment's runs, kept beside the results and plotted.

Each finished run's ``metrics.jsonl`` (the trainer's log: training loss every ``log_every`` steps, validation
loss every ``validate_every``) is copied to ``curves/VARIANT-sSEED.metrics.jsonl`` in the experiment directory,
which is committed with the results, so a claim about training (row D's "dropout helps against
overfitting") can be checked against the curves of the very runs the table reports.
"""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformer.atomic_files import write_text_atomically

#: Folder of an experiment directory holding the runs' curves.
CURVES_DIR = "curves"


def keep_run_curves(run_dir: Path, experiment_dir: Path, run_name: str) -> dict[str, str]:
    """Copy a finished run's ``metrics.jsonl`` beside the results and give the record's key for it.

    Parameters
    ----------
    run_dir : Path
        The run directory.
    experiment_dir : Path
        The experiment directory.
    run_name : str
        ``VARIANT-sSEED``.

    Returns
    -------
    dict of str to str
        ``{"curves": "curves/VARIANT-sSEED.metrics.jsonl"}``, or empty when the run wrote no metrics.

    Notes
    -----
    Written atomically; a run recorded again (redone after deleting its line) replaces its curves, as its
    record is replaced.
    """
    source = run_dir / "metrics.jsonl"
    if not source.exists():
        return {}
    relative = f"{CURVES_DIR}/{run_name}.metrics.jsonl"
    (experiment_dir / CURVES_DIR).mkdir(parents=True, exist_ok=True)
    write_text_atomically(experiment_dir / relative, source.read_text(encoding="utf-8"))
    return {"curves": relative}


def read_curve(experiment_dir: Path, relative: str, kind: str, key: str) -> tuple[list[int], list[float]]:
    """Read one curve from a kept ``metrics.jsonl``.

    Parameters
    ----------
    experiment_dir : Path
        The experiment directory.
    relative : str
        The record's ``curves`` path.
    kind : str
        ``train`` or ``valid`` (the lines' ``kind``).
    key : str
        The value plotted, e.g. ``valid_loss`` or ``train_nll``.

    Returns
    -------
    tuple of list
        Steps and values, in file order (lines without the key are left out).

    Notes
    -----
    A resumed run logs the steps after its checkpoint again; the last value logged for a step is kept.
    """
    points: dict[int, float] = {}
    for line in (experiment_dir / relative).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        if entry.get("kind") == kind and key in entry:
            points[int(entry["step"])] = float(entry[key])
    steps = sorted(points)
    return steps, [points[step] for step in steps]


def plot_curves(
    records: Sequence[dict[str, Any]], experiment_dir: Path, variants: Sequence[str], path: Path
) -> Path | None:
    """Plot training NLL and validation loss against steps for some variants, every seed.

    Parameters
    ----------
    records : sequence of dict
        The experiment's records (those with ``curves``).
    experiment_dir : Path
        The experiment directory.
    variants : sequence of str
        The variants to draw, e.g. base and row D's.
    path : Path
        The PNG written.

    Returns
    -------
    Path or None
        ``path``, or None when no selected record has curves (nothing is written).

    Notes
    -----
    Training NLL (without label smoothing) and validation loss on one axis per panel: overfitting shows as
    the validation loss rising while the training NLL keeps falling, which is what dropout should delay.
    """
    chosen = [record for record in records if record["variant"] in variants and "curves" in record]
    if not chosen:
        return None
    from matplotlib.figure import Figure

    from transformer.visualization.attention_plot import save_figure_atomically

    figure = Figure(figsize=(10, 4.5))
    training, validation = figure.subplots(1, 2, sharey=True)
    for record in sorted(chosen, key=lambda record: (variants.index(record["variant"]), int(record["seed"]))):
        label = f"{record['variant']} s{record['seed']}"
        training.plot(*read_curve(experiment_dir, record["curves"], "train", "train_nll"), label=label)
        validation.plot(*read_curve(experiment_dir, record["curves"], "valid", "valid_loss"), label=label)
    training.set(title="training NLL", xlabel="step", ylabel="nats per token")
    validation.set(title="validation loss", xlabel="step")
    validation.legend(fontsize=7)
    figure.tight_layout()
    return save_figure_atomically(figure, path)
