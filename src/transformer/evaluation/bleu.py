"""BLEU and chrF with sacreBLEU on detokenised text.

Corpus scores come with the signature that makes them comparable; sentence utilities serve minimum Bayes
risk decoding.
"""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sacrebleu
from sacrebleu.metrics.helpers import extract_all_char_ngrams, extract_all_word_ngrams
from sacrebleu.significance import PairedTest, Result

from transformer.data.text_lines import read_input_lines


@dataclass(frozen=True)
class TranslationScores:
    """BLEU and chrF of a set of translations.

    Parameters
    ----------
    bleu : float
        Corpus BLEU, 0-100.
    chrf : float
        Corpus chrF2, 0-100.
    bleu_signature : str
        sacreBLEU's signature of the BLEU settings (tokeniser, casing, smoothing, version).
    chrf_signature : str
        sacreBLEU's signature of the chrF settings.
    bleu_details : str
        n-gram precisions, brevity penalty and lengths.
    num_sentences : int
        Number of hypothesis/reference pairs.

    Notes
    -----
    Always quote the signature with a BLEU score: tokenisation and casing change it by whole points.
    """

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    bleu_details: str
    num_sentences: int

    def describe(self) -> str:
        """Format the scores and signatures on two lines.

        Returns
        -------
        str
            The BLEU line (score, signature, details) and the chrF line (score, signature).

        Notes
        -----
        What ``transformer evaluate`` prints. Each score is printed beside its signature, never alone, since
        a BLEU number without its settings cannot be compared with another; two decimals, as sacreBLEU
        prints them.
        """
        return (
            f"BLEU {self.bleu:.2f} ({self.bleu_signature}) {self.bleu_details}\n"
            f"chrF2 {self.chrf:.2f} ({self.chrf_signature})"
        )


def score_translations(
    hypotheses: Sequence[str], references: Sequence[str], lowercase: bool = False
) -> TranslationScores:
    """Score detokenised hypotheses against one reference each.

    Parameters
    ----------
    hypotheses : sequence of str
        System outputs, detokenised, one per sentence.
    references : sequence of str
        References, same order and length.
    lowercase : bool
        Case-insensitive BLEU (the Multi30k literature's convention); chrF stays case-sensitive.

    Returns
    -------
    TranslationScores
        BLEU, chrF, signatures and details.

    Raises
    ------
    ValueError
        When the counts differ or there is nothing to score.

    Notes
    -----
    sacreBLEU's defaults otherwise: 13a tokenisation, exponential smoothing (Post, 2018).
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ValueError("no sentences to score")
    bleu = sacrebleu.BLEU(lowercase=lowercase)
    chrf = sacrebleu.CHRF()
    bleu_score = bleu.corpus_score(list(hypotheses), [list(references)])
    chrf_score = chrf.corpus_score(list(hypotheses), [list(references)])
    details = bleu_score.format(score_only=False).split(" ", 3)[-1]
    return TranslationScores(
        bleu=bleu_score.score,
        chrf=chrf_score.score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        bleu_details=details,
        num_sentences=len(hypotheses),
    )


def score_files(hypotheses_path: str, reference_path: str, lowercase: bool = False) -> TranslationScores:
    """Score a file of translations against a file of references.

    Parameters
    ----------
    hypotheses_path : str
        Detokenised translations, one per line (plain or gzipped; "-" is standard input).
    reference_path : str
        References, line-aligned with the translations.
    lowercase : bool
        Case-insensitive BLEU.

    Returns
    -------
    TranslationScores
        BLEU, chrF, signatures and details.

    Raises
    ------
    ValueError
        When the counts differ, there is nothing to score, or a line holds a control character.
    CorpusError
        When a file is unreadable or not UTF-8.

    Notes
    -----
    ``transformer evaluate --hypotheses``: translations made by any system are scored exactly as this
    project's own, so the numbers compare. The references are read first, as when a model translates.
    """
    references = read_input_lines(reference_path)
    return score_translations(read_input_lines(hypotheses_path), references, lowercase=lowercase)


#: The utilities minimum Bayes risk decoding can use (``DecodeConfig.mbr_utility``).
SENTENCE_UTILITIES = ("chrf", "bleu")


class SentenceUtility:
    """Sentence-level chrF2 or BLEU between many pairs of sentences, each sentence's n-grams counted once.

    Parameters
    ----------
    name : {"chrf", "bleu"}
        sacreBLEU's chrF2 (character 6-grams, beta 2) or sentence BLEU (13a tokens, exponential smoothing,
        effective order, as ``BLEU.sentence_score`` recommends).

    Raises
    ------
    ValueError
        For an unknown name.

    Notes
    -----
    MBR decoding scores every candidate against every other: N(N - 1) pairs per sentence. Calling
    ``sentence_score`` for each pair would preprocess and count the n-grams of both sentences every time; here
    :meth:`features` counts them once per sentence (with sacreBLEU's own preprocessing and n-gram extraction)
    and :meth:`score` only intersects counts, then lets sacreBLEU turn the statistics into a score. The result
    equals ``sentence_score`` (tested).
    """

    def __init__(self, name: str) -> None:
        if name not in SENTENCE_UTILITIES:
            raise ValueError(f"utility {name!r} is not one of {SENTENCE_UTILITIES}")
        self.name = name
        self.metric: sacrebleu.CHRF | sacrebleu.BLEU = (
            sacrebleu.CHRF() if name == "chrf" else sacrebleu.BLEU(effective_order=True)
        )

    def features(self, sentence: str) -> Any:
        """Count a sentence's n-grams once, for use as hypothesis and as reference.

        Parameters
        ----------
        sentence : str
            A detokenised sentence.

        Returns
        -------
        object
            chrF: the list of character n-gram counters per order; BLEU: the word n-gram counter and the
            token count.

        Notes
        -----
        Uses sacreBLEU's preprocessing (tokenisation for BLEU) and its n-gram helpers, so the counts are
        exactly those its ``sentence_score`` would compute.
        """
        text = self.metric._preprocess_segment(sentence)
        if isinstance(self.metric, sacrebleu.CHRF):
            return extract_all_char_ngrams(text, self.metric.char_order, self.metric.whitespace)
        return extract_all_word_ngrams(text, 1, self.metric.max_ngram_order)

    def score(self, hypothesis: Any, reference: Any) -> float:
        """Score one hypothesis against one reference from their :meth:`features`.

        Parameters
        ----------
        hypothesis, reference : object
            Features of the two sentences.

        Returns
        -------
        float
            chrF2 or BLEU, 0 to 100.

        Notes
        -----
        The matching statistics are those of sacreBLEU's ``_compute_segment_statistics`` with one
        reference; the score is its ``_compute_score_from_stats``.
        """
        if isinstance(self.metric, sacrebleu.CHRF):
            statistics: list[int] = []
            for hypothesis_ngrams, reference_ngrams in zip(hypothesis, reference, strict=True):
                statistics.extend(self.metric._get_match_statistics(hypothesis_ngrams, reference_ngrams))
            return float(self.metric._compute_score_from_stats(statistics).score)
        (hypothesis_ngrams, hypothesis_length), (reference_ngrams, reference_length) = hypothesis, reference
        order = self.metric.max_ngram_order
        correct, total = [0] * order, [0] * order
        for ngram, count in hypothesis_ngrams.items():
            total[len(ngram) - 1] += count
            if ngram in reference_ngrams:
                correct[len(ngram) - 1] += min(count, reference_ngrams[ngram])
        statistics = [hypothesis_length, reference_length, *correct, *total]
        return float(self.metric._compute_score_from_stats(statistics).score)

    def expected_utilities(self, candidates: Sequence[str]) -> list[float]:
        """Average each candidate's utility against all the other candidates as pseudo-references.

        Parameters
        ----------
        candidates : sequence of str
            A sentence's N candidates (N >= 2), duplicates allowed.

        Returns
        -------
        list of float
            Per candidate, the mean utility over the N - 1 others (a candidate is not its own reference).

        Notes
        -----
        Candidates drawn by sampling are draws from the model, so this mean estimates the expected utility
        under the model (Eikema & Aziz 2020; Freitag et al. 2022). Identical texts are counted and scored
        once: a sentence with N samples but k distinct texts costs k^2 comparisons, not N^2. A single
        candidate gets 0.
        """
        if len(candidates) < 2:
            return [0.0] * len(candidates)
        distinct = list(dict.fromkeys(candidates))
        counts = Counter(candidates)
        features = [self.features(text) for text in distinct]
        totals = {}
        for index, text in enumerate(distinct):
            utilities = [self.score(features[index], reference) for reference in features]
            weighted = sum(
                counts[other] * utility for other, utility in zip(distinct, utilities, strict=True)
            )
            totals[text] = weighted - utilities[index]  # one copy of the text is the candidate itself
        return [totals[text] / (len(candidates) - 1) for text in candidates]


#: The corpus metrics a paired test can compare, by the name sacreBLEU's signatures use.
PAIRED_METRICS = ("BLEU", "chrF")


@dataclass(frozen=True)
class PairedScoreTest:
    """A paired bootstrap comparison of two systems' corpus BLEU or chrF on the same sentences.

    Parameters
    ----------
    metric : str
        ``"BLEU"`` or ``"chrF"`` (chrF2, sacreBLEU's default).
    baseline_score : float
        Corpus score of the baseline, 0-100.
    variant_score : float
        Corpus score of the variant, 0-100.
    p_value : float
        sacreBLEU's paired bootstrap p-value of the difference (two-sided: the chance of a difference at
        least this large, in either direction, were the systems equally good).
    samples : int
        Bootstrap resamples drawn.
    signature : str
        sacreBLEU's signature of the test (metric settings, ``bs`` resamples and the resampling seed).

    Notes
    -----
    Koehn (2004), "Statistical significance tests for machine translation evaluation": resample the test
    sentences with replacement, score both systems on each resample, and see how often the difference
    vanishes. The direction is read from :attr:`difference`, not from the p-value.
    """

    metric: str
    baseline_score: float
    variant_score: float
    p_value: float
    samples: int
    signature: str

    @property
    def difference(self) -> float:
        """Variant score minus baseline score.

        Returns
        -------
        float
            Positive when the variant scores higher.

        Notes
        -----
        Corpus scores of the full sets, not the bootstrap mean.
        """
        return self.variant_score - self.baseline_score


def paired_bootstrap_test(
    baseline: Sequence[str],
    variant: Sequence[str],
    references: Sequence[str],
    metric: str = "BLEU",
    samples: int = 1000,
) -> PairedScoreTest:
    """Test whether two systems' BLEU (or chrF) differ, by sacreBLEU's paired bootstrap resampling.

    Parameters
    ----------
    baseline : sequence of str
        The baseline's detokenised hypotheses, one per sentence.
    variant : sequence of str
        The variant's hypotheses for the same sentences, in the same order.
    references : sequence of str
        One reference per sentence.
    metric : str
        ``"BLEU"`` (sacreBLEU 13a, cased) or ``"chrF"`` (chrF2).
    samples : int
        Bootstrap resamples (sacreBLEU's default is 1,000; at least 100).

    Returns
    -------
    PairedScoreTest
        Both scores, the p-value and the test's signature.

    Raises
    ------
    ValueError
        When the lists differ in length, are empty, ``samples`` is below 100, or the metric is not one of
        :data:`PAIRED_METRICS`.

    Notes
    -----
    Calls ``sacrebleu.significance.PairedTest(test_type="bs")``, which resamples with the seed in the
    ``SACREBLEU_SEED`` environment variable (12345 unless set; the signature records it), so the same inputs
    give the same p-value. Two systems with the same score (identical hypotheses, or different ones that both
    score 0) get p = 1: sacreBLEU 2.6 counts resampled differences *strictly* larger than the observed one,
    and when every resample's difference is 0 too it reports the smallest p-value, 1 / (samples + 1), for no
    difference at all.
    """
    if not len(baseline) == len(variant) == len(references):
        raise ValueError(
            f"paired test needs one hypothesis per reference: {len(baseline)} baseline, {len(variant)} "
            f"variant, {len(references)} references"
        )
    if not references:
        raise ValueError("no sentences to compare")
    if samples < 100:
        raise ValueError(f"samples={samples}: at least 100 bootstrap resamples")
    if metric not in PAIRED_METRICS:
        raise ValueError(f"metric={metric!r}: one of {', '.join(PAIRED_METRICS)}")
    systems: list[tuple[str, Sequence[str]]] = [("baseline", list(baseline)), ("variant", list(variant))]
    scorer = sacrebleu.BLEU() if metric == "BLEU" else sacrebleu.CHRF()
    test = PairedTest(systems, {metric: scorer}, [list(references)], test_type="bs", n_samples=samples)
    signatures, scores = test()
    (key,) = signatures  # sacreBLEU keys by the metric's own name: "BLEU", "chrF2"
    baseline_result, variant_result = scores[key]
    if not isinstance(baseline_result, Result) or not isinstance(variant_result, Result):
        raise TypeError(f"sacreBLEU's paired test returned {scores[key]!r}, not two results")
    if variant_result.p_value is None:
        raise TypeError(f"sacreBLEU's paired test gave the variant no p-value: {variant_result!r}")
    no_difference = list(baseline) == list(variant) or variant_result.score == baseline_result.score
    p_value = 1.0 if no_difference else float(variant_result.p_value)
    return PairedScoreTest(
        metric=metric,
        baseline_score=float(baseline_result.score),
        variant_score=float(variant_result.score),
        p_value=p_value,
        samples=samples,
        signature=str(signatures[key]),
    )
