"""Lexically constrained beam search (dynamic beam allocation) against oracles and the plain search."""

import pytest
import torch

from tests.decoding.oracle_step_model import EOS, A, B, C, TableStepModel, oracle_sources, random_tables
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import beam_search
from transformer.decoding.constrained_beam_search import constrained_beam_search
from transformer.decoding.term_constraints import TermProgress, allocate_banks
from transformer.model.transformer import Transformer

# A model that wants to say A (then EOS) and finds C very unlikely: C in the output needs the constraint.
PREFERS_A = {
    (): {A: 0.90, B: 0.09, C: 0.01},
    (A,): {EOS: 0.95, C: 0.05},
    (B,): {EOS: 0.5, C: 0.5},
    (C,): {EOS: 0.6, A: 0.4},
    (A, C): {EOS: 0.9, B: 0.1},
    (C, A): {EOS: 1.0},
}


def test_progress_follows_a_phrase_token_by_token_and_abandons_it_on_a_wrong_token() -> None:
    progress = TermProgress.start([[A, B], [C]])
    assert (progress.total_tokens, progress.tokens_met, progress.complete) == (3, 0, False)
    assert progress.next_tokens() == [A, C]
    begun = progress.advance(A)
    assert (begun.current, begun.position, begun.tokens_met) == (0, 1, 1)
    assert begun.next_tokens() == [B, C]
    assert begun.advance(C).tokens_met == 1  # A abandoned (its token stops counting), C met
    assert begun.advance(C).met == (False, True)
    assert begun.advance(A).current == 0 and begun.advance(A).position == 1  # a new start of the same phrase
    done = begun.advance(B).advance(C)
    assert (done.complete, done.tokens_met, done.next_tokens()) == (True, 3, [])
    assert progress.advance(B) is progress  # nothing begun, nothing changed


def test_progress_remembers_a_term_was_just_met_for_one_token() -> None:
    progress = TermProgress.start([[A, B], [C]])
    assert not progress.advance(A).just_met
    assert progress.advance(A).advance(B).just_met and progress.advance(C).just_met
    assert not progress.advance(C).advance(A).just_met


# After A the model would glue C onto it (as "Baum" + "s"): the word-continuation rule must stop that.
GLUES = {
    (): {A: 0.9, B: 0.1},
    (A,): {C: 0.9, EOS: 0.1},
    (A, C): {EOS: 1.0},
    (B,): {A: 0.5, EOS: 0.5},
    (B, A): {EOS: 1.0},
}


def test_the_token_after_a_term_may_not_continue_its_word() -> None:
    config = DecodeConfig(beam_size=2, length_penalty=0.0, max_length=4)
    glued = constrained_beam_search(TableStepModel(GLUES), oracle_sources(0), [[[A]]], config)[0][0]
    assert glued.tokens == [A, C]
    kept = constrained_beam_search(TableStepModel(GLUES), oracle_sources(0), [[[A]]], config, None, [C])
    assert kept[0][0].tokens == [A]  # 0.9 * 0.1 beats [B, A] at 0.1 * 0.5
    plain = constrained_beam_search(TableStepModel(GLUES), oracle_sources(0), [[]], config, None, [C])
    assert plain[0][0].tokens == [A, C]  # without a term nothing is forbidden


def test_a_phrase_listed_twice_must_be_met_twice_and_empty_phrases_are_refused() -> None:
    progress = TermProgress.start([[C], [C]]).advance(C)
    assert (progress.met, progress.complete) == ((True, False), False)
    assert progress.advance(C).complete
    assert TermProgress.start([]).complete
    with pytest.raises(ValueError, match="no tokens"):
        TermProgress.start([[A], []])


def test_banks_share_the_beam_and_pass_unused_slots_on_by_score() -> None:
    scores = [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]
    # Two banks hold candidates, beam 4: two slots each; bank 1 holds candidates 4 and 5 only.
    assert allocate_banks([0, 0, 0, 0, 1, 1], scores, 4) == [0, 1, 4, 5]
    # Bank 1 has one candidate: its unused slot goes to the best left (candidate 2).
    assert allocate_banks([0, 0, 0, 0, 0, 1], scores, 4) == [0, 1, 2, 5]
    # Three banks, beam 4: 1, 1, 2 slots (the remainder to the banks that met most).
    assert allocate_banks([0, 0, 1, 1, 2, 2], scores, 4) == [0, 2, 4, 5]
    # Only occupied banks count: a long term's bank 1 keeps its share though banks 2-10 are empty.
    assert allocate_banks([0, 0, 0, 0, 1, 1], scores, 2) == [0, 4]
    # One bank is plain top-k; impossible candidates are never chosen.
    assert allocate_banks([0, 0, 0], [-1.0, float("-inf"), -2.0], 4) == [0, 2]
    assert allocate_banks([0, 1], [float("-inf"), float("-inf")], 4) == []


def test_a_term_the_model_finds_unlikely_appears_and_its_probability_is_the_models() -> None:
    config = DecodeConfig(beam_size=2, length_penalty=0.0, max_length=4)
    plain = beam_search(TableStepModel(PREFERS_A), oracle_sources(0), config)[0][0]
    assert plain.tokens == [A]
    found = constrained_beam_search(TableStepModel(PREFERS_A), oracle_sources(0), [[[C]]], config)[0][0]
    # Candidates with C: [A, C] (0.9 * 0.05 * 0.9) beats [C, A] (0.01 * 0.4) and [B, C] (0.09 * 0.5 * 0).
    assert found.tokens == [A, C]
    assert found.log_prob == pytest.approx(torch.tensor([0.9, 0.05, 0.9]).log().sum().item(), abs=1e-5)


def test_every_output_holds_its_terms_when_the_limit_allows() -> None:
    tables = random_tables(seed=3, num_tables=3, max_prefix_len=5)
    terms = [[[C, C]], [[B], [A]], [[A, B, C]]]
    config = DecodeConfig(beam_size=4, nbest=2, max_length=6)
    found = constrained_beam_search(TableStepModel(*tables), oracle_sources(0, 1, 2), terms, config)
    for sentence_terms, hypotheses in zip(terms, found, strict=True):
        assert len(hypotheses) == 2
        for hypothesis in hypotheses:
            progress = TermProgress.start(sentence_terms)
            for token in hypothesis.tokens:
                progress = progress.advance(token)
            assert progress.complete, (sentence_terms, hypothesis.tokens)
        assert hypotheses[0].score >= hypotheses[1].score


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_terms_gives_the_plain_beam_search(seed: int) -> None:
    tables = random_tables(seed=seed, num_tables=4, max_prefix_len=4)
    src_tokens = oracle_sources(0, 1, 2, 3, lengths=(2, 3, 4, 2))
    config = DecodeConfig(beam_size=3, nbest=3, max_length_offset=2)
    plain = beam_search(TableStepModel(*tables), src_tokens, config)
    constrained = constrained_beam_search(TableStepModel(*tables), src_tokens, [[], [], [], []], config)
    assert constrained == plain


def test_a_real_model_with_no_terms_matches_the_plain_search_and_with_terms_contains_them(
    tiny_config,
) -> None:
    model = Transformer(tiny_config).eval()
    src_tokens = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0], [10, 11, 12, 2]])
    config = DecodeConfig(beam_size=4, nbest=2, max_length_offset=6, no_repeat_ngram=3)
    plain = beam_search(model, src_tokens, config)
    unconstrained = constrained_beam_search(model, src_tokens, [[], [], []], config)
    assert [[h.tokens for h in s] for s in unconstrained] == [[h.tokens for h in s] for s in plain]
    assert [h.log_prob for s in unconstrained for h in s] == pytest.approx(
        [h.log_prob for s in plain for h in s], abs=1e-6
    )
    terms = [[[13, 14]], [], [[15], [16]]]
    found = constrained_beam_search(model, src_tokens, terms, config)
    assert [h.tokens for h in found[1]] == [
        h.tokens for h in plain[1]
    ]  # a sentence without terms is unchanged
    for sentence_terms, hypotheses in zip(terms, found, strict=True):
        for hypothesis in hypotheses:
            progress = TermProgress.start(sentence_terms)
            for token in hypothesis.tokens:
                progress = progress.advance(token)
            assert progress.complete


def test_the_length_limit_ends_a_hypothesis_that_could_not_meet_its_terms() -> None:
    config = DecodeConfig(beam_size=2, nbest=2, max_length=1)
    found = constrained_beam_search(TableStepModel(PREFERS_A), oracle_sources(0), [[[A, C]]], config)[0]
    assert [h.tokens for h in found] == [[A], [B]]  # the bank that began the term comes first
    assert all(h.num_steps == 1 for h in found)


def test_bad_term_lists_are_refused() -> None:
    with pytest.raises(ValueError, match="2 term lists for 1 sentences"):
        constrained_beam_search(TableStepModel(PREFERS_A), oracle_sources(0), [[], []])
    with pytest.raises(ValueError, match="no tokens"):
        constrained_beam_search(TableStepModel(PREFERS_A), oracle_sources(0), [[[]]])
