"""The table2 experiment's table and plots: our figures beside the paper's, and row D's training curves."""

from pathlib import Path
from typing import Any

from transformer.experiments.common.curves import plot_curves
from transformer.experiments.common.plan import ExperimentPlan, run_config
from transformer.experiments.common.results import records_by_variant, seed_summary_cells


def render_table(plan: ExperimentPlan, records: list[dict[str, Any]]) -> str:
    """Print Table 2 as the paper does, with our figures (mean ± spread over seeds) beside the paper's.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its ``results.jsonl`` records.

    Returns
    -------
    str
        A Markdown table: N, d_model, d_ff, h, d_k, d_v, P_drop, eps_ls, steps, dev PPL, dev BLEU,
        params x10^6, seeds, minutes per run, and the paper's PPL, BLEU and params.

    Notes
    -----
    Rows without results yet show ``-``; the paper's figures are for newstest2013 EN-DE at full size, so only
    the *differences between rows* are comparable with ours, not the values.
    """
    by_variant = records_by_variant(records)
    header = (
        "| row | N | d_model | d_ff | h | d_k | d_v | P_drop | eps_ls | steps | PPL (dev) | BLEU (dev) | "
        "params x10^6 | seeds | min/run | paper PPL | paper BLEU | paper params |"
    )
    lines = [f"# Table 2 at scale {plan.scale}", "", plan.notes, "", header, "|" + "---|" * 18]
    for variant in plan.variants:
        config = run_config(plan, variant, 1)
        model, train = config["model"], config["train"]
        found = by_variant.get(variant.name, [])
        default_head = model["d_model"] // model["num_heads"]
        cells = [
            variant.name,
            model["num_encoder_layers"],
            model["d_model"],
            model["d_ff"],
            model["num_heads"],
            model["d_k"] or default_head,
            model["d_v"] or default_head,
            model["dropout"],
            train["label_smoothing"],
            train["max_steps"],
            *seed_summary_cells(found, variant.reported),
            variant.reported.get("params_millions", "-"),
        ]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def plot(plan: ExperimentPlan, records: list[dict[str, Any]], output_dir: Path) -> list[Path]:
    """Plot dev BLEU against dev perplexity per row, ours beside the paper's, and row D's training curves.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its results.
    output_dir : Path
        Where ``table2.png`` goes.

    Returns
    -------
    list of Path
        The written figures: ``table2.png`` and, once runs kept their curves, ``table2-curves-D.png``
        (training NLL and validation loss of base and row D, every seed).

    Notes
    -----
    The paper's Table 2 shows perplexity and BLEU moving together across rows; the plot lets one see at a
    glance whether our rows keep the paper's order, which is the claim a smaller scale can test.
    """
    from matplotlib.figure import Figure

    from transformer.visualization.attention_plot import save_figure_atomically

    figure = Figure(figsize=(10, 4.5))
    ours, paper = figure.subplots(1, 2)
    by_variant = records_by_variant(records)
    for variant in plan.variants:
        found = by_variant.get(variant.name)
        if found:
            perplexity = sum(record["dev_perplexity"] for record in found) / len(found)
            bleu = sum(record["dev_bleu"] for record in found) / len(found)
            ours.scatter([perplexity], [bleu], s=12)
            ours.annotate(variant.name, (perplexity, bleu), fontsize=7)
        if "dev_perplexity" in variant.reported:
            paper.scatter([variant.reported["dev_perplexity"]], [variant.reported["dev_bleu"]], s=12)
            paper.annotate(
                variant.name, (variant.reported["dev_perplexity"], variant.reported["dev_bleu"]), fontsize=7
            )
    ours.set(
        title=f"ours (scale {plan.scale}, validation)",
        xlabel="dev perplexity (per BPE token)",
        ylabel="dev BLEU",
    )
    paper.set(title="paper (newstest2013, full size)", xlabel="dev perplexity", ylabel="dev BLEU")
    figure.tight_layout()
    path = output_dir / "table2.png"
    save_figure_atomically(figure, path)
    curves = plot_curves(records, output_dir, dropout_rows(plan), output_dir / "table2-curves-D.png")
    return [path] + ([curves] if curves is not None else [])


def dropout_rows(plan: ExperimentPlan) -> list[str]:
    """Name base and row D's dropout rows, the runs ``table2-curves-D.png`` draws.

    Parameters
    ----------
    plan : ExperimentPlan
        Table 2's plan.

    Returns
    -------
    list of str
        Base and the row-D variants with base's label smoothing (at every scale: base, D1, D2).

    Notes
    -----
    Row D's dropout claim is about overfitting (issue #29), which the curves show; the label smoothing rows
    (D3, D4) ask another question, and fifteen curves at three seeds would hide the nine that answer it.
    """
    base_smoothing = next(variant for variant in plan.variants if variant.name == "base").overrides[
        "train.label_smoothing"
    ]
    return [
        variant.name
        for variant in plan.variants
        if variant.group in ("base", "D") and variant.overrides["train.label_smoothing"] == base_smoothing
    ]
