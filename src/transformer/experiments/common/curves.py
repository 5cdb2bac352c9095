"""Training and validation curves of an experiment's runs, kept beside the results and plotted.

Each finished run's ``metrics.jsonl`` (the trainer's log: training loss every ``log_every`` steps, validation
loss every ``validate_every``) is copied to ``curves/VARIANT-sSEED.metrics.jsonl`` in the experiment directory,
which is committed with the results, so a claim about training (row D's "dropout helps against
overfitting") can be checked against the curves of the very runs the table reports.
"""

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformer.atomic_files import write_text_atomically
from transformer.metrics_log import read_metrics_series

if TYPE_CHECKING:  # matplotlib is imported when a plot is drawn, not when the runner starts
    from matplotlib.figure import Figure

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


def read_nll_curves(
    experiment_dir: Path, relative: str
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """Read a kept ``metrics.jsonl``'s training NLL and validation NLL, both in one pass over the file.

    Parameters
    ----------
    experiment_dir : Path
        The experiment directory.
    relative : str
        The record's ``curves`` path.

    Returns
    -------
    training : list of (int, float)
        ``(step, train_nll)`` points, sorted by step.
    validation : list of (int, float)
        ``(step, log(valid_perplexity))`` points, sorted by step.

    Raises
    ------
    ValueError
        Naming the file and line for a damaged line, and the file and step for a validation perplexity that
        is not positive (its log is undefined).

    Notes
    -----
    Both NLLs are without label smoothing: the logged ``valid_loss`` includes the run's own smoothing, so the
    validation NLL is taken as the log of the logged perplexity, which the trainer computes from the NLL.
    """
    path = experiment_dir / relative
    series = read_metrics_series(path, [("train", "train_nll"), ("valid", "valid_perplexity")])
    validation = []
    for step, perplexity in series[("valid", "valid_perplexity")]:
        if not perplexity > 0:
            raise ValueError(
                f"{path}: valid_perplexity at step {step} is {perplexity}, not a positive number"
            )
        validation.append((step, math.log(perplexity)))
    return series[("train", "train_nll")], validation


#: Line styles told apart in print; seeds beyond four reuse them.
SEED_LINE_STYLES = ("-", "--", ":", "-.")


def curve_styles(
    records: Sequence[dict[str, Any]], variants: Sequence[str]
) -> dict[tuple[str, int], tuple[str, str]]:
    """Give each run of a curves plot its colour (one per variant) and line style (one per seed).

    Parameters
    ----------
    records : sequence of dict
        The records plotted (``variant`` and ``seed`` are read).
    variants : sequence of str
        The variants in plotting order; a variant's colour is matplotlib's ``C{index}`` for its index here.

    Returns
    -------
    dict of (str, int) to (str, str)
        ``(variant, seed)`` to ``(colour, line style)``.

    Notes
    -----
    Fifteen runs (five variants at three seeds) in matplotlib's ten-colour cycle repeat colours, so two
    unrelated runs look alike; a colour per variant and a dash per seed keep a variant's seeds together and
    its spread readable. More than ten variants wrap the colour cycle (the caller plots fewer).
    """
    seeds = sorted({int(record["seed"]) for record in records})
    return {
        (str(record["variant"]), int(record["seed"])): (
            f"C{variants.index(record['variant']) % 10}",
            SEED_LINE_STYLES[seeds.index(int(record["seed"])) % len(SEED_LINE_STYLES)],
        )
        for record in records
        if record["variant"] in variants
    }


def draw_curves(records: Sequence[dict[str, Any]], experiment_dir: Path, variants: Sequence[str]) -> "Figure":
    """Draw training and validation NLL against steps for some variants, every seed, on a new figure.

    Parameters
    ----------
    records : sequence of dict
        The records to draw, each with ``curves``, ``variant`` in ``variants`` and ``seed``.
    experiment_dir : Path
        The experiment directory.
    variants : sequence of str
        The variants, in drawing (and colour) order.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels, training NLL and validation NLL, one line per record in each, labelled ``VARIANT sSEED``.

    Notes
    -----
    Both panels are NLL without label smoothing (validation NLL is the log of the logged validation
    perplexity; the logged ``valid_loss`` includes the run's own smoothing, which would make runs with
    different smoothing, and the two panels, incomparable). Overfitting shows as the validation NLL rising
    while the training NLL keeps falling, which is what dropout should delay. Training NLL is measured with
    dropout on, so it sits above what the same weights score without it. Colours follow
    :func:`curve_styles`.
    """
    from matplotlib.figure import Figure

    styles = curve_styles(records, variants)
    figure = Figure(figsize=(10, 4.5))
    training, validation = figure.subplots(1, 2, sharey=True)
    for record in sorted(
        records, key=lambda record: (variants.index(record["variant"]), int(record["seed"]))
    ):
        label = f"{record['variant']} s{record['seed']}"
        colour, line_style = styles[(record["variant"], int(record["seed"]))]
        for axes, points in zip(
            (training, validation), read_nll_curves(experiment_dir, record["curves"]), strict=True
        ):
            axes.plot(
                [step for step, _ in points],
                [value for _, value in points],
                color=colour,
                linestyle=line_style,
                label=label,
            )
    training.set(title="training NLL (no label smoothing)", xlabel="step", ylabel="nats per token")
    validation.set(title="validation NLL (log perplexity)", xlabel="step")
    validation.legend(fontsize=7)
    figure.tight_layout()
    return figure


def plot_curves(
    records: Sequence[dict[str, Any]], experiment_dir: Path, variants: Sequence[str], path: Path
) -> Path | None:
    """Plot training and validation NLL against steps for some variants, every seed, to a PNG.

    Parameters
    ----------
    records : sequence of dict
        The experiment's records (those with ``curves`` and a variant in ``variants`` are drawn).
    experiment_dir : Path
        The experiment directory.
    variants : sequence of str
        The variants to draw, e.g. base and row D's dropout rows.
    path : Path
        The PNG written.

    Returns
    -------
    Path or None
        ``path``, or None when no selected record has curves (nothing is written).

    Notes
    -----
    The figure is :func:`draw_curves`'s; it is written atomically, so an interrupted report leaves the
    committed picture whole.
    """
    chosen = [record for record in records if record["variant"] in variants and "curves" in record]
    if not chosen:
        return None
    from transformer.visualization.attention_plot import save_figure_atomically

    return save_figure_atomically(draw_curves(chosen, experiment_dir, variants), path)


def summarize_curves(records: Sequence[dict[str, Any]], experiment_dir: Path, variants: Sequence[str]) -> str:
    """Tabulate where each run's validation NLL bottoms out and how far it sits above the training NLL.

    Parameters
    ----------
    records : sequence of dict
        The experiment's records; those with ``curves`` and a variant in ``variants`` get a line.
    experiment_dir : Path
        The experiment directory.
    variants : sequence of str
        The variants, in line order (seeds ascending within a variant).

    Returns
    -------
    str
        A Markdown table with a line per run: the lowest validation NLL and its step, the last validation
        NLL and its step, how far the last lies above the lowest, the training NLL logged at that step and
        the validation minus the training NLL (dashes for a log without both); empty when no selected
        record has curves.

    Notes
    -----
    The figures behind row D's claim (dropout helps against overfitting), read from the curves the report
    draws (:func:`draw_curves`, the same two NLLs), so the text quotes generated numbers rather than figures
    read off a picture. A last validation NLL above the lowest marks a run that has started to overfit. The
    training NLL is the mean over the last logged interval with dropout on, so for a run with dropout it
    lies above what the same weights score without it, and the gap understates the overfitting.
    """
    chosen = sorted(
        (record for record in records if record["variant"] in variants and "curves" in record),
        key=lambda record: (variants.index(record["variant"]), int(record["seed"])),
    )
    if not chosen:
        return ""
    lines = [
        "| run | lowest validation NLL (step) | last validation NLL (step) | last above lowest | "
        "training NLL at the last step | validation minus training |",
        "|---|---|---|---|---|---|",
    ]
    for record in chosen:
        training, validation = read_nll_curves(experiment_dir, record["curves"])
        run = f"{record['variant']} s{record['seed']}"
        if not training or not validation:
            lines.append(f"| {run} | - | - | - | - | - |")
            continue
        lowest_step, lowest = min(validation, key=lambda point: point[1])
        last_step, last = validation[-1]
        # The training interval that ends at (or last before) the final validation.
        train_nll = next((nll for step, nll in reversed(training) if step <= last_step), math.nan)
        lines.append(
            f"| {run} | {lowest:.3f} ({lowest_step}) | {last:.3f} ({last_step}) | {last - lowest:+.3f} | "
            f"{train_nll:.3f} | {last - train_nll:+.3f} |"
        )
    return "\n".join(lines) + "\n"
