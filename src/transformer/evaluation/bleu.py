"""Corpus BLEU and chrF with sacreBLEU, on detokenised text, with the signature that makes scores comparable."""

from collections.abc import Sequence
from dataclasses import dataclass

import sacrebleu
from sacrebleu.significance import PairedTest, Result


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

    Notes
    -----
    sacreBLEU's defaults otherwise: 13a tokenisation, exponential smoothing (Post, 2018). Raises ValueError
    when the counts differ or there is nothing to score.
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


@dataclass(frozen=True)
class PairedBleuTest:
    """A paired bootstrap comparison of two systems' BLEU on the same sentences.

    Parameters
    ----------
    baseline_bleu : float
        Corpus BLEU of the baseline, 0-100.
    variant_bleu : float
        Corpus BLEU of the variant, 0-100.
    p_value : float
        sacreBLEU's paired bootstrap p-value of the difference (two-sided: the chance of a difference at
        least this large, in either direction, were the systems equally good).
    samples : int
        Bootstrap resamples drawn.
    signature : str
        sacreBLEU's signature of the test (BLEU settings, ``bs`` resamples and the resampling seed).

    Notes
    -----
    Koehn (2004), "Statistical significance tests for machine translation evaluation": resample the test
    sentences with replacement, score both systems on each resample, and see how often the difference
    vanishes. The direction is read from :attr:`difference`, not from the p-value.
    """

    baseline_bleu: float
    variant_bleu: float
    p_value: float
    samples: int
    signature: str

    @property
    def difference(self) -> float:
        """Variant BLEU minus baseline BLEU.

        Returns
        -------
        float
            Positive when the variant scores higher.

        Notes
        -----
        Corpus BLEU of the full sets, not the bootstrap mean.
        """
        return self.variant_bleu - self.baseline_bleu


def paired_bootstrap_bleu(
    baseline: Sequence[str], variant: Sequence[str], references: Sequence[str], samples: int = 1000
) -> PairedBleuTest:
    """Test whether two systems' BLEU differ, by sacreBLEU's paired bootstrap resampling.

    Parameters
    ----------
    baseline : sequence of str
        The baseline's detokenised hypotheses, one per sentence.
    variant : sequence of str
        The variant's hypotheses for the same sentences, in the same order.
    references : sequence of str
        One reference per sentence.
    samples : int
        Bootstrap resamples (sacreBLEU's default is 1,000; at least 100).

    Returns
    -------
    PairedBleuTest
        Both BLEU scores, the p-value and the test's signature.

    Notes
    -----
    Calls ``sacrebleu.significance.PairedTest(test_type="bs")``, which resamples with the seed in the
    ``SACREBLEU_SEED`` environment variable (12345 unless set; the signature records it), so the same inputs
    give the same p-value. Two systems with the same BLEU (identical hypotheses, or different ones that both
    score 0) get p = 1: sacreBLEU 2.6 counts resampled differences *strictly* larger than the observed one,
    and when every resample's difference is 0 too it reports the smallest p-value, 1 / (samples + 1), for no
    difference at all.
    Raises ValueError when the lists differ in length, are empty, or ``samples`` is below 100.
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
    systems: list[tuple[str, Sequence[str]]] = [("baseline", list(baseline)), ("variant", list(variant))]
    test = PairedTest(
        systems, {"BLEU": sacrebleu.BLEU()}, [list(references)], test_type="bs", n_samples=samples
    )
    signatures, scores = test()
    baseline_result, variant_result = scores["BLEU"]
    if not isinstance(baseline_result, Result) or not isinstance(variant_result, Result):
        raise TypeError(f"sacreBLEU's paired test returned {scores['BLEU']!r}, not two results")
    if variant_result.p_value is None:
        raise TypeError(f"sacreBLEU's paired test gave the variant no p-value: {variant_result!r}")
    no_difference = list(baseline) == list(variant) or variant_result.score == baseline_result.score
    p_value = 1.0 if no_difference else float(variant_result.p_value)
    return PairedBleuTest(
        baseline_bleu=float(baseline_result.score),
        variant_bleu=float(variant_result.score),
        p_value=p_value,
        samples=samples,
        signature=str(signatures["BLEU"]),
    )
