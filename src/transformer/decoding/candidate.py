"""One translation of one input sentence, as ``Translator`` returns it: text, scores, tokens, alignment, flags."""

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformer.decoding.search import Hypothesis


@dataclass(frozen=True)
class QualityFlag:
    """A reason not to trust a translation blindly, with its evidence.

    Parameters
    ----------
    kind : str
        ``"omission"``, ``"hallucination"`` or ``"repetition"``.
    score : float
        How strongly it fires: an omission's uncovered source words, a hallucination's mean source gain in nats
        per token (lower is worse), a repetition's added words.
    source_span : tuple of (int, int) or None
        Half-open span of source words that is the evidence (an omission's unread words); None for the others.
    target_span : tuple of (int, int) or None
        Half-open span of target words that is the evidence (a hallucination's or a loop's); None for an
        omission.

    Notes
    -----
    Word indices count whitespace words from 0, as Pharaoh alignments do; how each flag is decided is in
    :mod:`transformer.decoding.quality_flags`.
    """

    kind: str
    score: float
    source_span: tuple[int, int] | None = None
    target_span: tuple[int, int] | None = None


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
    flags : tuple of QualityFlag or None
        Omission, hallucination and repetition flags, when asked for (``flags``); empty when none fires.

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
    flags: tuple[QualityFlag, ...] | None = None

    @classmethod
    def from_hypothesis(cls, hypothesis: "Hypothesis", text: str) -> "Candidate":
        """Make the candidate of a search's hypothesis.

        Parameters
        ----------
        hypothesis : Hypothesis
            What a search found.
        text : str
            Its tokens detokenised (the caller's tokenizer; stripped).

        Returns
        -------
        Candidate
            Its text, scores, tokens, expected utility and confidence; no alignment or flags yet.

        Notes
        -----
        The one place a hypothesis becomes a candidate, for ``Translator`` and the server alike, so a field a
        search adds reaches both.
        """
        return cls(
            text,
            hypothesis.score,
            hypothesis.log_prob,
            hypothesis.tokens,
            hypothesis.expected_utility,
            confidence=hypothesis.confidence,
        )
