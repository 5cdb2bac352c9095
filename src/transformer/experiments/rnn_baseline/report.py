"""The rnn-baseline table and plot: quality and cost, time to quality, decoding speed, the curves."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformer.experiments.common.plan import ExperimentPlan
from transformer.experiments.common.results import format_metric, records_by_variant
from transformer.experiments.rnn_baseline.settings import AVERAGE_LAST, BLEU_LEVELS, BUDGET_TOLERANCE


def _time_to_level(found: Sequence[dict[str, Any]], level: float) -> str:
    """Format the minutes to a BLEU level over seeds: the mean of the seeds that reached it, and how many."""
    reached = [record["time_to_bleu"][f"{level:g}"] for record in found]
    minutes = [item["seconds"] / 60 for item in reached if item is not None]
    if not found:
        return "-"
    if not minutes:
        return "not reached"
    steps = [item["step"] for item in reached if item is not None]
    cell = f"{format_metric(minutes, 1)} (step {round(sum(steps) / len(steps))})"
    return cell if len(minutes) == len(found) else f"{cell}, {len(minutes)} of {len(found)} seeds"


def _over_budget(record: dict[str, Any]) -> bool:
    """Tell whether a run trained longer than its budget (it was interrupted and resumed)."""
    budget = record["config"]["train"]["max_minutes"]
    return budget is not None and record["train_seconds"] > 60 * budget * (1 + BUDGET_TOLERANCE)


def render_table(plan: ExperimentPlan, records: list[dict[str, Any]]) -> str:
    """Print the comparison: quality and cost, time to quality, decoding speed, and the curves' points.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its ``results.jsonl`` records.

    Returns
    -------
    str
        Markdown: one table of parameters, training precision, steps, minutes, tokens, FLOPs and dev BLEU;
        one of the minutes (and step) to each BLEU level; one of decoding speed; the curves as text.

    Notes
    -----
    Means over seeds with their spread; ``-`` marks a model not run yet. A run whose training time exceeds
    its budget (it was interrupted and resumed, and the trainer's budget counts per invocation) is marked
    with ``*`` and explained under the table: its cost and times are not the budget's.
    """
    grouped = records_by_variant(records)
    beam = plan.base["decode"]["beam_size"]
    lines = [f"# Transformer against the recurrent baseline at scale {plan.scale}", "", plan.notes, ""]
    lines += [
        "## Quality and training cost",
        "",
        "| model | params x10^6 | precision, threads | steps (stopped by) | train min | "
        "target tokens x10^6 | FLOPs per target token x10^6 | training FLOPs | "
        f"dev BLEU (beam {beam}, last {AVERAGE_LAST} averaged) | dev BLEU greedy, last checkpoint | seeds |",
        "|" + "---|" * 11,
    ]
    flagged = False
    for variant in plan.variants:
        found = grouped.get(variant.name, [])
        over = any(_over_budget(record) for record in found)
        flagged = flagged or over
        settings = sorted({f"{r['train_precision']}, {r['train_threads'] or '-'}" for r in found})
        cells = [
            variant.name + (" *" if over else ""),
            format_metric([record["params"] / 1e6 for record in found], 2),
            "; ".join(settings) or "-",
            format_metric([record["train_steps"] for record in found], 0)
            + (f" ({', '.join(sorted({r['stop_reason'] for r in found}))})" if found else ""),
            format_metric([record["train_seconds"] / 60 for record in found], 1),
            format_metric([record["train_tokens"] / 1e6 for record in found], 2),
            format_metric([record["train_flops_per_target_token"] / 1e6 for record in found], 1),
            _format_flops([record["train_flops"] for record in found]),
            format_metric([record["dev_bleu"] for record in found], 2),
            format_metric([record["curve"][-1]["greedy_bleu"] for record in found], 2),
            len(found),
        ]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    if flagged:
        lines += [
            "",
            f"\\* trained more than {BUDGET_TOLERANCE:.0%} longer than its budget: usually because it was "
            "interrupted and resumed (the trainer's max_minutes counts per invocation), else because its steps "
            "are long against the budget. Its times and cost are not the budget's; rerun it in a fresh "
            "--output-dir.",
        ]
    lines += _time_table(plan, grouped) + _speed_table(plan, grouped, beam) + _curve_lines(plan, grouped)
    return "\n".join(lines) + "\n"


def _format_flops(values: Sequence[float]) -> str:
    """Format FLOPs over seeds in scientific notation (mean, and the spread with several seeds)."""
    if not values:
        return "-"
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.2e}"
    spread = (sum((value - mean) ** 2 for value in values) / (len(values) - 1)) ** 0.5
    return f"{mean:.2e} ± {spread:.1e}"


def _time_table(plan: ExperimentPlan, grouped: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Lines of the time-to-quality table: minutes (and step) to each BLEU level per model."""
    lines = [
        "",
        "## Time to quality: training minutes until greedy dev BLEU first reaches a level (checkpoint step)",
        "",
        "| model | " + " | ".join(f"BLEU {level:g}" for level in BLEU_LEVELS) + " |",
        "|" + "---|" * (len(BLEU_LEVELS) + 1),
    ]
    for variant in plan.variants:
        found = grouped.get(variant.name, [])
        cells = [variant.name, *(_time_to_level(found, level) for level in BLEU_LEVELS)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _speed_table(plan: ExperimentPlan, grouped: dict[str, list[dict[str, Any]]], beam: int) -> list[str]:
    """Lines of the decoding-speed table: sentences and output tokens per second, greedy and beam."""
    sample = next((found[0] for found in grouped.values() if found), None)
    where = (
        f"{sample['decode_sentences']} validation sentences, fp32, {sample['decode_threads']} threads"
        if sample
        else "validation set"
    )
    lines = [
        "",
        f"## Decoding speed ({where}; output tokens exclude EOS)",
        "",
        f"| model | greedy sent/s | greedy tok/s | beam {beam} sent/s | beam {beam} tok/s |",
        "|---|---|---|---|---|",
    ]
    for variant in plan.variants:
        found = grouped.get(variant.name, [])
        cells = [variant.name]
        for search in ("greedy", "beam"):
            for unit in ("sentences", "tokens"):
                cells.append(format_metric([r[f"decode_{search}_{unit}_per_second"] for r in found], 0))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _curve_lines(plan: ExperimentPlan, grouped: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Lines listing each run's curve as ``minutes: BLEU`` pairs (the plot's data, in text)."""
    lines = ["", "## Curves: training minutes: greedy dev BLEU, per checkpoint", ""]
    for variant in plan.variants:
        for record in grouped.get(variant.name, []):
            points = ", ".join(
                f"{point['elapsed_seconds'] / 60:.1f}: {point['greedy_bleu']:.1f}"
                for point in record["curve"]
            )
            lines.append(f"- {variant.name}, seed {record['seed']}: {points}")
    return lines


def plot(plan: ExperimentPlan, records: list[dict[str, Any]], output_dir: Path) -> list[Path]:
    """Plot greedy dev BLEU against training time and against training FLOPs, both models (one PNG).

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its results.
    output_dir : Path
        Where ``rnn_baseline.png`` goes.

    Returns
    -------
    list of Path
        The written figure.

    Notes
    -----
    Left: the time-to-quality curves of both models on one axis (minutes of training), with the BLEU levels
    of the time table as dotted lines. Right: the same points against cumulative training FLOPs (log scale),
    the paper's measure of cost. One line per run; a model's seeds share its colour.
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from transformer.visualization.attention_plot import save_figure_atomically

    figure = Figure(figsize=(11, 4.5))
    by_time, by_flops = figure.subplots(1, 2, sharey=True)
    grouped = records_by_variant(records)
    for index, variant in enumerate(plan.variants):
        color = f"C{index}"
        for number, record in enumerate(grouped.get(variant.name, [])):
            bleu = [point["greedy_bleu"] for point in record["curve"]]
            label = variant.name if number == 0 else None
            minutes = [point["elapsed_seconds"] / 60 for point in record["curve"]]
            by_time.plot(minutes, bleu, marker="o", markersize=3, color=color, label=label)
            flops = [max(point["train_flops"], 1.0) for point in record["curve"]]
            by_flops.plot(flops, bleu, marker="o", markersize=3, color=color, label=label)
    for level in BLEU_LEVELS:
        for axes in (by_time, by_flops):
            axes.axhline(level, color="grey", linewidth=0.6, linestyle=":")
    by_time.set(
        title=f"Time to quality (scale {plan.scale})", xlabel="training minutes", ylabel="dev BLEU (greedy)"
    )
    by_time.set_xlim(left=0)
    by_time.set_ylim(bottom=0)
    by_flops.set(title="Quality against training cost", xlabel="training FLOPs", xscale="log")
    # The runs span about one decade of FLOPs: label 1, 2 and 5 of each decade ("2e+14"), not every minor tick.
    by_flops.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    by_flops.xaxis.set_major_formatter(FuncFormatter(lambda value, _position: f"{value:.0e}"))
    by_flops.xaxis.set_minor_formatter(NullFormatter())
    by_time.legend(fontsize=8)
    figure.tight_layout()
    path = output_dir / "rnn_baseline.png"
    save_figure_atomically(figure, path)
    return [path]
