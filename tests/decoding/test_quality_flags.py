"""Quality flags: the spans each flag reads, its decision at its thresholds, and the forced passes' signals
checked against the model's own logits, alone and in a padded batch, and through the Translator."""

from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from transformer.decoding.quality_flags import (
    FlagThresholds,
    SentenceSignals,
    forced_signals,
    omission_span,
    repetition_span,
    sentence_flags,
)
from transformer.decoding.translator import Translator


def signals(
    source: str, coverage: list[float], target: str = "Ein Hund", gains: list[float] | None = None
) -> SentenceSignals:
    words = target.split()
    gains = gains if gains is not None else [2.0] * len(words)
    return SentenceSignals(
        tuple(source.split()), tuple(coverage), tuple(words), tuple(gains), sum(gains) / len(gains), -1.0
    )


def test_a_loop_is_the_repeat_whose_copies_add_the_most_words() -> None:
    assert repetition_span(["ein", "Hund", "Hund", "Hund", "läuft"]) == (1, 4, 2)
    assert repetition_span(["a", "b", "a", "b", "a", "b", "c"]) == (0, 6, 4)
    # Case folds; punctuation that is part of a word does not.
    assert repetition_span(["Mann", "mann", "MANN"]) == (0, 3, 2)
    assert repetition_span(["Mann,", "Mann"]) == (0, 0, 0)
    assert repetition_span(["ein", "Hund", "läuft"]) == (0, 0, 0)
    assert repetition_span([]) == (0, 0, 0)
    # Two copies of three words add three, more than a word said twice.
    assert repetition_span(["sehr", "sehr", "gut", "auf", "dem", "Rasen", "auf", "dem", "Rasen"]) == (3, 9, 3)


def test_an_omission_is_the_longest_run_of_uncovered_words_and_punctuation_neither_counts_nor_breaks() -> (
    None
):
    found = signals("A dog runs fast .", [1.0, 0.1, 0.05, 0.9, 0.0])
    assert omission_span(found, 0.2) == (1, 3, 2)
    assert omission_span(found, 0.06) == (2, 3, 1)
    assert omission_span(found, 0.01) == (0, 0, 0)
    # The comma is uncovered but no content: the run goes across it (two words, not three); the final full
    # stop is not counted.
    assert omission_span(signals("a b , c .", [1.0, 0.1, 0.0, 0.1, 0.0]), 0.2) == (1, 4, 2)
    [flag] = sentence_flags(signals("a b , c .", [1.0, 0.1, 0.0, 0.1, 0.0]), FlagThresholds(0.2, 2, -1e9, 50))
    assert flag.score == 2.0 and flag.source_span == (1, 4)
    assert (
        sentence_flags(signals("a b , c .", [1.0, 0.1, 0.0, 0.1, 0.0]), FlagThresholds(0.2, 3, -1e9, 50))
        == ()
    )


def test_the_flags_fire_at_their_thresholds_with_their_evidence() -> None:
    found = signals(
        "A dog runs in the park .",
        [1.0, 0.9, 1.1, 0.1, 0.05, 0.1, 0.0],
        "Ein Hund rennt rennt rennt",
        [3.0, 0.2, 0.1, 2.0, 0.0],
    )
    thresholds = FlagThresholds(
        uncovered_below=0.2, omission_words=3, hallucination_below=1.5, repetition_words=2
    )
    flags = sentence_flags(found, thresholds)
    assert [flag.kind for flag in flags] == ["omission", "hallucination", "repetition"]
    omission, hallucination, repetition = flags
    assert omission.source_span == (3, 6) and omission.score == 3.0 and omission.target_span is None
    assert hallucination.score == pytest.approx(1.06) and hallucination.target_span == (1, 3)
    assert repetition.target_span == (2, 5) and repetition.score == 2.0
    # One step past each threshold and none fires.
    stricter = FlagThresholds(
        uncovered_below=0.2, omission_words=4, hallucination_below=1.06, repetition_words=3
    )
    assert sentence_flags(found, stricter) == ()
    # A detached output whose every word is below the threshold's evidence is the whole output.
    [whole] = sentence_flags(
        signals("a b", [1.0, 1.0], "x y", [2.0, 2.0]), FlagThresholds(hallucination_below=5)
    )
    assert whole.kind == "hallucination" and whole.target_span == (0, 2)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("uncovered_below", 0.0, "uncovered_below must be in"),
        ("uncovered_below", 1.5, "uncovered_below must be in"),
        ("omission_words", 0, "omission_words must be at least 1"),
        ("repetition_words", 0, "repetition_words must be at least 1"),
        ("hallucination_below", float("nan"), "hallucination_below must be a finite number"),
    ],
)
def test_thresholds_out_of_range_are_refused_by_name(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FlagThresholds(**{field: value})


def _mean_gain_by_hand(translator: Translator, source: list[int], output: list[int]) -> tuple[float, float]:
    model, config = translator.model, translator.model.config
    decoder_input = torch.tensor([[config.start_id, *output[:-1]]])
    target = torch.tensor(output)
    with torch.inference_mode():
        with_source = F.log_softmax(model(torch.tensor([source]), decoder_input).float(), -1)[0]
        without = F.log_softmax(model(torch.tensor([[config.eos_id]]), decoder_input).float(), -1)[0]
    positions = torch.arange(len(output))
    log_probs = with_source[positions, target]
    return float((log_probs - without[positions, target]).mean()), float(log_probs.mean())


def test_the_forced_signals_are_the_models_own_probabilities_in_any_batch(trained_run: Path) -> None:
    translator = Translator.from_checkpoint(trained_run)
    tokenizer = translator.tokenizer
    eos = translator.model.config.eos_id
    sentences = ["the cat sat on the mat", "a dog", "three small birds sing in the old tree today"]
    sources = [[*tokenizer.encode(sentence), eos] for sentence in sentences]
    outputs = [candidates[0].tokens for candidates in translator.translate_nbest(sentences)]
    outputs[1] = tokenizer.encode_target("ein Hund und eine Katze")  # a forced output, not the search's
    batched = forced_signals(translator.model, tokenizer, sources, outputs)
    for sentence, source, output, together in zip(sentences, sources, outputs, batched, strict=True):
        [alone] = forced_signals(translator.model, tokenizer, [source], [output])
        assert together.mean_gain == pytest.approx(alone.mean_gain, abs=1e-5)
        assert together.source_coverage == pytest.approx(alone.source_coverage, abs=1e-5)
        gain, log_prob = _mean_gain_by_hand(translator, source, output)
        assert together.mean_gain == pytest.approx(gain, abs=1e-4)
        assert together.mean_log_prob == pytest.approx(log_prob, abs=1e-4)
        # Each output token's attention sums to one over the source words and the EOS sink.
        assert 0 < sum(together.source_coverage) <= len(output) + 1e-4
        assert together.source_words == tuple(sentence.split())
        assert len(together.target_gain) == len(together.target_words)


def test_the_translator_flags_every_candidate_when_asked(trained_run: Path) -> None:
    translator = Translator.from_checkpoint(trained_run)
    sentences = ["the cat sat on the mat", "", "a dog runs"]
    plain = translator.translate_nbest(sentences)
    assert all(candidate.flags is None for found in plain for candidate in found)
    everything = FlagThresholds(
        uncovered_below=1.0, omission_words=1, hallucination_below=1e6, repetition_words=1
    )
    flagged = translator.translate_nbest(sentences, flags=everything)
    assert [[c.text for c in found] for found in flagged] == [[c.text for c in found] for found in plain]
    assert flagged[1] == []
    for found in (flagged[0], flagged[2]):
        [candidate] = found
        assert candidate.flags is not None
        kinds = [flag.kind for flag in candidate.flags]
        assert "hallucination" in kinds  # every output's gain is below a million nats
        words = len(candidate.text.split())
        for flag in candidate.flags:
            if flag.target_span is not None:
                assert 0 <= flag.target_span[0] < flag.target_span[1] <= words
    nothing = FlagThresholds(
        uncovered_below=1e-9, omission_words=50, hallucination_below=-1e6, repetition_words=50
    )
    assert all(found[0].flags == () for found in translator.translate_nbest(["a dog runs"], flags=nothing))
