"""Table 2's verdicts, generated from its records: every row against base, seed by seed, with a paired test.

What ``transformer experiment report table2`` writes into EXPERIMENTS.md. Each row gets its dev BLEU and
perplexity over seeds (mean, 95% t interval, seed count), its BLEU difference from base per seed with the
paired bootstrap p-value, the paper's figure and direction, and the verdict of the project's rule
(:func:`~transformer.experiments.common.statistics.decide_verdict`). The paper's direction is read from its
own numbers by :func:`paper_direction`, so no verdict's target is chosen after seeing ours.
"""

from pathlib import Path
from typing import Any

from transformer.experiments.common.comparisons import compare_with_baseline, describe_over_seeds, dirty_note
from transformer.experiments.common.curves import summarize_curves
from transformer.experiments.common.plan import ExperimentPlan, Variant
from transformer.experiments.common.results import records_by_variant
from transformer.experiments.common.statistics import ALPHA, MIN_SEEDS
from transformer.experiments.table2.report import dropout_rows

#: The smallest difference of the paper's dev BLEU from its base that counts as a direction (BLEU points).
PAPER_DIFFERENCE = 0.5
#: Short names of the settings a row changes, for the "changes" column.
SETTING_NAMES = {
    "model.num_encoder_layers": "N",
    "model.d_model": "d_model",
    "model.d_ff": "d_ff",
    "model.num_heads": "h",
    "model.d_k": "d_k",
    "model.d_v": "d_v",
    "model.dropout": "P_drop",
    "train.label_smoothing": "eps_ls",
    "model.positional_encoding": "positions",
}


def paper_direction(variant: Variant, base: Variant) -> int | None:
    """Read the direction the paper reports for a row against base from its dev BLEU.

    Parameters
    ----------
    variant : Variant
        The row, with the paper's figures in ``reported``.
    base : Variant
        The base row.

    Returns
    -------
    int or None
        +1 when the paper's BLEU is at least :data:`PAPER_DIFFERENCE` above base's, -1 when that much below,
        0 otherwise; None for a row the paper makes no claim about (no BLEU, e.g. the post-norm row).

    Notes
    -----
    The paper reports one run per row to 0.1 BLEU and calls 0.1 "nearly identical" (row E); differences
    under half a point are read as the paper showing no difference, so e.g. A3 (16 heads, 25.8 against 25.8)
    is expected to match base, and A1 (one head, 24.9) to be worse.
    """
    paper, paper_base = variant.reported.get("dev_bleu"), base.reported.get("dev_bleu")
    if paper is None or paper_base is None:
        return None
    difference = float(paper) - float(paper_base)
    if abs(difference) < PAPER_DIFFERENCE:
        return 0
    return 1 if difference > 0 else -1


def describe_changes(variant: Variant, base: Variant) -> str:
    """Name the settings a row changes from base, e.g. ``h 1, d_k 128, d_v 128``.

    Parameters
    ----------
    variant : Variant
        The row.
    base : Variant
        The base row.

    Returns
    -------
    str
        The changed settings at this scale, or ``-`` for base itself; a step factor adds ``steps x3``.

    Notes
    -----
    Read from the rows' overrides, so the column shows what trained, at this scale's widths.
    """
    changes = [
        ("layout post-norm" if value is False else "layout pre-norm")
        if key == "model.norm_first"
        else f"{SETTING_NAMES.get(key, key)} {value}"
        for key, value in variant.overrides.items()
        if base.overrides.get(key) != value
        # Table 2's N is both stacks: the decoder's count is named only where it differs from the encoder's.
        and not (
            key == "model.num_decoder_layers" and value == variant.overrides.get("model.num_encoder_layers")
        )
    ]
    if variant.step_factor != 1:
        factor = variant.step_factor
        shown = f"{factor}" if int(factor) == factor else f"{float(factor):.2f}"
        changes.append(f"steps x{shown}")
    return ", ".join(changes) or "-"


def render_verdicts(plan: ExperimentPlan, records: list[dict[str, Any]], experiment_dir: Path) -> str:
    """Render Table 2's generated section of EXPERIMENTS.md.

    Parameters
    ----------
    plan : ExperimentPlan
        Table 2 at the records' scale.
    records : list of dict
        The ``results.jsonl`` records.
    experiment_dir : Path
        Where the records and their stored sentences are.

    Returns
    -------
    str
        Markdown: one line on the rule and the seeds, a table with a line per row that has records (and
        base), a line naming the rows without records and, once a row-D dropout run kept its curves, a
        table of the dropout runs' curves (:func:`~transformer.experiments.common.curves.summarize_curves`).

    Notes
    -----
    A pure function of the records and their files (no dates, no timings), so the CI test that compares the
    committed section with a regenerated one fails only when a record or the code that reads it changed.
    Rows without records are named in one line rather than given a table line of dashes: a directory made
    with ``--only`` (the 4,000-step row D holds three of Table 2's 27 rows) would otherwise show mostly
    empty lines.
    """
    by_variant = records_by_variant(records)
    base = plan.variant("base")
    seeds = sorted({int(record["seed"]) for record in records})
    lines = [
        f"Generated by `transformer experiment report table2` from {len(records)} records "
        f"(seeds {', '.join(map(str, seeds)) or 'none'}); do not edit by hand. Figures: mean over seeds, "
        f"[95% t interval] where a row has 2 or more. Per seed: BLEU difference from base trained with the "
        f"same seed, with sacreBLEU's paired bootstrap p-value (1,000 resamples) where both runs kept their "
        f"translations ('untested' for records made before they were kept). Paper direction: the sign of "
        f"the paper's BLEU difference from base when at least {PAPER_DIFFERENCE} BLEU, else '=' (no "
        f"difference). Verdict: **reproduced** only when every seed pair is significant at {ALPHA} in the "
        f"paper's direction (for '=': when none is), with at least {MIN_SEEDS} seeds; fewer make it "
        "provisional.",
        "",
        "| row | changes | dev BLEU | dev PPL | vs base, per seed | paper BLEU (direction) | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    not_run = []
    for variant in plan.variants:
        found = by_variant.get(variant.name, [])
        if not found and variant.name != "base":
            not_run.append(variant.name)
            continue
        lines.append(
            "| "
            + " | ".join(_row_cells(variant, base, found, by_variant.get("base", []), experiment_dir))
            + " |"
        )
    if not_run:
        lines += ["", f"Not run in this directory: {', '.join(not_run)}."]
    return "\n".join(lines) + "\n" + _dropout_curves(plan, records, experiment_dir)


def _dropout_curves(plan: ExperimentPlan, records: list[dict[str, Any]], experiment_dir: Path) -> str:
    """Give the section's summary of row D's curves, or nothing when no dropout row has curves."""
    rows = dropout_rows(plan)
    if not any(record["variant"] in rows[1:] and "curves" in record for record in records):
        return ""
    return (
        f"\nRow D's curves (`curves/`, drawn in `table2-curves-D.png`; {', '.join(rows)}): NLL in nats per "
        "target token without label smoothing, the validation NLL the log of the logged perplexity, the "
        "training NLL the mean over the logged interval ending at the last validation, with dropout on (so "
        "for P_drop > 0 it lies above what the weights score without dropout). A last validation NLL above "
        "the lowest marks a run that has begun to overfit.\n\n"
        + summarize_curves(records, experiment_dir, rows)
    )


def _row_cells(
    variant: Variant,
    base: Variant,
    found: list[dict[str, Any]],
    base_records: list[dict[str, Any]],
    experiment_dir: Path,
) -> list[str]:
    """Give one row's cells: name, changes, BLEU, PPL, per-seed tests, the paper's claim and the verdict."""
    direction = paper_direction(variant, base)
    paper = variant.reported.get("dev_bleu", "-")
    if variant.name == "base":
        comparison, verdict, claim = "-", "-" + dirty_note(found), str(paper)
    else:
        comparison, verdict = compare_with_baseline(found, base_records, direction, experiment_dir)
        words = {1: "higher", -1: "lower", 0: "=", None: "no claim"}[direction]
        source = variant.reported.get("claim_from")
        claim = f"{paper} ({words}{f'; {source} in the paper' if source else ''})"
    return [
        variant.name,
        describe_changes(variant, base),
        describe_over_seeds(found, "dev_bleu", 2),
        describe_over_seeds(found, "dev_perplexity", 2),
        comparison,
        claim,
        verdict,
    ]
