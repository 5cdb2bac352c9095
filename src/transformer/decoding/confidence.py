"""A translation's confidence: the geometric mean of its tokens' probabilities under the model.

``confidence = exp(log_prob / |Y|)``, with ``|Y|`` the steps the search took (the output's tokens and its
final EOS): a number in [0, 1] that every search already has, so it costs nothing to report. It is the
signal that ranked the quality of the Multi30k model's translations best among the single signals measured
(Spearman correlation with sentence-level chrF against the references, 0.660 [0.621, 0.696], `python -m
benchmarks.confidence`; experiments/benchmarks/2026-12-02-confidence-multi30k.md): the length-normalised search
score ranked them worse (0.613), the least probable token, cross-attention coverage, the length ratio and the
attention on the source EOS far worse. A least-squares combination of them, fitted on one half of the
validation set, ranked the other half slightly better (+0.018, paired interval [+0.006, +0.032]); it needs a
second, teacher-forced pass and weights fitted per model, so it is not shipped yet (issue #51 stays open on it).
"""

import math


def sentence_confidence(log_prob: float, num_steps: int) -> float:
    """Turn a hypothesis's summed log-probability into a confidence in [0, 1].

    Parameters
    ----------
    log_prob : float
        Sum of the log-probabilities of every generated token, the final EOS included when there is one
        (``Hypothesis.log_prob``).
    num_steps : int
        The steps taken, ``|Y|``: the tokens plus the final EOS (a hypothesis stopped by the length limit
        has no EOS).

    Returns
    -------
    float
        ``exp(log_prob / num_steps)``, the geometric mean of the token probabilities; 0.0 for a hypothesis
        of zero probability (``log_prob`` of ``-inf``) and 1.0 for one of no steps.

    Notes
    -----
    A geometric mean, not the product: the product falls with every token, so a long correct translation
    would look less certain than a short wrong one. The probabilities are the search's: with a vocabulary
    shortlist they are normalised over the sentence's shortlist, so they run a little higher than over the
    whole vocabulary; with label smoothing (the paper's 0.1) even a certain token has a probability below 1,
    so confidences of a well-trained model sit around 0.5-0.9 rather than at 1.
    """
    if num_steps <= 0:
        return 1.0
    if math.isinf(log_prob) and log_prob < 0:
        return 0.0
    return min(1.0, math.exp(log_prob / num_steps))
