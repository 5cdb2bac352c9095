"""Seed statistics and the verdict rule, against values worked out by hand or from published t tables."""

import math
from pathlib import Path
from typing import Any

import pytest

from transformer.evaluation.bleu import PairedScoreTest, score_translations
from transformer.experiments.common.comparisons import compare_with_baseline, pair_by_seed
from transformer.experiments.common.results import store_sentences
from transformer.experiments.common.statistics import (
    decide_verdict,
    student_t_two_sided_probability,
    summarise_seeds,
    t_critical_value,
)


@pytest.mark.parametrize(
    ("degrees_of_freedom", "expected"),
    [
        (1, math.tan(0.475 * math.pi)),  # Cauchy: closed form
        (2, math.sqrt(2 * 0.95**2 / (1 - 0.95**2))),  # nu = 2: P(|T| <= t) = t / sqrt(2 + t^2)
        (3, 3.182446305),  # published tables from here on
        (4, 2.776445105),
        (9, 2.262157163),
        (29, 2.045229642),
    ],
)
def test_t_critical_values_match_closed_forms_and_tables(degrees_of_freedom: int, expected: float) -> None:
    assert t_critical_value(degrees_of_freedom) == pytest.approx(expected, rel=1e-8)


def test_t_distribution_tends_to_the_normal_and_refuses_zero_degrees() -> None:
    assert t_critical_value(100_000) == pytest.approx(1.959964, abs=1e-4)
    assert student_t_two_sided_probability(0.0, 5) == 0.0
    assert t_critical_value(4, confidence=0.99) == pytest.approx(4.604094871, rel=1e-8)
    with pytest.raises(ValueError, match="degrees_of_freedom=0"):
        student_t_two_sided_probability(1.0, 0)


def test_seed_summary_by_hand() -> None:
    # 23, 24, 25: mean 24, s = 1, half-width 4.302653 / sqrt(3) = 2.484138.
    summary = summarise_seeds([24.0, 23.0, 25.0, None, float("nan")])
    assert summary is not None and summary.count == 3 and summary.values == (24.0, 23.0, 25.0)
    assert summary.mean == 24.0 and summary.std == pytest.approx(1.0)
    assert summary.interval == pytest.approx((24.0 - 2.484138, 24.0 + 2.484138), abs=1e-6)
    assert summary.describe(2) == "24.00 [21.52, 26.48] (3 seeds)"
    one = summarise_seeds([23.03])
    assert one is not None and one.interval is None and one.describe(1) == "23.0 (1 seed)"
    assert summarise_seeds([None]) is None


def _test(difference: float, p_value: float) -> PairedScoreTest:
    return PairedScoreTest("BLEU", 20.0, 20.0 + difference, p_value, 1000, "bs:1000")


@pytest.mark.parametrize(
    ("expected_sign", "tests", "outcome", "provisional"),
    [
        (1, [(1.2, 0.01), (0.9, 0.03), (1.5, 0.001)], "reproduced", False),
        (-1, [(1.2, 0.01), (0.9, 0.03), (1.5, 0.001)], "opposite", False),
        (1, [(1.2, 0.01), (0.9, 0.20), (1.5, 0.001)], "mixed", False),  # one seed not significant
        (1, [(0.2, 0.40), (-0.1, 0.60), (0.3, 0.30)], "not distinguishable", False),
        (0, [(0.2, 0.40), (-0.1, 0.60), (0.3, 0.30)], "reproduced", False),
        (0, [(-1.2, 0.01), (-0.9, 0.03), (-1.5, 0.001)], "not reproduced", False),
        (0, [(-1.2, 0.01), (0.9, 0.03), (0.1, 0.5)], "mixed", False),
        (1, [(1.2, 0.01)], "reproduced", True),
        (1, [(1.2, 0.01), (1.0, 0.02)], "reproduced", True),
    ],
)
def test_verdict_rule(
    expected_sign: int, tests: list[tuple[float, float]], outcome: str, provisional: bool
) -> None:
    verdict = decide_verdict(expected_sign, [_test(*pair) for pair in tests])
    assert verdict.outcome == outcome and verdict.provisional == provisional and verdict.seeds == len(tests)
    text = verdict.describe()
    assert text.startswith("provisional, ") if provisional else text.startswith(f"**{outcome}**")


def test_verdict_without_tests_or_with_a_bad_direction() -> None:
    verdict = decide_verdict(1, [])
    assert verdict.outcome == "no paired test" and verdict.describe().startswith("no paired test (")
    assert decide_verdict(1, [_test(1.0, 0.01)]).describe() == (
        "provisional, 1 seed: reproduced (p < 0.05: 1 higher, 0 lower, of 1)"
    )
    with pytest.raises(ValueError, match="expected_sign=2"):
        decide_verdict(2, [])


def test_a_comparison_says_which_side_has_not_run(tmp_path: Path) -> None:
    # Without stored translations a pair is untested; without one side's records there is no pair at all.
    variant = [{"seed": 1, "dev_bleu": 20.0, "commit": "abc"}]
    baseline = [{"seed": 1, "dev_bleu": 21.5, "commit": "abc"}]
    assert compare_with_baseline([], baseline, -1, tmp_path) == ("-", "not run")
    assert compare_with_baseline(variant, [], -1, tmp_path) == ("-", "baseline not run")
    per_seed, verdict = compare_with_baseline(variant, baseline, -1, tmp_path)
    assert per_seed == "s1 -1.50 (untested)"
    assert verdict == "no paired test (no seed pair has stored translations for both runs)"


def test_a_pair_can_compare_two_sets_that_share_references(tmp_path: Path) -> None:
    # The learned table cut to L rows ("cut-b") against the sinusoids' own translations of bucket b: two set
    # names, one reference file, so the pair is tested; naming the same set on both sides leaves it untested.
    references = ["a small dog runs", "the cat sleeps on the mat", "two men play chess"] * 4
    cut_lines = ["a small dog runs", "the cat sleeps on a mat", "two men play"] * 4
    sinusoid_lines = ["a dog", "cat sleeps", "men play chess today"] * 4
    kept_references = store_sentences(tmp_path, references)

    def kept_run(set_name: str, hypotheses: list[str], bucket: dict[str, Any]) -> dict[str, Any]:
        hypotheses_path = store_sentences(tmp_path, hypotheses)
        sentences = {f"{set_name}.hypotheses": hypotheses_path, f"{set_name}.references": kept_references}
        return {"seed": 1, "sentences": sentences, "length_buckets": [{"name": "b", **bucket}]}

    variant = kept_run("cut-b", cut_lines, {"cut_bleu": 70.0})
    baseline = kept_run("b", sinusoid_lines, {"bleu": 20.0})
    read_calls: list[str] = []

    def recorded(record: dict[str, Any], test_set: str) -> float:
        read_calls.append(test_set)
        key = "cut_bleu" if test_set.startswith("cut-") else "bleu"
        return float(record["length_buckets"][0][key])

    (pair,) = pair_by_seed([variant], [baseline], tmp_path, "cut-b", recorded, baseline_test_set="b")
    expected = (
        score_translations(cut_lines, references).bleu - score_translations(sinusoid_lines, references).bleu
    )
    assert pair.test is not None and pair.difference == pytest.approx(expected) and expected > 20
    assert read_calls == []
    # One set name for both: the baseline has no "cut-b" translations, so the pair falls back on the records.
    baseline["length_buckets"] = [{"name": "b", "bleu": 20.0, "cut_bleu": 65.0}]
    (untested,) = pair_by_seed([variant], [baseline], tmp_path, "cut-b", recorded)
    assert untested.test is None and untested.difference == pytest.approx(5.0)
    assert read_calls == ["cut-b", "cut-b"]
