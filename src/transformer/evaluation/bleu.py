"""Corpus BLEU and chrF with sacreBLEU, on detokenised text, with the signature that makes scores comparable."""

from collections.abc import Sequence
from dataclasses import dataclass

import sacrebleu


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
