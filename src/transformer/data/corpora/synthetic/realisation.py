"""Realise a syntax tree as an English and a German sentence: agreement, word order, negation, punctuation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from transformer.data.corpora.synthetic.lexicon import THAT
from transformer.data.corpora.synthetic.phrases import (
    DEFINITE_ARTICLES,
    EIN_ENDINGS,
    MIXED_ADJECTIVE_ENDINGS,
    STRONG_ADJECTIVE_ENDINGS,
    WEAK_ADJECTIVE_ENDINGS,
    Adjunct,
    Clause,
    NounPhrase,
    Sentence,
    inflect_adjective,
)
from transformer.data.corpora.synthetic.words import OBJECT_CASES, Adverb, AgreementKey, Case, Conjunction

if TYPE_CHECKING:
    pass

# --------------------------------------------------------------------------- English realisation


def _english_article(next_word: str) -> str:
    """Return ``a`` or ``an`` for the word that follows."""
    return "an" if next_word[0] in "aeiou" else "a"


def english_noun_phrase(phrase: NounPhrase) -> list[str]:
    """Realise a noun phrase in English.

    Parameters
    ----------
    phrase : NounPhrase
        The phrase, with its modifier if any.

    Returns
    -------
    list[str]
        Its words (``["an", "old", "dog", "with", "the", "hat"]``).

    Notes
    -----
    ``a``/``an`` follows the first letter of the next word, spelling rather than sound; that is right for
    every word of the lexicon (``an uncle``, ``an ugly cat``, ``a yellow ball``).
    """
    if phrase.proper is not None:
        return [phrase.proper.english]
    assert phrase.noun is not None
    words = [phrase.noun.english_plural if phrase.plural else phrase.noun.english_singular]
    if phrase.adjective is not None:
        words.insert(0, phrase.adjective.english)
    if phrase.determiner == "definite":
        words.insert(0, "the")
    elif phrase.determiner == "indefinite":
        words.insert(0, _english_article(words[0]))
    if phrase.modifier is not None:
        words.extend(_english_adjunct(phrase.modifier))
    return words


def _english_adjunct(adjunct: Adjunct) -> list[str]:
    """Realise an adverb or prepositional phrase in English."""
    if isinstance(adjunct, Adverb):
        return adjunct.english.split()
    return adjunct.preposition.english.split() + english_noun_phrase(adjunct.complement)


def _english_verb_group(clause: Clause) -> list[str]:
    """Realise the finite verb with its modal, ``do``-support and ``not`` in English."""
    plural = clause.subject.plural
    verb = clause.verb
    if clause.modal is not None:
        modal = clause.modal
        if clause.negated:
            modal_words = modal.english_negated_plural if plural else modal.english_negated_third
        else:
            modal_words = modal.english_plural if plural else modal.english_third
        return modal_words.split() + verb.english_base.split()
    if not clause.negated:
        return verb.english_finite(plural).split()
    if verb.kind == "copula":
        return [verb.english_finite(plural), "not"]
    return ["do" if plural else "does", "not", *verb.english_base.split()]


def english_clause(clause: Clause) -> list[str]:
    """Realise a clause in English word order (subject, verb, objects, adjuncts).

    Parameters
    ----------
    clause : Clause
        The clause; a ``that`` complement is realised after it.

    Returns
    -------
    list[str]
        Its words, without punctuation.

    Notes
    -----
    A fronted time adverb or place phrase just moves to the front; the subject still precedes the verb
    (``Today the man sees the dog``), where German inverts them. That contrast is what the corpus tests.
    """
    words: list[str] = []
    if clause.fronted == "time" and clause.time_adverb is not None:
        words += _english_adjunct(clause.time_adverb)
    elif clause.fronted == "adjunct" and clause.adjunct is not None:
        words += _english_adjunct(clause.adjunct)
    words += english_noun_phrase(clause.subject) + _english_verb_group(clause)
    for phrase in clause.objects:
        words += english_noun_phrase(phrase)
    if clause.predicate is not None:
        words.append(clause.predicate.english)
    if clause.adjunct is not None and clause.fronted != "adjunct":
        words += _english_adjunct(clause.adjunct)
    if clause.time_adverb is not None and clause.fronted != "time":
        words += _english_adjunct(clause.time_adverb)
    if clause.complement is not None:
        words += [THAT.english, *english_clause(clause.complement)]
    return words


def english_sentence(sentence: Sentence) -> str:
    """Realise a whole sentence in English, capitalised and with a full stop.

    Parameters
    ----------
    sentence : Sentence
        The sentence tree.

    Returns
    -------
    str
        The English sentence.

    Notes
    -----
    English puts a comma only after a fronted subordinate clause, German before every subordinate clause
    and after a fronted one, so the commas do not align one to one.
    """
    words = english_clause(sentence.main)
    if sentence.subordinate is not None and sentence.conjunction is not None:
        subordinate = [sentence.conjunction.english, *english_clause(sentence.subordinate)]
        words = [*subordinate, ",", *words] if sentence.subordinate_first else words + subordinate
    return _finish(words)


# --------------------------------------------------------------------------- German realisation


def german_noun_phrase(phrase: NounPhrase, case: Case, negative: bool = False) -> list[str]:
    """Realise a noun phrase in German in ``case``; ``negative`` turns ``ein`` into ``kein``.

    Parameters
    ----------
    phrase : NounPhrase
        The phrase, with its modifier if any.
    case : {"nominative", "accusative", "dative"}
        The case its role assigns.
    negative : bool
        Whether the phrase carries the clause's negation (``keinen Hund``, ``keine Hunde``).

    Returns
    -------
    list[str]
        Its words (``["dem", "alten", "Mann"]``).

    Notes
    -----
    The adjective ending follows the determiner: weak after ``der``, mixed after ``ein``/``kein``, strong
    with none (``alte Männer``). It depends on the noun's gender and on a case set by the phrase's role,
    neither of which the English words show.
    """
    if phrase.proper is not None:
        return [phrase.proper.german]
    assert phrase.noun is not None
    key: AgreementKey = "pl" if phrase.plural else phrase.noun.gender
    words: list[str] = []
    endings = STRONG_ADJECTIVE_ENDINGS
    if phrase.determiner == "definite":
        words.append(DEFINITE_ARTICLES[case][key])
        endings = WEAK_ADJECTIVE_ENDINGS
    elif negative or phrase.determiner == "indefinite":
        words.append(("kein" if negative else "ein") + EIN_ENDINGS[case][key])
        endings = MIXED_ADJECTIVE_ENDINGS
    if phrase.adjective is not None:
        words.append(inflect_adjective(phrase.adjective.german_stem, endings[case][key]))
    words.append(phrase.noun.german_form(phrase.plural, case))
    if phrase.modifier is not None:
        words.extend(_german_adjunct(phrase.modifier))
    return words


def _german_adjunct(adjunct: Adjunct) -> list[str]:
    """Realise an adverb or prepositional phrase in German."""
    if isinstance(adjunct, Adverb):
        return adjunct.german.split()
    preposition = adjunct.preposition
    complement = adjunct.complement
    word = preposition.german
    if complement.proper is not None and complement.proper.category == "city":
        word = preposition.german_before_city or preposition.german
    return [word, *german_noun_phrase(complement, preposition.case)]


def _takes_kein(clause: Clause) -> bool:
    """Whether negation is expressed by ``kein`` on the clause's last, indefinite object."""
    return clause.negated and bool(clause.objects) and clause.objects[-1].determiner in ("indefinite", "bare")


def _german_verbs(clause: Clause) -> tuple[str, list[str]]:
    """Return the finite verb and the words of the right bracket (the infinitive, if any)."""
    plural = clause.subject.plural
    if clause.modal is None:
        return clause.verb.german_finite(plural), []
    finite = clause.modal.german_plural if plural else clause.modal.german_third
    return finite, [clause.verb.german_infinitive]


def _german_middle_field(clause: Clause, include_subject: bool) -> list[str]:
    """Realise the middle field: subject, time, objects, ``nicht``, adjunct, predicate."""
    words = german_noun_phrase(clause.subject, "nominative") if include_subject else []
    if clause.time_adverb is not None and clause.fronted != "time":
        words += _german_adjunct(clause.time_adverb)
    kein = _takes_kein(clause)
    cases = OBJECT_CASES.get(clause.verb.kind, ())
    for index, (phrase, case) in enumerate(zip(clause.objects, cases, strict=True)):
        words += german_noun_phrase(phrase, case, negative=kein and index == len(clause.objects) - 1)
    if clause.negated and not kein:
        words.append("nicht")
    if clause.adjunct is not None and clause.fronted != "adjunct":
        words += _german_adjunct(clause.adjunct)
    if clause.predicate is not None:
        words.append(clause.predicate.german_stem)
    return words


def german_main_clause(clause: Clause, prefield: list[str] | None = None) -> list[str]:
    """Realise a verb-second main clause; ``prefield`` is a fronted subordinate clause.

    Parameters
    ----------
    clause : Clause
        The main clause.
    prefield : list[str] or None
        The words of a fronted subordinate clause, comma included; None puts the subject, the time adverb
        or the place phrase first, as ``clause.fronted`` says.

    Returns
    -------
    list[str]
        Its words, a ``that`` complement included.

    Notes
    -----
    Exactly one constituent precedes the finite verb; the subject then moves behind it (``Heute sieht der
    Mann den Hund``). Objects, ``nicht`` and adjuncts form the middle field, and the infinitive of a modal
    clause closes the clause.
    """
    finite, right_bracket = _german_verbs(clause)
    subject_first = prefield is None and clause.fronted == "subject"
    if prefield is None:
        if clause.fronted == "time" and clause.time_adverb is not None:
            prefield = _german_adjunct(clause.time_adverb)
        elif clause.fronted == "adjunct" and clause.adjunct is not None:
            prefield = _german_adjunct(clause.adjunct)
        else:
            prefield = german_noun_phrase(clause.subject, "nominative")
    middle = _german_middle_field(clause, include_subject=not subject_first)
    words = [*prefield, finite, *middle, *right_bracket]
    if clause.complement is not None:
        words += [",", *german_subordinate_clause(THAT, clause.complement)]
    return words


def german_subordinate_clause(conjunction: Conjunction, clause: Clause) -> list[str]:
    """Realise a verb-final subordinate clause introduced by ``conjunction``.

    Parameters
    ----------
    conjunction : Conjunction
        The conjunction (or :data:`THAT`).
    clause : Clause
        The subordinate clause.

    Returns
    -------
    list[str]
        Its words, without the comma before it.

    Notes
    -----
    The finite verb comes last, after the infinitive of a modal (``weil der Mann den Hund sehen kann``):
    the farthest a word moves between the two languages.
    """
    finite, right_bracket = _german_verbs(clause)
    return [conjunction.german, *_german_middle_field(clause, include_subject=True), *right_bracket, finite]


def german_sentence(sentence: Sentence) -> str:
    """Realise a whole sentence in German, capitalised and with a full stop.

    Parameters
    ----------
    sentence : Sentence
        The sentence tree.

    Returns
    -------
    str
        The German sentence.

    Notes
    -----
    A subordinate clause placed first fills the prefield, so the main clause goes on with its finite verb
    (``Weil ..., sieht der Mann den Hund.``).
    """
    if sentence.subordinate is None or sentence.conjunction is None:
        return _finish(german_main_clause(sentence.main))
    subordinate = german_subordinate_clause(sentence.conjunction, sentence.subordinate)
    if sentence.subordinate_first:
        return _finish(german_main_clause(sentence.main, prefield=[*subordinate, ","]))
    return _finish([*german_main_clause(sentence.main), ",", *subordinate])


def _finish(words: list[str]) -> str:
    """Join words, attach commas, capitalise the first letter and add a full stop."""
    text = " ".join(words).replace(" ,", ",") + "."
    return text[0].upper() + text[1:]
