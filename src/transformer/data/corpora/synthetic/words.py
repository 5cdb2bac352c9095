"""The synthetic grammar's words: nouns, names, verbs, modals, adjectives, adverbs, prepositions, conjunctions.

Each class holds a word's English and German forms and what the grammar needs to use it (gender and plural,
verb kind and case, ...); the lexicon file lists them (:mod:`transformer.data.corpora.synthetic.lexicon`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    pass

Gender = Literal["m", "f", "n"]
AgreementKey = Literal["m", "f", "n", "pl"]
Case = Literal["nominative", "accusative", "dative"]
Determiner = Literal["definite", "indefinite", "bare", "proper"]
VerbKind = Literal["intransitive", "motion", "accusative", "dative", "ditransitive", "clausal", "copula"]
PrepositionRole = Literal["place", "companion", "direction", "source"]
Fronted = Literal["subject", "time", "adjunct"]


# --------------------------------------------------------------------------- lexicon types


@dataclass(frozen=True)
class Noun:
    """A common noun with its English and German singular and plural forms.

    Parameters
    ----------
    category : str
        Semantic class (``person``, ``animal``, ``thing``, ``text``, ``food``, ``place``) by which verbs and
        prepositions select their nouns, so that "the apple reads the dog" is never drawn.
    gender : {"m", "f", "n"}
        German grammatical gender; it picks the article and the adjective ending.
    english_singular, english_plural : str
        The English forms (``mouse``/``mice``).
    german_singular, german_plural : str
        The German nominative forms, capitalised (``Maus``/``Mäuse``).

    Notes
    -----
    One entry of the lexicon file (:data:`LEXICON_FILE`). The lexicon has no weak masculine nouns
    (``der Junge``, ``den Jungen``) and the grammar no genitive, so a singular never inflects for case.
    """

    category: str
    gender: Gender
    english_singular: str
    english_plural: str
    german_singular: str
    german_plural: str

    def german_form(self, plural: bool, case: Case) -> str:
        """Return the German form; dative plurals gain ``-n`` unless they end in n or s.

        Parameters
        ----------
        plural : bool
            Whether the noun phrase is plural.
        case : {"nominative", "accusative", "dative"}
            The case the phrase's role assigns.

        Returns
        -------
        str
            The singular, the plural, or the dative plural (``den Kindern``; ``den Frauen``, ``den Autos``).

        Notes
        -----
        The regular German dative plural: plurals in ``-n`` already have it, and ``-s`` plurals
        (loanwords such as ``Autos``, ``Hotels``) never take it.
        """
        if not plural:
            return self.german_singular
        if case == "dative" and not self.german_plural.endswith(("n", "s")):
            return self.german_plural + "n"
        return self.german_plural


@dataclass(frozen=True)
class ProperName:
    """A first name or a city: no article, singular, spelt alike or translated.

    Parameters
    ----------
    category : {"name", "city"}
        First names fill person slots; cities fill only slots whose categories list ``city``.
    english, german : str
        The name in each language (``Munich``/``München``).

    Notes
    -----
    A proper noun phrase takes no article and no adjective and is always singular. Cities matter for the
    prepositions whose German form changes before a city name (``nach Berlin``, not ``zu Berlin``).
    """

    category: str
    english: str
    german: str


@dataclass(frozen=True)
class Verb:
    """A verb with the forms needed for 3rd person present tense in both languages.

    Parameters
    ----------
    kind : VerbKind
        Its argument structure: ``intransitive``, ``motion`` (may take a direction), ``accusative``,
        ``dative``, ``ditransitive`` (dative recipient, accusative theme), ``clausal`` (a ``that`` clause)
        or ``copula``.
    english_base, english_third : str
        English infinitive and 3rd person singular (``look for``/``looks for``).
    german_infinitive, german_third : str
        German infinitive and 3rd person singular (``sehen``/``sieht``).
    object_categories : tuple[str, ...]
        Noun categories its objects may come from; empty for verbs without objects.
    english_plural, german_plural : str
        3rd person plural where it differs from the infinitive (only the copula: ``are``/``sind``).

    Notes
    -----
    The German 3rd person plural present equals the infinitive for every verb but ``sein`` (``sie
    sehen``), and so does the English one but for ``be``: the lexicon needs no plural column. The German
    infinitive is also what a modal sends to the end of the clause.
    """

    kind: VerbKind
    english_base: str
    english_third: str
    german_infinitive: str
    german_third: str
    object_categories: tuple[str, ...] = ()
    english_plural: str = ""
    german_plural: str = ""

    def english_finite(self, plural: bool) -> str:
        """Return the English present tense form agreeing with the subject.

        Parameters
        ----------
        plural : bool
            Whether the subject is plural.

        Returns
        -------
        str
            ``sleeps`` for a singular subject, ``sleep`` (or ``english_plural``) for a plural one.

        Notes
        -----
        Only for clauses without a modal and without negation, and for the negated copula (``is not``);
        other negated clauses use *do*-support with the base form (``does not sleep``).
        """
        if not plural:
            return self.english_third
        return self.english_plural or self.english_base

    def german_finite(self, plural: bool) -> str:
        """Return the German present tense form agreeing with the subject.

        Parameters
        ----------
        plural : bool
            Whether the subject is plural.

        Returns
        -------
        str
            ``schläft`` for a singular subject, ``schlafen`` (or ``german_plural``) for a plural one.

        Notes
        -----
        The finite verb, which stands second in a main clause and last in a subordinate one. With a modal the
        modal is finite instead, and the verb's infinitive goes to the end.
        """
        if not plural:
            return self.german_third
        return self.german_plural or self.german_infinitive


@dataclass(frozen=True)
class Modal:
    """A modal verb; the English negated forms are empty when it is never negated.

    Parameters
    ----------
    english_third, english_plural : str
        English forms for a singular and a plural subject (``wants to``/``want to``).
    english_negated_third, english_negated_plural : str
        Their negations (``does not want to``/``do not want to``), or empty.
    german_third, german_plural : str
        German forms (``will``/``wollen``).

    Notes
    -----
    ``must`` has no negated forms: English ``must not`` is a prohibition (German ``darf nicht``), not the
    negation of ``muss`` (``muss nicht``, "need not"), so negating it would break the one-translation rule.
    """

    english_third: str
    english_plural: str
    english_negated_third: str
    english_negated_plural: str
    german_third: str
    german_plural: str

    @property
    def negatable(self) -> bool:
        """Whether the grammar may negate this modal.

        Returns
        -------
        bool
            True when the English negated forms are given.

        Notes
        -----
        Checked before a clause with this modal is negated; see the class notes for why ``must`` is not.
        """
        return bool(self.english_negated_third)


@dataclass(frozen=True)
class Adjective:
    """An adjective; ``animate_only`` ones (happy, tired) only describe people and animals.

    Parameters
    ----------
    english : str
        The English adjective (``tired``).
    german_stem : str
        The uninflected German form (``müde``): used as is after the copula, with an ending before a noun.
    animate_only : bool
        Whether it describes only people and animals.

    Notes
    -----
    Before a noun, people and animals take any adjective (``the red dog``) and things only the others. As a
    predicate the two sets are disjoint: ``the man is tired`` and ``the table is red``, never ``the man is
    red``.
    """

    english: str
    german_stem: str
    animate_only: bool


@dataclass(frozen=True)
class Adverb:
    """A time or manner adverb, possibly several words long in either language.

    Parameters
    ----------
    english, german : str
        The adverb in each language (``every day``/``jeden Tag``).

    Notes
    -----
    A fronted time adverb makes the German main clause put the verb before the subject (``Heute sieht der
    Mann ...``); a clause-final English time adverb moves to just after the German subject.
    """

    english: str
    german: str


@dataclass(frozen=True)
class Preposition:
    """A preposition with the case it governs and the noun categories it takes.

    Parameters
    ----------
    role : {"place", "companion", "direction", "source"}
        Where, with or for whom, where to, where from. Noun modifiers (``the man with the hat``) draw
        companion and source prepositions only.
    english, german : str
        The preposition in each language (``in front of``/``vor``).
    case : {"nominative", "accusative", "dative"}
        The case of its noun phrase.
    object_categories : tuple[str, ...]
        Categories its noun phrase may come from; ``city`` admits city names.
    german_before_city : str
        Replaces ``german`` before a city name (``to`` -> ``nach Berlin``); empty when nothing changes.

    Notes
    -----
    The two-way prepositions (``in``, ``auf``, ``hinter``, ``vor``, ``neben``, ``unter``) always take the
    dative here: the grammar uses them for location only, never for motion into a place, which would need
    the accusative.
    """

    role: PrepositionRole
    english: str
    german: str
    case: Case
    object_categories: tuple[str, ...]
    german_before_city: str = ""


@dataclass(frozen=True)
class Conjunction:
    """A subordinating conjunction; German clauses it introduces are verb-final.

    Parameters
    ----------
    english, german : str
        The conjunction in each language (``because``/``weil``).

    Notes
    -----
    The verb-final order (``weil der Mann den Hund sehen kann``) is a long-range reordering that a
    word-by-word model cannot produce. Adverbial clauses draw from the lexicon; complements use :data:`THAT`.
    """

    english: str
    german: str


#: What may be the subject of each kind of verb, and the cases of its objects (German government).
ANIMATE = ("person", "animal")
SUBJECT_CATEGORIES: dict[VerbKind, tuple[str, ...]] = {
    "intransitive": ANIMATE,
    "motion": ANIMATE,
    "accusative": ANIMATE,
    "dative": ANIMATE,
    "ditransitive": ("person",),
    "clausal": ("person",),
    "copula": ("person", "animal", "thing"),
}
OBJECT_CASES: dict[VerbKind, tuple[Case, ...]] = {
    "accusative": ("accusative",),
    "dative": ("dative",),
    "ditransitive": ("dative", "accusative"),
}
