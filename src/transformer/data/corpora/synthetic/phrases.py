"""German morphology (articles and adjective endings by gender, number and case) and the syntax trees.

A :class:`Sentence` is drawn once (:mod:`transformer.data.corpora.synthetic.generation`) and realised in both
languages (:mod:`transformer.data.corpora.synthetic.realisation`), so its German is the translation of its English.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from transformer.data.corpora.synthetic.words import (
    Adjective,
    Adverb,
    AgreementKey,
    Case,
    Conjunction,
    Determiner,
    Fronted,
    Modal,
    Noun,
    Preposition,
    ProperName,
    Verb,
)

if TYPE_CHECKING:
    pass

# --------------------------------------------------------------------------- German morphology

DEFINITE_ARTICLES: dict[Case, dict[AgreementKey, str]] = {
    "nominative": {"m": "der", "f": "die", "n": "das", "pl": "die"},
    "accusative": {"m": "den", "f": "die", "n": "das", "pl": "die"},
    "dative": {"m": "dem", "f": "der", "n": "dem", "pl": "den"},
}
# Endings of "ein"/"kein"; the plural only occurs with "kein".
EIN_ENDINGS: dict[Case, dict[AgreementKey, str]] = {
    "nominative": {"m": "", "f": "e", "n": "", "pl": "e"},
    "accusative": {"m": "en", "f": "e", "n": "", "pl": "e"},
    "dative": {"m": "em", "f": "er", "n": "em", "pl": "en"},
}
WEAK_ADJECTIVE_ENDINGS: dict[Case, dict[AgreementKey, str]] = {
    "nominative": {"m": "e", "f": "e", "n": "e", "pl": "en"},
    "accusative": {"m": "en", "f": "e", "n": "e", "pl": "en"},
    "dative": {"m": "en", "f": "en", "n": "en", "pl": "en"},
}
MIXED_ADJECTIVE_ENDINGS: dict[Case, dict[AgreementKey, str]] = {
    "nominative": {"m": "er", "f": "e", "n": "es", "pl": "en"},
    "accusative": {"m": "en", "f": "e", "n": "es", "pl": "en"},
    "dative": {"m": "en", "f": "en", "n": "en", "pl": "en"},
}
STRONG_ADJECTIVE_ENDINGS: dict[Case, dict[AgreementKey, str]] = {
    "nominative": {"m": "er", "f": "e", "n": "es", "pl": "e"},
    "accusative": {"m": "en", "f": "e", "n": "es", "pl": "e"},
    "dative": {"m": "em", "f": "er", "n": "em", "pl": "en"},
}


def inflect_adjective(stem: str, ending: str) -> str:
    """Attach an ending to an adjective stem, merging a doubled ``e`` (``müde`` + ``e``).

    Parameters
    ----------
    stem : str
        The uninflected adjective (``müde``, ``groß``).
    ending : str
        ``""``, ``e``, ``en``, ``er``, ``es`` or ``em``, from the weak, mixed or strong table.

    Returns
    -------
    str
        The inflected form (``müde`` + ``en`` -> ``müden``, ``groß`` + ``e`` -> ``große``).

    Notes
    -----
    Stems that drop an ``e`` before the ending (``dunkel`` -> ``dunkle``, ``teuer`` -> ``teure``) are not
    handled; the lexicon has none (``sauber`` keeps it: ``saubere``).
    """
    if stem.endswith("e") and ending.startswith("e"):
        return stem + ending[1:]
    return stem + ending


# --------------------------------------------------------------------------- syntax trees


@dataclass(frozen=True)
class NounPhrase:
    """A noun phrase: either ``noun`` with a determiner, or a ``proper`` name or city.

    Parameters
    ----------
    determiner : {"definite", "indefinite", "bare", "proper"}
        ``the``, ``a``, none (plural indefinites: ``dogs``) or a proper name.
    noun : Noun or None
        The head noun; None for a proper name.
    proper : ProperName or None
        The name; None for a common noun.
    plural : bool
        Whether the noun is plural.
    adjective : Adjective or None
        An attributive adjective.
    modifier : PrepositionalPhrase or None
        A following prepositional phrase (``the man with the hat``).

    Notes
    -----
    Language-neutral: case is not stored, because it depends on the phrase's role in the clause and is
    applied only when the German is realised.
    """

    determiner: Determiner
    noun: Noun | None = None
    proper: ProperName | None = None
    plural: bool = False
    adjective: Adjective | None = None
    modifier: PrepositionalPhrase | None = None


@dataclass(frozen=True)
class PrepositionalPhrase:
    """A preposition and its noun phrase complement.

    Parameters
    ----------
    preposition : Preposition
        It fixes the complement's German case.
    complement : NounPhrase
        Its noun phrase; the grammar draws it without a modifier, so phrases do not nest.

    Notes
    -----
    Used as a verb adjunct (``in the park``) and as a noun modifier (``the man with the hat``).
    """

    preposition: Preposition
    complement: NounPhrase


Adjunct = Adverb | PrepositionalPhrase


@dataclass(frozen=True)
class Clause:
    """One clause; ``objects`` lists a ditransitive verb's recipient before its theme.

    Parameters
    ----------
    subject : NounPhrase
        The subject; its number decides the verb's.
    verb : Verb
        The main verb.
    objects : tuple[NounPhrase, ...]
        None, one, or recipient and theme.
    predicate : Adjective or None
        The adjective of a copula clause.
    modal : Modal or None
        An optional modal verb.
    negated : bool
        Whether the clause is negated.
    time_adverb : Adverb or None
        An optional time adverb.
    adjunct : Adverb, PrepositionalPhrase or None
        An optional manner adverb or prepositional phrase.
    complement : Clause or None
        The ``that`` clause of a clausal verb.
    fronted : {"subject", "time", "adjunct"}
        What a main clause puts before its finite verb.

    Notes
    -----
    The recipient-before-theme order holds in both languages (``gives the man the book``, ``gibt dem
    Mann das Buch``), so only the case differs.
    """

    subject: NounPhrase
    verb: Verb
    objects: tuple[NounPhrase, ...] = ()
    predicate: Adjective | None = None
    modal: Modal | None = None
    negated: bool = False
    time_adverb: Adverb | None = None
    adjunct: Adjunct | None = None
    complement: Clause | None = None
    fronted: Fronted = "subject"


@dataclass(frozen=True)
class Sentence:
    """A main clause with an optional adverbial subordinate clause before or after it.

    Parameters
    ----------
    main : Clause
        The main clause.
    conjunction : Conjunction or None
        The subordinate clause's conjunction.
    subordinate : Clause or None
        The adverbial clause.
    subordinate_first : bool
        Whether the subordinate clause comes first.

    Notes
    -----
    A fronted subordinate clause fills the German prefield, so the main clause continues with its verb
    (``Weil ..., sieht der Mann den Hund.``).
    """

    main: Clause
    conjunction: Conjunction | None = None
    subordinate: Clause | None = None
    subordinate_first: bool = False
