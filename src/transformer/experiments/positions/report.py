"""The positions table and plot: encodings by dev score, by length bucket, and the probe."""

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformer.experiments.common.markdown import markdown_table
from transformer.experiments.common.plan import ExperimentPlan
from transformer.experiments.common.results import format_metric, records_by_variant, seed_summary_cells


def _percent(values: Sequence[float | None]) -> str:
    """Format shares as a percentage over seeds."""
    return format_metric([None if value is None else 100 * value for value in values], 0)


def bucket_series(records: Sequence[dict[str, Any]], key: str) -> dict[str, list[float | None]]:
    """Collect one per-bucket metric of a variant's records, bucket by bucket.

    Parameters
    ----------
    records : sequence of dict
        The variant's result records (one per seed).
    key : str
        ``bleu``, ``truncated_share``, ``cut_bleu`` or ``cut_truncated_share``.

    Returns
    -------
    dict of str to list
        Bucket name -> one value per seed (None where the bucket was empty or its translation failed).

    Notes
    -----
    Buckets are matched by name, so seeds with the same L line up.
    """
    series: dict[str, list[float | None]] = defaultdict(list)
    for record in records:
        for bucket in record.get("length_buckets", []):
            series[bucket["name"]].append(bucket.get(key))
    return dict(series)


def dev_scores_table(plan: ExperimentPlan, grouped: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Build the "Dev scores" section: perplexity, BLEU and size per variant, both groups.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    grouped : dict of str to list of dict
        Records by variant name.

    Returns
    -------
    list of str
        The section's lines.

    Notes
    -----
    The paper's figures (base row and row E of Table 2) are shown only at the paper scale, where the
    multi30k group trains the paper's model on WMT14.
    """
    headings = [
        "variant",
        "positions",
        "data",
        "dev PPL",
        "dev BLEU",
        "params x10^6",
        "seeds",
        "min/run",
        "paper PPL",
        "paper BLEU",
    ]
    rows = []
    for variant in plan.variants:
        found = grouped.get(variant.name, [])
        corpus = "grammar, pairs <= L tokens" if variant.group == "length" else "table2 base row"
        rows.append(
            [
                variant.name,
                variant.overrides["model.positional_encoding"],
                corpus,
                *seed_summary_cells(found, variant.reported),
            ]
        )
    return ["## Dev scores", "", *markdown_table(headings, rows)]


def length_table(plan: ExperimentPlan, grouped: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Build the length section: BLEU and truncated inputs per source-length bucket, and how inputs were cut.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    grouped : dict of str to list of dict
        Records by variant name.

    Returns
    -------
    list of str
        The section's lines (starting with a blank line); empty before any length run has a result.

    Notes
    -----
    The learned variant gets a second row, its table cut to L rows, and the error messages it met are quoted
    under the table (:func:`library_behaviour_notes`): how the library handles a too-long input is one of the
    results.
    """
    length_variants = [variant for variant in plan.variants if variant.group == "length"]
    length_records = [record for variant in length_variants for record in grouped.get(variant.name, [])]
    if not length_records:
        return []
    names = list(bucket_series(length_records, "bleu"))
    sizes = {bucket["name"]: bucket["sentences"] for r in length_records for bucket in r["length_buckets"]}
    rows = []
    for variant in length_variants:
        found = grouped.get(variant.name, [])
        if not found:
            continue
        keys = [(variant.name, "bleu", "truncated_share")]
        if variant.overrides["model.positional_encoding"] == "learned":
            keys.append((f"{variant.name}, table cut to L", "cut_bleu", "cut_truncated_share"))
        for label, bleu_key, share_key in keys:
            bleu, share = bucket_series(found, bleu_key), bucket_series(found, share_key)
            rows.append(
                [label, *(f"{format_metric(bleu[name], 1)} ({_percent(share[name])}%)" for name in names)]
            )
    limit = length_records[0]["length_limit"]
    return [
        "",
        f"## BLEU per source length (tokens, EOS included; trained on <= {limit}), truncated inputs in %",
        "",
        *markdown_table(["variant", *(f"{name} ({sizes[name]} sent.)" for name in names)], rows),
        *library_behaviour_notes(length_records),
    ]


def library_behaviour_notes(length_records: Sequence[dict[str, Any]]) -> list[str]:
    """Quote how the library met inputs beyond a learned table of L rows, under the length table.

    Parameters
    ----------
    length_records : sequence of dict
        The length group's records.

    Returns
    -------
    list of str
        Lines (starting with a blank line): the model's refusal of a longer input and, per outcome, the
        buckets translated with outputs not capped at L; empty when no record met either.

    Notes
    -----
    Messages are deduplicated in the order first seen, so seeds that failed alike give one line.
    """
    refusals: dict[str, None] = {}
    uncapped: dict[str, list[str]] = defaultdict(list)
    for record in length_records:
        if record.get("learned_position_error"):
            refusals[record["learned_position_error"]] = None
        for bucket in record["length_buckets"]:
            if "cut_uncapped_error" in bucket:
                error = bucket["cut_uncapped_error"]
                outcome = f"`{error}`" if error else "no error"
                if bucket["name"] not in uncapped[outcome]:
                    uncapped[outcome].append(bucket["name"])
    if not refusals and not uncapped:
        return []
    return [
        "",
        "How the library handles inputs beyond a learned table of L rows (row 'table cut to L'): the "
        "Translator truncates every input to L tokens, EOS included (the share in brackets), and the BLEU "
        "shown caps outputs at L tokens (decode.max_length = L).",
        "",
        *[f"- the model refuses a longer input: `{message}`" for message in refusals],
        *[
            f"- buckets {', '.join(buckets)} translated with the run's decode settings (outputs up to the "
            f"source length + max_length_offset, not capped at L): {outcome}"
            for outcome, buckets in uncapped.items()
        ],
    ]


def probe_table(plan: ExperimentPlan, grouped: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Build the permutation probe's section: encoder equivariance and how often the translation changed.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    grouped : dict of str to list of dict
        Records by variant name.

    Returns
    -------
    list of str
        The section's lines, a row per variant that ran the probe.

    Notes
    -----
    The encoder's largest difference under the permutation is the maximum over seeds, not a mean: for the
    model without positions it must be float rounding in every seed.
    """
    headings = [
        "variant",
        "pairs",
        "encoder max abs diff under the permutation (max over seeds)",
        "encoder max abs",
        "translation changed",
        "exact (original)",
        "exact (swapped)",
    ]
    rows = []
    for variant in plan.variants:
        found = [record for record in grouped.get(variant.name, []) if record.get("probe_pairs")]
        if not found:
            continue
        rows.append(
            [
                variant.name,
                found[0]["probe_pairs"],
                f"{max(record['probe_encoder_max_abs_diff'] for record in found):.1e}",
                format_metric([record["probe_encoder_max_abs"] for record in found], 2),
                _percent([record["probe_translation_changed"] for record in found]) + "%",
                _percent([record["probe_exact_original"] for record in found]) + "%",
                _percent([record["probe_exact_swapped"] for record in found]) + "%",
            ]
        )
    return [
        "## Permutation probe: 'The X verbs the Y.' against 'The Y verbs the X.'",
        "",
        *markdown_table(headings, rows),
    ]


def render_table(plan: ExperimentPlan, records: list[dict[str, Any]]) -> str:
    """Print the three results: dev scores per encoding, BLEU per length bucket, the permutation probe.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its ``results.jsonl`` records.

    Returns
    -------
    str
        Markdown: a dev table (both groups), a length table (BLEU and the share of truncated inputs per
        bucket, with the learned table cut to L as an extra row) and a probe table.

    Notes
    -----
    Values are means over seeds with their spread; ``-`` marks what has not run. Each table is built by its
    own function: :func:`dev_scores_table`, :func:`length_table`, :func:`probe_table`.
    """
    grouped = records_by_variant(records)
    lines = [f"# Positional encodings at scale {plan.scale}", "", plan.notes, ""]
    lines += dev_scores_table(plan, grouped)
    lines += length_table(plan, grouped)
    lines += ["", *probe_table(plan, grouped)]
    return "\n".join(lines) + "\n"


def plot(plan: ExperimentPlan, records: list[dict[str, Any]], output_dir: Path) -> list[Path]:
    """Plot BLEU against source length bucket per encoding (one PNG).

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its results.
    output_dir : Path
        Where ``positions.png`` goes.

    Returns
    -------
    list of Path
        The written figure, or nothing before a length run has finished.

    Notes
    -----
    The first bucket is the trained range; a vertical line marks L. The learned table cut to L rows is
    drawn dashed: its inputs beyond L are truncated.
    """
    from matplotlib.figure import Figure

    from transformer.visualization.attention_plot import save_figure_atomically

    grouped = records_by_variant(records)
    length_variants = [
        variant for variant in plan.variants if variant.group == "length" and variant.name in grouped
    ]
    if not length_variants:
        return []
    figure = Figure(figsize=(7, 4.5))
    axes = figure.subplots()
    names: list[str] = []
    for variant in length_variants:
        found = grouped[variant.name]
        series = [(variant.name, "bleu", "-")]
        if variant.overrides["model.positional_encoding"] == "learned":
            series.append((f"{variant.name} (table cut to L)", "cut_bleu", "--"))
        color = None
        for label, key, style in series:
            values = bucket_series(found, key)
            names = list(values)
            means = [
                sum(value for value in seeds if value is not None) / max(1, sum(v is not None for v in seeds))
                if any(value is not None for value in seeds)
                else float("nan")
                for seeds in values.values()
            ]
            (line,) = axes.plot(range(len(names)), means, style, marker="o", label=label, color=color)
            color = line.get_color()  # the cut table in the colour of its model
    axes.set_xticks(range(len(names)), names)
    axes.axvline(0.5, color="grey", linewidth=0.8)
    limit = grouped[length_variants[0].name][0].get("length_limit", "L")
    axes.set(
        title=f"Length generalisation (scale {plan.scale}; trained on <= {limit} tokens)",
        xlabel="source length bucket (BPE tokens, EOS included)",
        ylabel="BLEU",
    )
    axes.legend(fontsize=8)
    figure.tight_layout()
    path = output_dir / "positions.png"
    save_figure_atomically(figure, path)
    return [path]
