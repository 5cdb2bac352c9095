"""Section 3.5's verdicts, generated from the positions records: encodings compared seed by seed.

What ``transformer experiment report positions`` writes into EXPERIMENTS.md: dev BLEU of each encoding over
seeds, BLEU per source-length bucket of the length group, the permutation probe, and the claims as paired
comparisons (no positions against sinusoids; learned against sinusoids, on the dev sets and on every length
bucket past the training lengths, where section 3.5 hopes the sinusoids "extrapolate").
"""

from pathlib import Path
from typing import Any

from transformer.experiments.common.comparisons import compare_with_baseline, describe_over_seeds
from transformer.experiments.common.markdown import markdown_table
from transformer.experiments.common.plan import ExperimentPlan
from transformer.experiments.common.results import format_mean_and_count, records_by_variant
from transformer.experiments.positions.settings import ENCODINGS


def bucket_names(records: list[dict[str, Any]]) -> list[str]:
    """List the length buckets the length group's records measured, shortest first.

    Parameters
    ----------
    records : list of dict
        The experiment's records.

    Returns
    -------
    list of str
        Bucket names such as ``1-12``, ``13-18``, in the order of their lower bounds.

    Notes
    -----
    Read from the records, not the settings, so the table shows what was measured.
    """
    found: dict[str, int] = {}
    for record in records:
        for bucket in record.get("length_buckets", []):
            found[bucket["name"]] = int(bucket["low"])
    return sorted(found, key=found.__getitem__)


def _bucket_bleu(records: list[dict[str, Any]], name: str) -> str:
    """Format a bucket's BLEU as the mean over seeds with the seed count, e.g. ``44.7 (1)``."""
    values = [
        bucket.get("bleu")
        for record in records
        for bucket in record.get("length_buckets", [])
        if bucket["name"] == name
    ]
    return format_mean_and_count(values, 1)


def _recorded_set_bleu(record: dict[str, Any], test_set: str) -> float | None:
    """Read a record's BLEU on ``dev``, ``length-NAME`` or ``cut-length-NAME`` (None where it has none)."""
    if test_set == "dev":
        dev_bleu: float | None = record.get("dev_bleu")
        return dev_bleu
    key = "cut_bleu" if test_set.startswith("cut-") else "bleu"
    name = test_set.removeprefix("cut-").removeprefix("length-")
    for bucket in record.get("length_buckets", []):
        if bucket["name"] == name:
            value: float | None = bucket.get(key)
            return value
    return None


def encodings_table(by_variant: dict[str, list[dict[str, Any]]], buckets: list[str]) -> list[str]:
    """Build the table of BLEU per encoding: both dev sets, every length bucket and the probe on both corpora.

    Parameters
    ----------
    by_variant : dict of str to list of dict
        Records by variant name.
    buckets : list of str
        The length buckets, shortest first (:func:`bucket_names`).

    Returns
    -------
    list of str
        A Markdown table, a row per encoding.

    Notes
    -----
    Dev BLEU comes with its t interval over seeds; bucket BLEU and the probe with their seed count. The
    probe swaps subject and object ("The X verbs the Y." against "The Y verbs the X."): without positions
    the translation cannot change, and on the grammar corpus, whose sentences have this form, a model with
    positions should also translate the swapped sentence exactly.
    """
    headings = [
        "encoding",
        "Multi30k dev BLEU",
        "grammar dev BLEU",
        *(f"bucket {name}" for name in buckets),
        "translation changed by swapping subject and object (Multi30k)",
        "translation changed by swapping subject and object (grammar)",
        "swapped sentence translated exactly (grammar)",
    ]
    rows = []
    for encoding in ENCODINGS:
        multi30k, length = (
            by_variant.get(f"multi30k-{encoding}", []),
            by_variant.get(f"length-{encoding}", []),
        )
        rows.append(
            [
                encoding,
                describe_over_seeds(multi30k, "dev_bleu", 1),
                describe_over_seeds(length, "dev_bleu", 1),
                *[_bucket_bleu(length, name) for name in buckets],
                _probe_share(multi30k, "probe_translation_changed"),
                _probe_share(length, "probe_translation_changed"),
                _probe_share(length, "probe_exact_swapped"),
            ]
        )
    return markdown_table(headings, rows)


def _probe_share(records: list[dict[str, Any]], key: str) -> str:
    """Format a probe's share of the 200 sentence pairs as its mean over seeds and the seed count."""
    return format_mean_and_count((record.get(key) for record in records), 3)


def claims_table(
    by_variant: dict[str, list[dict[str, Any]]], buckets: list[str], experiment_dir: Path
) -> list[str]:
    """Build the table of claims, each a paired comparison with its verdict.

    Parameters
    ----------
    by_variant : dict of str to list of dict
        Records by variant name.
    buckets : list of str
        The length buckets, shortest first; every one past the first (beyond the training lengths) is a claim.
    experiment_dir : Path
        Where the records' stored sentences are.

    Returns
    -------
    list of str
        A Markdown table: claim, test set, per seed, direction, verdict.

    Notes
    -----
    Directions: no positions worse than sinusoids (-1, section 3.5: attention alone ignores order); learned
    equal to sinusoids (0, Table 2 row E: "nearly identical"), on both dev sets and on the first length
    bucket, the lengths training covers, where every row of the learned table is trained (the fair test of
    row E's claim); learned worse than sinusoids past the training lengths (-1, section 3.5: sinusoids "may
    allow the model to extrapolate"). The learned table cut to L rows (it reads only the first L tokens)
    against the sinusoids past L has no direction: the paper says nothing of it, but it asks whether the
    sinusoids' translations past L are worth more than ignoring what lies past L.
    """
    none, learned = "no positions against sinusoids", "learned against sinusoids (row E)"
    past, cut = "learned against sinusoids past the training lengths", "learned cut to L against sinusoids"
    claims: list[tuple[str, str, str, str, str, int | None, str]] = [
        (none, "multi30k-none", "multi30k-sinusoidal", "dev", "dev", -1, "Multi30k dev"),
        (none, "length-none", "length-sinusoidal", "dev", "dev", -1, "grammar dev"),
        (learned, "multi30k-learned", "multi30k-sinusoidal", "dev", "dev", 0, "Multi30k dev"),
        (learned, "length-learned", "length-sinusoidal", "dev", "dev", 0, "grammar dev"),
    ]
    claims += [
        (learned, "length-learned", "length-sinusoidal", f"length-{name}", f"length-{name}", 0,
         f"bucket {name} (trained lengths)")
        for name in buckets[:1]
    ]  # fmt: skip
    claims += [
        (past, "length-learned", "length-sinusoidal", f"length-{name}", f"length-{name}", -1, f"bucket {name}")
        for name in buckets[1:]
    ]  # fmt: skip
    claims += [
        (cut, "length-learned", "length-sinusoidal", f"cut-length-{name}", f"length-{name}", None,
         f"bucket {name}")
        for name in buckets[1:]
    ]  # fmt: skip
    rows = []
    for description, variant, baseline, test_set, baseline_set, direction, label in claims:
        per_seed, verdict = compare_with_baseline(
            by_variant.get(variant, []),
            by_variant.get(baseline, []),
            direction,
            experiment_dir,
            test_set,
            _recorded_set_bleu,
            baseline_set,
        )
        words = {1: "higher", -1: "lower", 0: "=", None: "-"}[direction]
        rows.append([description, label, per_seed, words, verdict])
    return markdown_table(["claim", "test set", "per seed", "direction", "verdict"], rows)


def render_verdicts(plan: ExperimentPlan, records: list[dict[str, Any]], experiment_dir: Path) -> str:
    """Render the positions section of EXPERIMENTS.md.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment at the records' scale.
    records : list of dict
        Its ``results.jsonl`` records.
    experiment_dir : Path
        Where the records and their stored sentences are.

    Returns
    -------
    str
        Markdown: BLEU per encoding and group, BLEU per length bucket, the probe (:func:`encodings_table`),
        and the claims (:func:`claims_table`).

    Notes
    -----
    A pure function of the committed records, so a test can check that EXPERIMENTS.md still says what they
    give.
    """
    del plan
    by_variant = records_by_variant(records)
    buckets = bucket_names(records)
    lines = [
        f"Generated by `transformer experiment report positions` from {len(records)} records; do not edit by "
        "hand. BLEU: mean over seeds, [95% t interval] with 2 or more; buckets and probe: mean (seed count).",
        "",
        *encodings_table(by_variant, buckets),
        "",
        *claims_table(by_variant, buckets, experiment_dir),
    ]
    return "\n".join(lines) + "\n"
