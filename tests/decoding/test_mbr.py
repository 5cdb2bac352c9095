"""MBR decoding: utilities equal sacreBLEU's sentence scores, and the consensus candidate wins."""

import itertools

import pytest
import sacrebleu
import torch

from tests.decoding.oracle_step_model import EOS, A, B, C, TableStepModel, oracle_sources
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import beam_search
from transformer.decoding.mbr import candidate_config, mbr_search
from transformer.decoding.search import Hypothesis
from transformer.evaluation.bleu import SentenceUtility

SENTENCES = [
    "A man in a blue shirt is standing on a ladder.",
    "A man in a blue shirt stands on a ladder cleaning windows.",
    "Two dogs play in the snow.",
    "A man, wearing a blue shirt, is on a ladder!",
    "",
    "a man in a blue shirt is standing on a ladder",
]


@pytest.mark.parametrize("name", ["chrf", "bleu"])
def test_pairwise_utility_equals_sacrebleu_sentence_score(name: str) -> None:
    utility = SentenceUtility(name)
    metric = sacrebleu.CHRF() if name == "chrf" else sacrebleu.BLEU(effective_order=True)
    features = [utility.features(sentence) for sentence in SENTENCES]
    for (i, hypothesis), (j, reference) in itertools.product(enumerate(SENTENCES), repeat=2):
        expected = metric.sentence_score(hypothesis, [reference]).score
        assert utility.score(features[i], features[j]) == pytest.approx(expected), (hypothesis, reference)


def test_expected_utility_averages_over_the_other_candidates_and_counts_duplicates() -> None:
    utility = SentenceUtility("chrf")
    candidates = [SENTENCES[0], SENTENCES[2], SENTENCES[0], SENTENCES[1]]
    found = utility.expected_utilities(candidates)

    def chrf(hypothesis: str, reference: str) -> float:
        return sacrebleu.CHRF().sentence_score(hypothesis, [reference]).score

    by_hand = [
        sum(chrf(candidate, other) for j, other in enumerate(candidates) if j != i) / 3
        for i, candidate in enumerate(candidates)
    ]
    assert found == pytest.approx(by_hand)
    assert found[0] == found[2] and found[0] > found[3] > found[1]


# Greedy and beam take the single most probable output "A"; three near-identical outputs share the
# rest of the mass, so a consensus among them is what MBR should pick.
SPLIT_VOTE = {
    (): {A: 0.4, B: 0.6},
    (B,): {C: 0.35, A: 0.33, B: 0.32},
    (B, C): {EOS: 1.0},
    (B, A): {EOS: 1.0},
    (B, B): {EOS: 1.0},
}
WORDS = {A: "cat", B: "the big", C: "dog"}


def detokenize(tokens: list[int]) -> str:
    return " ".join(WORDS[token] for token in tokens)


def test_mbr_prefers_the_consensus_over_the_mode() -> None:
    [[mode]] = beam_search(TableStepModel(SPLIT_VOTE), oracle_sources(0), DecodeConfig(length_penalty=0.0))
    assert mode.tokens == [A]
    config = DecodeConfig(mbr=4, mbr_candidates="beam", length_penalty=0.0, nbest=2)
    [[best, second]] = mbr_search(TableStepModel(SPLIT_VOTE), oracle_sources(0), config, detokenize)
    assert best.tokens[0] == B and second.tokens[0] == B
    assert best.expected_utility is not None and second.expected_utility is not None
    assert best.expected_utility >= second.expected_utility
    # The expected utility is the mean chrF against the three other beam candidates.
    candidates = [
        detokenize(h.tokens)
        for h in beam_search(TableStepModel(SPLIT_VOTE), oracle_sources(0), candidate_config(config))[0]
    ]
    best_text = detokenize(best.tokens)
    others = list(candidates)
    others.remove(best_text)
    mean = sum(sacrebleu.CHRF().sentence_score(best_text, [o]).score for o in others) / len(others)
    assert best.expected_utility == pytest.approx(mean)


def test_mbr_from_samples_is_reproducible_and_keeps_model_scores() -> None:
    config = DecodeConfig(mbr=16, mbr_utility="bleu", seed=5, length_penalty=0.0)
    first = mbr_search(TableStepModel(SPLIT_VOTE), oracle_sources(0, 0), config, detokenize)
    assert first == mbr_search(TableStepModel(SPLIT_VOTE), oracle_sources(0, 0), config, detokenize)
    [winner] = first[0]
    assert winner.tokens[0] == B
    log_probs = {(A,): 0.4, (B, C): 0.6 * 0.35, (B, A): 0.6 * 0.33, (B, B): 0.6 * 0.32}
    assert winner.log_prob == pytest.approx(float(torch.tensor(log_probs[tuple(winner.tokens)]).log()))


def test_mbr_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="mbr=1"):
        DecodeConfig(mbr=1)
    with pytest.raises(ValueError, match="nbest=5 must be between 1 and mbr=4"):
        DecodeConfig(mbr=4, nbest=5)
    with pytest.raises(ValueError, match="mbr_utility='ter'"):
        DecodeConfig(mbr=4, mbr_utility="ter")
    assert candidate_config(DecodeConfig(mbr=8, beam_size=4)).nbest == 8
    assert candidate_config(DecodeConfig(mbr=8, mbr_candidates="beam")).beam_size == 8
    assert Hypothesis([1], 0.0, 0.0).expected_utility is None
