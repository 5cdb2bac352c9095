"""The positions table and plot: encodings by dev score, by length bucket, and the probe."""

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformer.experiments.common.plan import ExperimentPlan
from transformer.experiments.common.results import format_metric, records_by_variant


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
    Values are means over seeds with their spread; ``-`` marks what has not run. The learned variant's
    error messages are quoted under the length table, since how the library handles a too-long input is
    one of the results.
    """
    grouped = records_by_variant(records)
    lines = [f"# Positional encodings at scale {plan.scale}", "", plan.notes, ""]
    lines += [
        "## Dev scores",
        "",
        "| variant | positions | data | dev PPL | dev BLEU | params x10^6 | seeds | min/run | paper PPL | paper BLEU |",
        "|" + "---|" * 10,
    ]
    for variant in plan.variants:
        found = grouped.get(variant.name, [])
        corpus = "grammar, pairs <= L tokens" if variant.group == "length" else "table2 base row"
        cells = [
            variant.name,
            variant.overrides["model.positional_encoding"],
            corpus,
            format_metric([record["dev_perplexity"] for record in found], 2),
            format_metric([record["dev_bleu"] for record in found], 1),
            format_metric([record["params"] / 1e6 for record in found], 2),
            len(found),
            format_metric([record["train_seconds"] / 60 for record in found], 1),
            variant.reported.get("dev_perplexity", "-"),
            variant.reported.get("dev_bleu", "-"),
        ]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    length_variants = [variant for variant in plan.variants if variant.group == "length"]
    length_records = [record for variant in length_variants for record in grouped.get(variant.name, [])]
    if length_records:
        names = list(bucket_series(length_records, "bleu"))
        sizes = {
            bucket["name"]: bucket["sentences"] for r in length_records for bucket in r["length_buckets"]
        }
        limit = length_records[0]["length_limit"]
        lines += [
            "",
            f"## BLEU per source length (tokens, EOS included; trained on <= {limit}), truncated inputs in %",
            "",
            "| variant | " + " | ".join(f"{name} ({sizes[name]} sent.)" for name in names) + " |",
            "|" + "---|" * (len(names) + 1),
        ]
        refusals: dict[str, None] = {}
        uncapped: dict[str, list[str]] = defaultdict(list)
        for variant in length_variants:
            found = grouped.get(variant.name, [])
            if not found:
                continue
            rows = [(variant.name, "bleu", "truncated_share")]
            if variant.overrides["model.positional_encoding"] == "learned":
                rows.append((f"{variant.name}, table cut to L", "cut_bleu", "cut_truncated_share"))
            for label, bleu_key, share_key in rows:
                bleu, share = bucket_series(found, bleu_key), bucket_series(found, share_key)
                cells = [f"{format_metric(bleu[name], 1)} ({_percent(share[name])}%)" for name in names]
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
            for record in found:
                if record.get("learned_position_error"):
                    refusals[record["learned_position_error"]] = None
                for bucket in record["length_buckets"]:
                    if "cut_uncapped_error" in bucket:
                        outcome = (
                            f"`{bucket['cut_uncapped_error']}`"
                            if bucket["cut_uncapped_error"]
                            else "no error"
                        )
                        if bucket["name"] not in uncapped[outcome]:
                            uncapped[outcome].append(bucket["name"])
        if refusals or uncapped:
            lines += [
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
    lines += [
        "",
        "## Permutation probe: 'The X verbs the Y.' against 'The Y verbs the X.'",
        "",
        "| variant | pairs | encoder max abs diff under the permutation (max over seeds) | encoder max abs | "
        "translation changed "
        "| exact (original) | exact (swapped) |",
        "|" + "---|" * 7,
    ]
    for variant in plan.variants:
        found = [record for record in grouped.get(variant.name, []) if record.get("probe_pairs")]
        if not found:
            continue
        cells = [
            variant.name,
            found[0]["probe_pairs"],
            f"{max(record['probe_encoder_max_abs_diff'] for record in found):.1e}",
            format_metric([record["probe_encoder_max_abs"] for record in found], 2),
            _percent([record["probe_translation_changed"] for record in found]) + "%",
            _percent([record["probe_exact_original"] for record in found]) + "%",
            _percent([record["probe_exact_swapped"] for record in found]) + "%",
        ]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
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
