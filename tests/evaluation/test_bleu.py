"""BLEU and chrF on imperfect hypotheses, against sacreBLEU's own numbers and against BLEU computed by hand."""

import math
import random

import pytest
import sacrebleu

from transformer.evaluation.bleu import paired_bootstrap_test, score_translations

# (hypotheses, references): partial matches, hypotheses shorter (brevity penalty) and longer than the
# references, punctuation that 13a splits off, case differences and an empty hypothesis.
CORPORA = {
    "partial": (
        ["A man rides a red bike down the street.", "Two dogs play in the snow."],
        ["A man rides his bike down a busy street.", "Two dogs are playing in the snow."],
    ),
    "short": (
        ["The girl sings.", "Children run across the field near the lake"],
        [
            "The little girl sings a song on the stage.",
            "The children run across the green field near the lake.",
        ],
    ),
    "long": (
        ["A woman in a blue dress is walking with her small dog along the beach at sunset today."],
        ["A woman in a blue dress walks her dog on the beach."],
    ),
    "punctuation": (
        ['He said: "It\'s fine," and left (quickly).', "Price: $5.00, or 4,50 EUR!"],
        ['He said, "It is fine" and left quickly.', "Price: $5.00 or 4.50 EUR."],
    ),
    "case": (
        ["THE MAN sees The Dog in the park today.", "a Woman Reads A Book on a bench."],
        ["The man sees the dog in the park today.", "A woman reads a book on the bench."],
    ),
    "empty_hypothesis": (
        ["", "A boy jumps into the cold water of the lake."],
        ["Nobody is here.", "A boy jumps into the water of the lake."],
    ),
}


@pytest.mark.parametrize("lowercase", [False, True])
@pytest.mark.parametrize("name", sorted(CORPORA))
def test_scores_equal_sacrebleu(name: str, lowercase: bool) -> None:
    hypotheses, references = CORPORA[name]
    scores = score_translations(hypotheses, references, lowercase=lowercase)
    bleu = sacrebleu.BLEU(lowercase=lowercase).corpus_score(hypotheses, [references])
    chrf = sacrebleu.CHRF().corpus_score(hypotheses, [references])  # chrF stays case-sensitive
    assert scores.bleu == pytest.approx(bleu.score, abs=1e-9)
    assert scores.chrf == pytest.approx(chrf.score, abs=1e-9)
    assert 0.0 < scores.bleu < 100.0 and 0.0 < scores.chrf < 100.0  # imperfect, yet partly matching
    assert scores.num_sentences == len(hypotheses)
    precisions = "/".join(f"{precision:.1f}" for precision in bleu.precisions)
    ratio = bleu.sys_len / bleu.ref_len
    lengths = f"ratio = {ratio:.3f} hyp_len = {bleu.sys_len} ref_len = {bleu.ref_len}"
    assert scores.bleu_details == f"{precisions} (BP = {bleu.bp:.3f} {lengths})"


def test_truncated_hypothesis_is_scored_by_the_brevity_penalty_alone() -> None:
    # Every n-gram of the 4-token hypothesis is in the 10-token reference (13a splits off the period), so
    # BLEU = 100 * BP = 100 * exp(1 - 10/4). Sides swapped it would be 26.3 (precisions 4/10 ... 1/7, BP 1).
    scores = score_translations(["The little girl sings"], ["The little girl sings a song on the stage."])
    assert scores.bleu == pytest.approx(100.0 * math.exp(1 - 10 / 4), abs=1e-6)
    assert (
        scores.bleu_details == "100.0/100.0/100.0/100.0 (BP = 0.223 ratio = 0.400 hyp_len = 4 ref_len = 10)"
    )


def test_lowercase_changes_bleu_but_not_chrf() -> None:
    hypotheses, references = CORPORA["case"]
    cased, lowered = (
        score_translations(hypotheses, references),
        score_translations(hypotheses, references, True),
    )
    assert lowered.bleu > cased.bleu + 20.0
    assert lowered.bleu == pytest.approx(
        sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True).score
    )
    assert lowered.chrf == cased.chrf < 90.0


def test_one_sentence_bleu_by_hand() -> None:
    # hyp "the cat sat on a mat" vs ref "the cat sat on the mat": 6 tokens each, so BP = 1.
    # 1-grams: the cat sat on mat = 5/6; 2-grams: the_cat cat_sat sat_on = 3/5;
    # 3-grams: the_cat_sat cat_sat_on = 2/4; 4-grams: the_cat_sat_on = 1/3.
    precisions = [5 / 6, 3 / 5, 2 / 4, 1 / 3]
    expected = 100.0 * math.exp(sum(math.log(p) for p in precisions) / 4)
    scores = score_translations(["the cat sat on a mat"], ["the cat sat on the mat"])
    assert scores.bleu == pytest.approx(expected, abs=1e-6)
    assert scores.bleu == pytest.approx(100.0 * (1 / 12) ** 0.25, abs=1e-6)
    assert scores.bleu_details == "83.3/60.0/50.0/33.3 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)"


def test_two_sentence_corpus_bleu_by_hand_with_brevity_penalty() -> None:
    # 13a splits off the final period. Corpus BLEU pools the n-gram counts of both sentences (it is not the
    # mean of sentence BLEUs).
    # 1: "The cat sat on the mat ." (7) vs "The cat sat on the red mat today ." (9)
    #    1-grams 7/7; 2-grams The_cat cat_sat sat_on on_the = 4/6; 3-grams 3/5; 4-grams 2/4.
    # 2: "We walked home" (3) vs "We walked back home" (4)
    #    1-grams 3/3; 2-grams We_walked = 1/2; 3-grams 0/1; 4-grams 0/0.
    # Pooled: 10/10, 5/8, 3/6, 2/4; hyp_len 10, ref_len 13, BP = exp(1 - 13/10).
    precisions = [10 / 10, 5 / 8, 3 / 6, 2 / 4]
    brevity_penalty = math.exp(1 - 13 / 10)
    expected = 100.0 * brevity_penalty * math.exp(sum(math.log(p) for p in precisions) / 4)
    hypotheses = ["The cat sat on the mat.", "We walked home"]
    references = ["The cat sat on the red mat today.", "We walked back home"]
    scores = score_translations(hypotheses, references)
    assert scores.bleu == pytest.approx(expected, abs=1e-6)
    assert scores.bleu_details == "100.0/62.5/50.0/50.0 (BP = 0.741 ratio = 0.769 hyp_len = 10 ref_len = 13)"
    sentence_bleus = [
        sacrebleu.sentence_bleu(hypothesis, [reference]).score
        for hypothesis, reference in zip(hypotheses, references, strict=True)
    ]
    sentence_mean = sum(sentence_bleus) / 2
    assert abs(scores.bleu - sentence_mean) > 1.0


def test_empty_hypotheses_score_zero() -> None:
    scores = score_translations(["", ""], ["A dog runs.", "Two cats sleep."])
    assert (scores.bleu, scores.chrf) == (0.0, 0.0)
    assert scores.bleu_details.endswith("(BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 8)")


def test_signatures_name_the_settings() -> None:
    version = sacrebleu.__version__
    cased = score_translations(["a b c d e"], ["a b c d f"])
    lowered = score_translations(["a b c d e"], ["a b c d f"], lowercase=True)
    assert cased.bleu_signature == f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{version}"
    assert lowered.bleu_signature == f"nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:{version}"
    expected_chrf = f"nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:{version}"
    assert cased.chrf_signature == lowered.chrf_signature == expected_chrf
    bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
    bleu.corpus_score(["a b c d e"], [["a b c d f"]])
    chrf.corpus_score(["a b c d e"], [["a b c d f"]])
    assert (cased.bleu_signature, cased.chrf_signature) == (
        str(bleu.get_signature()),
        str(chrf.get_signature()),
    )


def test_describe_prints_scores_signatures_and_details() -> None:
    scores = score_translations(["the cat sat on a mat"], ["the cat sat on the mat"])
    chrf = sacrebleu.corpus_chrf(["the cat sat on a mat"], [["the cat sat on the mat"]]).score
    assert scores.describe() == (
        f"BLEU 53.73 ({scores.bleu_signature}) 83.3/60.0/50.0/33.3 (BP = 1.000 ratio = 1.000 hyp_len = 6 "
        f"ref_len = 6)\nchrF2 {chrf:.2f} ({scores.chrf_signature})"
    )


@pytest.mark.parametrize(
    ("hypotheses", "references", "message"),
    [
        (["a"], ["a", "b"], "1 hypotheses but 2 references"),
        ([], [], "no sentences to score"),
    ],
)
def test_mismatched_or_empty_inputs_are_refused(hypotheses: list, references: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        score_translations(hypotheses, references)


def _corrupt(sentences: list[str], share: float, seed: int) -> list[str]:
    """Replace about ``share`` of each sentence's words by a word no reference has."""
    rng = random.Random(seed)
    return [
        " ".join("zzz" if rng.random() < share else word for word in sentence.split())
        for sentence in sentences
    ]


def _references(count: int) -> list[str]:
    rng = random.Random(7)
    words = [f"w{index}" for index in range(300)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(8, 16))) for _ in range(count)]


def test_paired_bootstrap_finds_a_clearly_better_system_significant() -> None:
    references = _references(200)
    baseline, better = _corrupt(references, 0.4, seed=1), _corrupt(references, 0.2, seed=2)
    test = paired_bootstrap_test(baseline, better, references)
    assert test.baseline_score == pytest.approx(score_translations(baseline, references).bleu)
    assert test.variant_score == pytest.approx(score_translations(better, references).bleu)
    assert test.difference > 10 and test.p_value < 0.01
    assert "bs:1000" in test.signature and "seed:" in test.signature
    # Swapping the roles flips the sign, not the significance.
    swapped = paired_bootstrap_test(better, baseline, references)
    assert swapped.difference == pytest.approx(-test.difference) and swapped.p_value < 0.01


def test_paired_bootstrap_finds_identical_and_nearly_identical_systems_not_significant() -> None:
    references = _references(200)
    baseline = _corrupt(references, 0.3, seed=1)
    identical = paired_bootstrap_test(baseline, list(baseline), references)
    assert identical.difference == 0 and identical.p_value == 1.0  # sacreBLEU alone would say 1/1001
    both_zero = paired_bootstrap_test(["x y z"] * 20, ["q r s"] * 20, references[:20])
    assert both_zero.variant_score == both_zero.baseline_score == 0 and both_zero.p_value == 1.0
    nearly = list(baseline)
    nearly[0] = references[0]  # one sentence of 200 fixed
    test = paired_bootstrap_test(baseline, nearly, references)
    assert 0 < test.difference < 1 and test.p_value > 0.05
    # Two systems of the same quality, with different errors: not significant either.
    same_quality = paired_bootstrap_test(baseline, _corrupt(references, 0.3, seed=3), references)
    assert same_quality.p_value > 0.05


def test_paired_bootstrap_refuses_mismatched_inputs() -> None:
    with pytest.raises(ValueError, match="2 baseline, 1 variant, 2 references"):
        paired_bootstrap_test(["a", "b"], ["a"], ["a", "b"])
    with pytest.raises(ValueError, match="samples=10"):
        paired_bootstrap_test(["a"], ["a"], ["a"], samples=10)
    with pytest.raises(ValueError, match="metric='TER': one of BLEU, chrF"):
        paired_bootstrap_test(["a"], ["a"], ["a"], metric="TER")


def test_paired_bootstrap_on_chrf_scores_chrf_and_tests_it() -> None:
    references = _references(200)
    baseline, better = _corrupt(references, 0.4, seed=1), _corrupt(references, 0.2, seed=2)
    test = paired_bootstrap_test(baseline, better, references, metric="chrF")
    assert (
        test.metric == "chrF" and test.signature.startswith("nrefs:1|bs:1000") and "|nc:6|" in test.signature
    )
    assert test.baseline_score == pytest.approx(score_translations(baseline, references).chrf)
    assert test.variant_score == pytest.approx(score_translations(better, references).chrf)
    assert test.difference > 5 and test.p_value < 0.01
    assert "|nc:" not in paired_bootstrap_test(baseline, better, references).signature  # BLEU's
