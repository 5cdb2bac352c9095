"""Training and validation loss and the learning rate against the step, read from a JSON-lines metrics log."""

import math
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from transformer.metrics_log import SeriesName, read_metrics_series
from transformer.visualization.attention_plot import save_figure_atomically

#: The metrics-log series this plot draws (:func:`~transformer.metrics_log.read_metrics_series` names).
TRAIN_LOSS: SeriesName = ("train", "train_loss")
#: The learning rate logged with each training record.
LEARNING_RATE: SeriesName = ("train", "learning_rate")
#: The validation loss, label smoothing included (the trainer's ``valid_loss``).
VALID_LOSS: SeriesName = ("valid", "valid_loss")


@dataclass
class TrainingCurves:
    """Series read from a metrics log, each a list of (step, value) pairs sorted by step.

    Parameters
    ----------
    train_loss : list of (int, float)
        Training loss per logged step.
    learning_rate : list of (int, float)
        Learning rate per logged step.
    valid_loss : list of (int, float)
        Validation loss per validation run.

    Notes
    -----
    Perplexity and throughput are not plotted: perplexity is ``exp(valid_loss)``.
    """

    train_loss: list[tuple[int, float]] = field(default_factory=list)
    learning_rate: list[tuple[int, float]] = field(default_factory=list)
    valid_loss: list[tuple[int, float]] = field(default_factory=list)


def read_training_curves(metrics_path: Path) -> TrainingCurves:
    """Read loss and learning-rate series from a JSON-lines metrics log.

    Parameters
    ----------
    metrics_path : pathlib.Path
        File with one JSON object per line; blank lines are skipped.

    Returns
    -------
    TrainingCurves
        The series found.

    Raises
    ------
    ValueError
        Naming the file when it is missing or holds no training or validation record, and the file and line
        number when a line is not a JSON object or a value is malformed.

    Notes
    -----
    Read by :func:`transformer.metrics_log.read_metrics_series`, the one reader of the trainer's log:
    records that are neither training nor validation are read past; a line that is not JSON is an error
    rather than skipped, since a damaged log would otherwise plot partial curves without a word.
    """
    series = read_metrics_series(metrics_path, [TRAIN_LOSS, LEARNING_RATE, VALID_LOSS])
    curves = TrainingCurves(series[TRAIN_LOSS], series[LEARNING_RATE], series[VALID_LOSS])
    if not (curves.train_loss or curves.valid_loss or curves.learning_rate):
        raise ValueError(f"metrics file {metrics_path} holds no training or validation records")
    return curves


def _draw_losses(axes: Axes, curves: TrainingCurves) -> None:
    if curves.train_loss:
        steps, losses = zip(*curves.train_loss, strict=True)
        axes.plot(steps, losses, color="tab:blue", linewidth=1.2, label="train loss")
    finite_valid = [(step, loss) for step, loss in curves.valid_loss if math.isfinite(loss)]
    if curves.valid_loss:
        steps, losses = zip(*curves.valid_loss, strict=True)
        label = "validation loss"
        if finite_valid:
            best_step, best_loss = min(finite_valid, key=lambda point: point[1])
            label += f" (best {best_loss:.3f} at step {best_step})"
        axes.plot(steps, losses, color="tab:orange", marker="o", markersize=3.5, linewidth=1.5, label=label)
    axes.set_ylabel("loss (nats per token)")
    axes.set_title("Loss")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper right", fontsize=8)


def _draw_learning_rate(axes: Axes, curves: TrainingCurves) -> None:
    if curves.learning_rate:
        steps, rates = zip(*curves.learning_rate, strict=True)
        axes.plot(steps, rates, color="tab:green", linewidth=1.2)
        axes.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    else:
        axes.text(0.5, 0.5, "no learning rate logged", transform=axes.transAxes, ha="center", color="0.4")
    axes.set_ylabel("learning rate")
    axes.set_xlabel("step")
    axes.set_title("Learning rate")
    axes.grid(True, alpha=0.3)


def plot_training_curves(metrics_path: Path, output_path: Path) -> Path:
    """Plot loss (training and validation) and learning rate against the step.

    Parameters
    ----------
    metrics_path : pathlib.Path
        JSON-lines metrics log: training records carry ``step``, ``train_loss``, ``learning_rate`` and
        ``tokens_per_second``; validation records ``step``, ``valid_loss`` and ``valid_perplexity``.
    output_path : pathlib.Path
        Image to write (PNG unless the suffix names another matplotlib format), atomically.

    Returns
    -------
    pathlib.Path
        ``output_path``.

    Raises
    ------
    ValueError
        For a missing file or a malformed line, naming the file and line number.

    Notes
    -----
    Two panels sharing the step axis: losses on top (the legend gives the best validation loss), the learning
    rate below, where the warm-up then inverse-square-root decay of Eq. (3) should be visible.
    """
    curves = read_training_curves(metrics_path)
    figure = Figure(figsize=(8.0, 6.5), layout="constrained")
    FigureCanvasAgg(figure)
    loss_axes, rate_axes = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    _draw_losses(loss_axes, curves)
    _draw_learning_rate(rate_axes, curves)
    # A literal "$" would otherwise start matplotlib mathtext.
    figure.suptitle(f"Training curves: {Path(metrics_path).name}".replace("$", r"\$"))
    return save_figure_atomically(figure, output_path)
