"""A variant against its baseline, seed by seed, from an experiment's committed records.

The pieces a generated verdict table is built from: the seeds a variant and its baseline share, the paired
bootstrap test of each seed pair on the sentences both translated (read from the files the records point
to), the figures over seeds with their confidence intervals, and the verdict the rule of
:func:`~transformer.experiments.common.statistics.decide_verdict` gives. Nothing here trains or decodes: a
table is a function of the records and the files beside them, so the same records always print the same table.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer.evaluation.bleu import PairedScoreTest, paired_bootstrap_test
from transformer.experiments.common.results import load_sentences
from transformer.experiments.common.statistics import Verdict, decide_verdict, summarise_seeds


@dataclass(frozen=True)
class SeedPair:
    """One seed's variant run against the same seed's baseline run.

    Parameters
    ----------
    seed : int
        The seed both were trained with.
    difference : float
        Variant BLEU minus baseline BLEU on the compared set: the test's when tested, else as recorded.
    test : PairedScoreTest or None
        The paired bootstrap test; None when a record has no stored translations (runs recorded before
        they were kept) or the two were scored on different references.

    Notes
    -----
    The paired test resamples the test sentences: it asks whether these two trained models differ beyond
    the luck of the sentence sample. The luck of training is what the seeds cover, which is why the verdict
    rule asks every seed pair to agree. Pairing by the same seed gives both runs the same data order
    (``train.seed`` drives it), so a pair differs in the variant's change and its initial weights.
    """

    seed: int
    difference: float
    test: PairedScoreTest | None

    def describe(self) -> str:
        """Format as ``s1 +0.93 (p 0.004)`` or ``s1 +0.93 (untested)``.

        Returns
        -------
        str
            Seed, BLEU difference and p-value.

        Notes
        -----
        p-values below 0.001 print as ``p < 0.001`` (1,000 resamples resolve no finer).
        """
        if self.test is None:
            return f"s{self.seed} {self.difference:+.2f} (untested)"
        p_value = "p < 0.001" if self.test.p_value < 0.001 else f"p {self.test.p_value:.3f}"
        return f"s{self.seed} {self.difference:+.2f} ({p_value})"


def pair_by_seed(
    variant: Sequence[dict[str, Any]],
    baseline: Sequence[dict[str, Any]],
    experiment_dir: Path,
    test_set: str = "dev",
    recorded: Callable[[dict[str, Any], str], float | None] | None = None,
    baseline_test_set: str | None = None,
) -> list[SeedPair]:
    """Pair a variant's records with its baseline's by seed and test each pair.

    Parameters
    ----------
    variant : sequence of dict
        The variant's ``results.jsonl`` records.
    baseline : sequence of dict
        The baseline's records.
    experiment_dir : Path
        The experiment directory the records' sentence paths are relative to.
    test_set : str
        ``dev`` (the records' ``dev_bleu``, ``dev_hypotheses`` and ``dev_references``) or the name of another
        set whose sentences the run kept (``record["sentences"]["NAME.hypotheses"]`` and
        ``["NAME.references"]``, e.g. a length bucket's).
    recorded : callable or None
        ``recorded(record, set_name)`` reads a record's BLEU on a set, for the difference of a pair that
        cannot be tested (records made before translations were kept); None reads ``dev_bleu``.
    baseline_test_set : str or None
        The baseline's set when it differs from the variant's (None: ``test_set``), e.g. the same bucket
        translated by another model (a learned table cut to L rows against the sinusoids). Both sets must
        share their references for a test.

    Returns
    -------
    list of SeedPair
        One per seed both have, in seed order.

    Notes
    -----
    A seed only one of them has is left out: an unpaired run says nothing about the difference. An untested
    pair shows the recorded difference, marked untested, and counts for no verdict.
    """
    baseline_set = test_set if baseline_test_set is None else baseline_test_set
    baseline_by_seed = {int(record["seed"]): record for record in baseline}
    pairs = []
    for record in sorted(variant, key=lambda record: int(record["seed"])):
        seed = int(record["seed"])
        if seed not in baseline_by_seed:
            continue
        base = baseline_by_seed[seed]
        test = _paired_test(
            sentence_paths(record, test_set), sentence_paths(base, baseline_set), experiment_dir
        )
        if test is not None:
            pairs.append(SeedPair(seed, test.difference, test))
            continue
        read = recorded or (lambda found, _: found.get("dev_bleu"))
        ours, theirs = read(record, test_set), read(base, baseline_set)
        if ours is not None and theirs is not None:
            pairs.append(SeedPair(seed, float(ours) - float(theirs), None))
    return pairs


def sentence_paths(record: dict[str, Any], test_set: str) -> tuple[str, str] | None:
    """Find where a record's hypotheses and references of one test set are kept.

    Parameters
    ----------
    record : dict
        A ``results.jsonl`` record.
    test_set : str
        ``dev`` or the name of a set in the record's ``sentences``.

    Returns
    -------
    tuple of str or None
        ``(hypotheses, references)`` paths relative to the experiment directory; None when the record kept
        none (records made before translations were kept).

    Notes
    -----
    The dev set has its own keys (``dev_hypotheses``, ``dev_references``); other sets are kept under
    ``sentences`` by the files an experiment's measure hook writes (:data:`RUN_SENTENCES_DIR`).
    """
    if test_set == "dev":
        paths = (record.get("dev_hypotheses"), record.get("dev_references"))
    else:
        kept = record.get("sentences", {})
        paths = (kept.get(f"{test_set}.hypotheses"), kept.get(f"{test_set}.references"))
    return (str(paths[0]), str(paths[1])) if paths[0] and paths[1] else None


def _paired_test(
    variant: tuple[str, str] | None, baseline: tuple[str, str] | None, experiment_dir: Path
) -> PairedScoreTest | None:
    """Run the paired bootstrap test of two runs' kept sentences, or None without them or on other references."""
    if variant is None or baseline is None or variant[1] != baseline[1]:
        return None
    return paired_bootstrap_test(
        load_sentences(experiment_dir, baseline[0]),
        load_sentences(experiment_dir, variant[0]),
        load_sentences(experiment_dir, variant[1]),
    )


def verdict_for(expected_sign: int, pairs: Sequence[SeedPair]) -> Verdict:
    """Apply the verdict rule to the tested seed pairs.

    Parameters
    ----------
    expected_sign : int
        The paper's direction for variant minus baseline (+1, -1, or 0 for no difference).
    pairs : sequence of SeedPair
        The seed pairs; untested ones are left out of the rule.

    Returns
    -------
    Verdict
        :func:`~transformer.experiments.common.statistics.decide_verdict` on the tested pairs.

    Notes
    -----
    Untested pairs (records from before the translations were kept) cannot count for or against a claim;
    with none tested the verdict says "no paired test".
    """
    return decide_verdict(expected_sign, [pair.test for pair in pairs if pair.test is not None])


def describe_over_seeds(records: Sequence[dict[str, Any]], key: str, digits: int) -> str:
    """Format one metric of a variant's records as mean, 95% interval and seed count.

    Parameters
    ----------
    records : sequence of dict
        The variant's records.
    key : str
        The metric, e.g. ``dev_bleu``.
    digits : int
        Decimals.

    Returns
    -------
    str
        ``"23.26 [20.40, 26.11] (2 seeds)"``, ``"23.03 (1 seed)"`` or ``"-"``.

    Notes
    -----
    The bracket is the t interval of the mean
    (:func:`~transformer.experiments.common.statistics.summarise_seeds`), so two seeds print a wide one
    instead of a falsely tight ``mean ± std``; a record without the metric is left out.
    """
    summary = summarise_seeds(record.get(key) for record in records)
    return "-" if summary is None else summary.describe(digits)


def dirty_note(records: Sequence[dict[str, Any]]) -> str:
    """Say how many of a variant's runs trained on a source tree with uncommitted changes.

    Parameters
    ----------
    records : sequence of dict
        The variant's records.

    Returns
    -------
    str
        ``"; 1 of 2 runs on an uncommitted tree"``, or an empty string when every run names a clean commit.

    Notes
    -----
    Older records have no ``dirty`` key; their ``commit`` ends in ``+dirty`` instead, which counts alike.
    """
    dirty = sum(
        1 for record in records if record.get("dirty") or str(record.get("commit") or "").endswith("+dirty")
    )
    return f"; {dirty} of {len(records)} runs on an uncommitted tree" if dirty else ""


def compare_with_baseline(
    variant: Sequence[dict[str, Any]],
    baseline: Sequence[dict[str, Any]],
    expected_sign: int | None,
    experiment_dir: Path,
    test_set: str = "dev",
    recorded: Callable[[dict[str, Any], str], float | None] | None = None,
    baseline_test_set: str | None = None,
) -> tuple[str, str]:
    """Give the two cells of a comparison: the per-seed differences and the verdict.

    Parameters
    ----------
    variant : sequence of dict
        The variant's records.
    baseline : sequence of dict
        Its baseline's records.
    expected_sign : int or None
        The claim's direction for variant minus baseline (+1, -1, 0), or None where the paper claims nothing.
    experiment_dir : Path
        Where the records' stored sentences are.
    test_set : str
        The set compared (:func:`pair_by_seed`).
    recorded : callable or None
        ``recorded(record, set_name)`` reads a record's BLEU on a set, for untested pairs
        (:func:`pair_by_seed`).
    baseline_test_set : str or None
        The baseline's set when it is not ``test_set`` (:func:`pair_by_seed`).

    Returns
    -------
    tuple of str
        ``("s1 +0.93 (p 0.004); s2 ...", verdict)``: ``not run`` without variant records, ``baseline not
        run`` without baseline records, ``no claim in the paper (...)`` for None, else the rule's verdict;
        with the count of runs on an uncommitted tree.

    Notes
    -----
    One definition for every generated table, so every experiment's verdicts read and are decided alike.
    """
    pairs = pair_by_seed(variant, baseline, experiment_dir, test_set, recorded, baseline_test_set)
    per_seed = "; ".join(pair.describe() for pair in pairs) or "-"
    tested = verdict_for(0 if expected_sign is None else expected_sign, pairs)
    if not variant:
        verdict = "not run"
    elif not baseline:
        verdict = "baseline not run"
    elif expected_sign is None:
        verdict = f"no claim in the paper ({tested.reason})"
    else:
        verdict = tested.describe()
    return per_seed, verdict + dirty_note(variant)
