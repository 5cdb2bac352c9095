"""One translation of one input sentence, as ``Translator`` returns it: text, scores, tokens, alignment."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """One translation of one input sentence.

    Parameters
    ----------
    text : str
        Detokenised translation, without leading or trailing whitespace.
    score : float
        Length-normalised log-probability used for ranking (higher is better).
    log_prob : float
        Total log-probability of the output tokens.
    tokens : list of int
        Output token ids (no BOS/EOS).
    expected_utility : float or None
        With MBR decoding, the mean chrF or BLEU against the other candidates (what ranks them).
    alignment : list of (int, int) or None
        Word alignment (source word, target word), when asked for (``alignment_layer``).
    confidence : float or None
        The geometric mean of the output's token probabilities, in [0, 1]
        (:func:`~transformer.decoding.confidence.sentence_confidence`); None where no search made it.

    Notes
    -----
    ``Translator.translate_nbest`` returns these, best first by ``score`` (by ``expected_utility`` with
    MBR). ``score`` and ``log_prob`` count the final EOS (unless the length limit stopped the search), which
    ``tokens`` and ``text`` leave out.
    """

    text: str
    score: float
    log_prob: float
    tokens: list[int]
    expected_utility: float | None = None
    alignment: list[tuple[int, int]] | None = None
    confidence: float | None = None
