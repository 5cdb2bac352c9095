"""Assertions the decoding tests share: two searches found the same hypotheses."""

import pytest

from transformer.decoding.search import Hypothesis


def assert_same_hypotheses(
    found: list[list[Hypothesis]], expected: list[list[Hypothesis]], *, tolerance: float
) -> None:
    """Tokens exactly; scores and log-probs up to ``tolerance`` (float rounding of equivalent computations)."""
    assert [[h.tokens for h in sentence] for sentence in found] == [[h.tokens for h in s] for s in expected]
    for sentence, expected_sentence in zip(found, expected, strict=True):
        for hypothesis, expected_hypothesis in zip(sentence, expected_sentence, strict=True):
            assert hypothesis.score == pytest.approx(expected_hypothesis.score, abs=tolerance)
            assert hypothesis.log_prob == pytest.approx(expected_hypothesis.log_prob, abs=tolerance)
