"""The attention-scoring experiment's table and plots: grids over scoring and d_k, every run, statistics."""

from pathlib import Path
from typing import Any

from transformer.experiments.attention_scoring.attention_statistics import STATISTICS
from transformer.experiments.attention_scoring.settings import (
    KEY_WIDTHS,
    SCORING_LABELS,
    SCORINGS,
    variant_name,
)
from transformer.experiments.common.markdown import markdown_table
from transformer.experiments.common.plan import ExperimentPlan, run_config
from transformer.experiments.common.results import format_metric, records_by_variant

#: The statistics of the table and the plots, with their headings.
STATISTIC_HEADINGS = {
    "qk_variance": "Var(q.k)",
    "entropy": "entropy (nats)",
    "saturated_share": "saturated rows",
    "logit_grad_norm": "|dL/dlogits|",
}


def _values(found: list[dict[str, Any]], key: str, factor: float = 1.0) -> list[float | None]:
    """Collect one metric of the seeds of a variant (None where a record lacks it)."""
    return [None if record.get(key) is None else float(record[key]) * factor for record in found]


def metric_grid(grouped: dict[str, list[dict[str, Any]]], key: str, digits: int) -> list[str]:
    """Build a Markdown grid of one metric: a row per scoring, a column per d_k.

    Parameters
    ----------
    grouped : dict of str to list of dict
        Records by variant name.
    key : str
        The metric, e.g. ``dev_bleu``.
    digits : int
        Decimals shown.

    Returns
    -------
    list of str
        The grid's lines.

    Notes
    -----
    The experiment's result at a glance: section 3.2.1's claims are about how the scorings' rows diverge as
    d_k grows.
    """
    rows = [
        [
            SCORING_LABELS[scoring],
            *(
                format_metric(_values(grouped.get(variant_name(scoring, d_k), []), key), digits)
                for d_k in KEY_WIDTHS
            ),
        ]
        for scoring in SCORINGS
    ]
    return markdown_table(["scoring", *(f"d_k={d_k}" for d_k in KEY_WIDTHS)], rows)


def runs_table(plan: ExperimentPlan, grouped: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Build the table of every variant: its widths and steps, dev loss, perplexity, BLEU, size and time.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    grouped : dict of str to list of dict
        Records by variant name.

    Returns
    -------
    list of str
        The table's lines, a row per variant.

    Notes
    -----
    Widths and steps come from the plan's resolved configuration, so the table says what was trained.
    """
    headings = [
        "variant",
        "scoring",
        "d_k",
        "d_v",
        "steps",
        "dev loss",
        "dev PPL",
        "dev BLEU",
        "params x10^6",
        "seeds",
        "min/run",
    ]
    rows = []
    for variant in plan.variants:
        model, train = (config := run_config(plan, variant, 1))["model"], config["train"]
        found = grouped.get(variant.name, [])
        rows.append(
            [
                variant.name,
                SCORING_LABELS[variant.group],
                model["d_k"],
                model["d_v"],
                train["max_steps"],
                format_metric(_values(found, "dev_nll"), 3),
                format_metric(_values(found, "dev_perplexity"), 2),
                format_metric(_values(found, "dev_bleu"), 1),
                format_metric(_values(found, "params", 1e-6), 2),
                len(found),
                format_metric(_values(found, "worker_seconds", 1 / 60), 1),
            ]
        )
    return markdown_table(headings, rows)


def statistics_table(plan: ExperimentPlan, grouped: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Build the table of the attention statistics per variant, ``at initialisation -> after training``.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    grouped : dict of str to list of dict
        Records by variant name.

    Returns
    -------
    list of str
        The table's lines, a row per variant.

    Notes
    -----
    Averages over all attention layers; the per-kind and per-layer values are in ``results.jsonl``.
    """
    rows = []
    for variant in plan.variants:
        found = grouped.get(variant.name, [])
        cells = [variant.name]
        for name in STATISTICS:
            digits = 3 if name in ("entropy", "saturated_share") else 4
            before = format_metric(_values(found, f"init_{name}"), digits)
            after = format_metric(_values(found, f"trained_{name}"), digits)
            cells.append("-" if before == after == "-" else f"{before} -> {after}")
        rows.append(cells)
    return markdown_table(["variant", *(STATISTIC_HEADINGS[name] for name in STATISTICS)], rows)


def render_table(plan: ExperimentPlan, records: list[dict[str, Any]]) -> str:
    """Print the results: BLEU and perplexity grids, then every run's figures and attention statistics.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its ``results.jsonl`` records.

    Returns
    -------
    str
        Markdown: a dev BLEU grid and a dev perplexity grid (scoring x d_k, :func:`metric_grid`), a table of
        dev loss, perplexity, BLEU, parameters, seeds and minutes per variant (:func:`runs_table`), and a
        table of the four attention statistics at initialisation and after training
        (:func:`statistics_table`).

    Notes
    -----
    Values are means over seeds (``± spread`` with several); runs not finished yet show ``-``.
    """
    grouped = records_by_variant(records)
    lines = [f"# Attention scoring against d_k at scale {plan.scale}", "", plan.notes, ""]
    lines += ["## Dev BLEU", "", *metric_grid(grouped, "dev_bleu", 1), ""]
    lines += ["## Dev perplexity (per BPE token)", "", *metric_grid(grouped, "dev_perplexity", 2), ""]
    lines += ["## Every run", "", *runs_table(plan, grouped)]
    lines += ["", "## Attention statistics, at initialisation -> after training (mean over layers)", ""]
    lines += statistics_table(plan, grouped)
    return "\n".join(lines) + "\n"


def _mean_over_seeds(found: list[dict[str, Any]], key: str) -> float | None:
    """Average a metric over seeds, None without a value."""
    values = [float(record[key]) for record in found if record.get(key) is not None]
    return sum(values) / len(values) if values else None


def _draw_lines(axes: Any, grouped: dict[str, list[dict[str, Any]]], key: str) -> None:
    """Plot one metric against d_k, a line per scoring (finished runs only)."""
    for scoring in SCORINGS:
        points = [
            (d_k, value)
            for d_k in KEY_WIDTHS
            if (value := _mean_over_seeds(grouped.get(variant_name(scoring, d_k), []), key)) is not None
        ]
        if points:
            axes.plot(
                [d for d, _ in points], [v for _, v in points], marker="o", label=SCORING_LABELS[scoring]
            )
    axes.set_xscale("log", base=2)
    axes.set_xticks(KEY_WIDTHS, [str(d_k) for d_k in KEY_WIDTHS])
    axes.set_xlabel("d_k")


def plot(plan: ExperimentPlan, records: list[dict[str, Any]], output_dir: Path) -> list[Path]:
    """Plot dev BLEU and perplexity against d_k, and the attention statistics at init and after training.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its results.
    output_dir : Path
        Where ``attention-scoring.png`` and ``attention-scoring-statistics.png`` go.

    Returns
    -------
    list of Path
        The two figures.

    Notes
    -----
    d_k is on a log2 axis, one line per scoring, means over seeds. The statistics figure has a row per
    statistic (saturated share, entropy, q . k variance and logit gradient norm, the last two on log axes)
    and a column each for initialisation and after training, with shared y axes so the columns compare.
    """
    from matplotlib.figure import Figure

    from transformer.visualization.attention_plot import save_figure_atomically

    grouped = records_by_variant(records)
    figure = Figure(figsize=(11, 4.5))
    bleu, perplexity = figure.subplots(1, 2)
    _draw_lines(bleu, grouped, "dev_bleu")
    bleu.set(title=f"dev BLEU (scale {plan.scale})", ylabel="BLEU")
    _draw_lines(perplexity, grouped, "dev_perplexity")
    perplexity.set(title=f"dev perplexity (scale {plan.scale})", ylabel="perplexity per BPE token")
    bleu.legend(fontsize=8)
    figure.tight_layout()
    scores_path = output_dir / "attention-scoring.png"
    save_figure_atomically(figure, scores_path)

    order = ("saturated_share", "entropy", "qk_variance", "logit_grad_norm")
    figure = Figure(figsize=(11, 13))
    grid = figure.subplots(len(order), 2, sharey="row")
    for row, name in enumerate(order):
        for column, stage in enumerate(("init", "trained")):
            axes = grid[row][column]
            _draw_lines(axes, grouped, f"{stage}_{name}")
            axes.set(
                title=f"{STATISTIC_HEADINGS[name]}, {'at initialisation' if stage == 'init' else 'trained'}"
            )
            if name in ("qk_variance", "logit_grad_norm"):
                axes.set_yscale("log")
    grid[0][0].legend(fontsize=8)
    figure.tight_layout()
    statistics_path = output_dir / "attention-scoring-statistics.png"
    save_figure_atomically(figure, statistics_path)
    return [scores_path, statistics_path]
