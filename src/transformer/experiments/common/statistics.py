"""Statistics over seeds and paired tests: what a verdict in EXPERIMENTS.md may claim.

Three tools, each small enough to check by hand:

* :func:`summarise_seeds`: mean, sample standard deviation and a 95% confidence interval of the mean over
  seeds, with Student's t (with 3 seeds the interval is 4.3 standard errors wide on each side, not 1.96);
* :func:`~transformer.evaluation.bleu.paired_bootstrap_test` (sacreBLEU's paired bootstrap resampling,
  Koehn 2004): whether a variant and its baseline, trained with the same seed, differ on the same sentences;
* :func:`decide_verdict`: the rule that turns the paired tests of every seed into one word, written here
  once so that no verdict is chosen by eye.
"""

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from transformer.evaluation.bleu import PairedScoreTest

#: Seeds a verdict needs before it is more than provisional (issue #29: "at least 3 seeds").
MIN_SEEDS = 3
#: Significance level of each paired test.
ALPHA = 0.05


def student_t_two_sided_probability(t_value: float, degrees_of_freedom: int) -> float:
    """Give P(|T| <= t) for Student's t with an integer number of degrees of freedom.

    Parameters
    ----------
    t_value : float
        A non-negative value of the statistic.
    degrees_of_freedom : int
        At least 1.

    Returns
    -------
    float
        The probability, in [0, 1).

    Notes
    -----
    The closed form for integer degrees of freedom (Abramowitz and Stegun 26.7.3-26.7.4): with
    theta = atan(t / sqrt(nu)), a finite sum of powers of cos(theta) times sin(theta), plus 2 theta / pi when
    nu is odd. Exact up to rounding, so no statistics library is needed for the intervals.
    """
    if degrees_of_freedom < 1:
        raise ValueError(f"degrees_of_freedom={degrees_of_freedom}: at least 1")
    theta = math.atan(abs(t_value) / math.sqrt(degrees_of_freedom))
    cos_squared = math.cos(theta) ** 2
    odd = degrees_of_freedom % 2 == 1
    # Terms cos^k(theta) times the ratio of products of odd and even numbers, k = 1, 3, ... (odd nu) or 0, 2, ...
    term = math.cos(theta) if odd else 1.0
    total = 0.0
    start = 1 if odd else 0
    for power in range(start, degrees_of_freedom - 1, 2):
        total += term
        term *= cos_squared * (power + 1) / (power + 2)
    if odd:
        return 2.0 / math.pi * (theta + math.sin(theta) * total)
    return math.sin(theta) * total


def t_critical_value(degrees_of_freedom: int, confidence: float = 0.95) -> float:
    """Give the two-sided critical value of Student's t: P(|T| <= t) = confidence.

    Parameters
    ----------
    degrees_of_freedom : int
        At least 1 (n - 1 for n seeds).
    confidence : float
        The interval's coverage, in (0, 1).

    Returns
    -------
    float
        E.g. 12.706 for 1 degree of freedom, 4.303 for 2, 1.960 in the limit.

    Notes
    -----
    Found by bisection on :func:`student_t_two_sided_probability`, which increases with t, to 1e-12.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence}: expected a value in (0, 1)")
    low, high = 0.0, 1.0
    while student_t_two_sided_probability(high, degrees_of_freedom) < confidence:
        high *= 2.0
    while high - low > 1e-12 * high:
        middle = (low + high) / 2.0
        if student_t_two_sided_probability(middle, degrees_of_freedom) < confidence:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


@dataclass(frozen=True)
class SeedSummary:
    """A metric over seeds: mean, spread and the 95% confidence interval of the mean.

    Parameters
    ----------
    values : tuple of float
        One value per seed, in seed order.
    mean : float
        Their mean.
    std : float or None
        Sample (n - 1) standard deviation; None for one seed.
    interval : tuple of float or None
        ``(low, high)``: mean -/+ t(0.975, n - 1) * std / sqrt(n); None for one seed.

    Notes
    -----
    The interval is for the mean over training seeds (the spread of the method), not for the test set's
    sampling error, which the paired bootstrap measures.
    """

    values: tuple[float, ...]
    mean: float
    std: float | None
    interval: tuple[float, float] | None

    @property
    def count(self) -> int:
        """The number of seeds.

        Returns
        -------
        int
            ``len(values)``.

        Notes
        -----
        Every table prints it beside the figure, so a one-seed figure never reads as a settled one.
        """
        return len(self.values)

    def describe(self, digits: int) -> str:
        """Format as ``mean [low, high] (n seeds)``, or ``value (1 seed)``.

        Parameters
        ----------
        digits : int
            Decimals.

        Returns
        -------
        str
            E.g. ``"23.26 [20.40, 26.12] (2 seeds)"`` or ``"23.03 (1 seed)"``.

        Notes
        -----
        The bracket is the 95% confidence interval of the mean, so it stays honest with 2 seeds (wide)
        where ``mean ± std`` would not.
        """
        if self.interval is None:
            return f"{self.mean:.{digits}f} (1 seed)"
        low, high = self.interval
        return f"{self.mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}] ({self.count} seeds)"


def summarise_seeds(values: Iterable[float | None]) -> SeedSummary | None:
    """Summarise a metric over seeds.

    Parameters
    ----------
    values : iterable of float or None
        One value per seed; None and NaN (a metric a run did not record) are left out.

    Returns
    -------
    SeedSummary or None
        None when no value is left.

    Notes
    -----
    With n values the interval is mean -/+ t * s / sqrt(n), t the 97.5% quantile of Student's t with n - 1
    degrees of freedom (seeds are few; the normal 1.96 would make the interval far too narrow).
    """
    finite = tuple(float(value) for value in values if value is not None and not math.isnan(float(value)))
    if not finite:
        return None
    mean = statistics.fmean(finite)
    if len(finite) == 1:
        return SeedSummary(finite, mean, None, None)
    std = statistics.stdev(finite)
    half_width = t_critical_value(len(finite) - 1) * std / math.sqrt(len(finite))
    return SeedSummary(finite, mean, std, (mean - half_width, mean + half_width))


@dataclass(frozen=True)
class Verdict:
    """The verdict on one claim, from the paired tests of its seeds.

    Parameters
    ----------
    outcome : str
        ``reproduced``, ``not reproduced``, ``opposite``, ``not distinguishable``, ``mixed`` or
        ``no paired test``.
    seeds : int
        Seed pairs tested.
    reason : str
        What the tests showed, e.g. ``"3 of 3 seed pairs p < 0.05 in the paper's direction"``.

    Notes
    -----
    :attr:`provisional` is True below :data:`MIN_SEEDS` seeds; :meth:`describe` then says so in the text.
    """

    outcome: str
    seeds: int
    reason: str

    @property
    def provisional(self) -> bool:
        """Whether the verdict rests on fewer than :data:`MIN_SEEDS` seeds.

        Returns
        -------
        bool
            True for 0-2 seed pairs.

        Notes
        -----
        A provisional verdict is printed as such, never in bold.
        """
        return self.seeds < MIN_SEEDS

    def describe(self) -> str:
        """Format for a table cell.

        Returns
        -------
        str
            ``"**reproduced** (3 of 3 ...)"``, or ``"provisional, 1 seed: not distinguishable (...)"``.

        Notes
        -----
        Only a verdict with enough seeds is bold.
        """
        if self.seeds == 0:
            return f"{self.outcome} ({self.reason})"
        if self.provisional:
            seeds = "1 seed" if self.seeds == 1 else f"{self.seeds} seeds"
            return f"provisional, {seeds}: {self.outcome} ({self.reason})"
        return f"**{self.outcome}** ({self.reason})"


def decide_verdict(expected_sign: int, tests: Sequence[PairedScoreTest], alpha: float = ALPHA) -> Verdict:
    """Apply the project's verdict rule to the paired tests of one claim, one test per seed.

    Parameters
    ----------
    expected_sign : int
        The paper's direction for variant minus baseline: +1 (the variant is better), -1 (worse) or 0 (no
        difference, e.g. learned positions "nearly identical" to sinusoids).
    tests : sequence of PairedScoreTest
        For each seed s, the variant trained with seed s against the baseline trained with seed s, on the
        same sentences.
    alpha : float
        Significance level of each test.

    Returns
    -------
    Verdict
        The outcome, the number of seed pairs and the reason.

    Notes
    -----
    The rule. A seed pair is *significant* when its p-value is below ``alpha``; its direction is the sign of
    the score difference (BLEU in every verdict table). For a claimed direction (+1 or -1): **reproduced** when every pair is significant in
    that direction; **opposite** when every pair is significant the other way; **not distinguishable** when
    no pair is significant; **mixed** otherwise (the seeds disagree). For a claimed equality (0):
    **reproduced** when no pair is significant; **not reproduced** when every pair is significant in the
    same direction; **mixed** otherwise. Whatever the outcome, fewer than :data:`MIN_SEEDS` pairs make it
    provisional. Requiring *every* seed, not a majority, keeps one lucky seed from carrying a claim.
    """
    if expected_sign not in (-1, 0, 1):
        raise ValueError(f"expected_sign={expected_sign}: expected -1, 0 or +1")
    if not tests:
        return Verdict("no paired test", 0, "no seed pair has stored translations for both runs")
    up = sum(1 for test in tests if test.p_value < alpha and test.difference > 0)
    down = sum(1 for test in tests if test.p_value < alpha and test.difference < 0)
    count = len(tests)
    counts = f"p < {alpha:g}: {up} higher, {down} lower, of {count}"
    if expected_sign == 0:
        if up == down == 0:
            outcome = "reproduced"
        elif up == count or down == count:
            outcome = "not reproduced"
        else:
            outcome = "mixed"
        return Verdict(outcome, count, counts)
    agree, disagree = (up, down) if expected_sign > 0 else (down, up)
    if agree == count:
        outcome = "reproduced"
    elif disagree == count:
        outcome = "opposite"
    elif agree == disagree == 0:
        outcome = "not distinguishable"
    else:
        outcome = "mixed"
    return Verdict(outcome, count, counts)
