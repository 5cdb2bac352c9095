"""A built-in English-to-German parallel corpus generated from a small grammar.

The corpus is the project's default training data: it needs no download, is reproducible
from a seed, is small enough to learn on a laptop CPU and still exercises what makes
translation need attention rather than a word-for-word lookup.

Grammar
-------
Every sentence is drawn from a small phrase-structure grammar and realised twice, once
in English and once in German. The English sentence determines its German translation
uniquely, so a perfect model can reach BLEU 100.

* **Noun phrases**: a definite (``the``), indefinite (``a``/``an``) or bare plural noun
  with an optional adjective and an optional modifier (``with``, ``without``, ``for``,
  ``from`` + noun phrase), or a first name, or a city. 98 nouns in six categories
  (people, animals, things, texts, food, places) carry German gender and plural;
  58 verbs, 35 adjectives, 12 first names and 8 cities complete the lexicon, which lives
  in ``synthetic_lexicon.json`` beside this module (see :func:`load_lexicon`).
* **Agreement**: German articles agree with the noun in gender (masculine, feminine,
  neuter), number and case; adjectives take weak endings after ``der``, mixed endings after
  ``ein``/``kein`` and strong endings with no article; dative plural nouns gain ``-n``.
  Subjects are nominative, direct objects accusative, the objects of ``helfen``,
  ``folgen``, ``danken``, ``antworten`` and the recipient of ``geben``-type verbs dative.
  ``mit``, ``von``, ``aus``, ``bei``, ``zu``, ``nach`` and the place prepositions (``in``,
  ``auf``, ``hinter``, ``vor``, ``neben``, ``unter``) govern the dative; ``für``, ``ohne``,
  ``durch`` the accusative. No contractions (always ``in dem``, never ``im``).
* **Verbs**: present tense, 3rd person singular or plural agreeing with the subject;
  intransitive, accusative, dative, ditransitive, clause-taking (``says that``) verbs and
  the copula with a predicative (uninflected) adjective. Optional modals (``can``,
  ``must``, ``should``, ``wants to``) send the German infinitive to the clause end.
* **Negation**: ``does not``/``cannot``/``is not`` become ``nicht`` after the objects, or
  ``kein`` in place of an indefinite last object (``sieht keinen Hund``).
* **Word order**: German main clauses are verb-second. A fronted time adverb or place
  phrase ("Today the man sees the dog.") or a fronted subordinate clause inverts subject
  and verb ("Heute sieht der Mann den Hund."). Subordinate clauses introduced by
  ``weil``, ``dass``, ``wenn``, ``obwohl``, ``während``, ``bevor`` are verb-final
  ("..., weil der Mann den Hund sehen kann."). Time adverbs that end an English clause
  move to just after the German subject.

Why it is hard for simple models
--------------------------------
A monotone word-by-word model cannot move the verb to the end of a subordinate clause,
the infinitive to the end of a modal clause, or the time adverb forward, and it cannot
choose among ``der/die/das/den/dem`` or among the adjective endings, which depend on a noun
that may come later and on the role the phrase plays. A bag-of-words model loses the
order altogether. Both score far below a model that attends over the whole source.

Conventions
-----------
German nouns are capitalised, both languages start with a capital and end with a full
stop. German puts a comma before every subordinate clause and after a fronted one;
English puts a comma only after a fronted subordinate clause.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import MISSING, Field, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from transformer.atomic_files import atomic_write

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Gender = Literal["m", "f", "n"]
AgreementKey = Literal["m", "f", "n", "pl"]
Case = Literal["nominative", "accusative", "dative"]
Determiner = Literal["definite", "indefinite", "bare", "proper"]
VerbKind = Literal["intransitive", "motion", "accusative", "dative", "ditransitive", "clausal", "copula"]
PrepositionRole = Literal["place", "companion", "direction", "source"]
Fronted = Literal["subject", "time", "adjunct"]

MAX_PAIRS = 2_000_000
"""The largest number of distinct pairs :func:`generate_pairs` agrees to produce."""

_ChoiceT = TypeVar("_ChoiceT")


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


# --------------------------------------------------------------------------- lexicon

LEXICON_FILE = "synthetic_lexicon.json"
"""File name of the lexicon inside the ``transformer.data`` package (shipped as package data)."""

COPULA = Verb("copula", "be", "is", "sein", "ist", english_plural="are", german_plural="sind")
"""``be``/``sein``: in code, not in the lexicon: it takes a predicative adjective and negates without *do*."""

THAT = Conjunction("that", "dass")
"""The complementiser of clause-taking verbs; never drawn as an adverbial conjunction."""


class LexiconError(ValueError):
    """The lexicon file is missing, not JSON, or lacks a section or key; the message names the file.

    Notes
    -----
    Raised by :func:`load_lexicon` and :func:`parse_lexicon` before any sentence is drawn, in place of the
    ``KeyError`` or ``IndexError`` a bad entry would otherwise cause deep inside generation. A ``ValueError``
    subclass, so callers that catch bad arguments catch it too.
    """


@dataclass(frozen=True)
class Lexicon:
    """The open-class words of the grammar, in the order the generator draws them.

    Parameters
    ----------
    nouns : tuple[Noun, ...]
        Common nouns with German gender and plural.
    proper_names : tuple[ProperName, ...]
        First names (category ``"name"``) and cities (``"city"``).
    verbs : tuple[Verb, ...]
        Every verb but the copula (:data:`COPULA`).
    modals : tuple[Modal, ...]
        Modal verbs.
    adjectives : tuple[Adjective, ...]
        Adjectives with their German stems.
    time_adverbs, manner_adverbs : tuple[Adverb, ...]
        Time adverbs (which German may front) and manner adverbs.
    prepositions : tuple[Preposition, ...]
        Prepositions with the case they govern.
    conjunctions : tuple[Conjunction, ...]
        Adverbial subordinating conjunctions (not :data:`THAT`).

    Returns
    -------
    Lexicon
        An immutable record of the nine tuples.

    Notes
    -----
    Made by :func:`load_lexicon` from :data:`LEXICON_FILE`. The order of every tuple is part of the corpus:
    the generator draws with ``rng.choice`` over these tuples (or filtered copies), so reordering, adding or
    removing one entry changes the corpus of every seed. Tuples of frozen dataclasses keep the cached
    instance from being changed by a caller.
    """

    nouns: tuple[Noun, ...]
    proper_names: tuple[ProperName, ...]
    verbs: tuple[Verb, ...]
    modals: tuple[Modal, ...]
    adjectives: tuple[Adjective, ...]
    time_adverbs: tuple[Adverb, ...]
    manner_adverbs: tuple[Adverb, ...]
    prepositions: tuple[Preposition, ...]
    conjunctions: tuple[Conjunction, ...]


# Each section of the lexicon file and the dataclass its entries become; keys are the dataclass's fields.
_LEXICON_SECTIONS: tuple[tuple[str, type[DataclassInstance]], ...] = (
    ("nouns", Noun),
    ("proper_names", ProperName),
    ("verbs", Verb),
    ("modals", Modal),
    ("adjectives", Adjective),
    ("time_adverbs", Adverb),
    ("manner_adverbs", Adverb),
    ("prepositions", Preposition),
    ("conjunctions", Conjunction),
)
# The values a field may take, by its annotation (a string, under ``from __future__ import annotations``).
_FIELD_CHOICES: dict[str, tuple[str, ...]] = {
    "Gender": get_args(Gender),
    "Case": get_args(Case),
    "VerbKind": tuple(kind for kind in get_args(VerbKind) if kind != "copula"),  # the copula is COPULA
    "PrepositionRole": get_args(PrepositionRole),
}
# Required fields that may be empty: the English negations of a modal that is never negated ("must").
_MAY_BE_EMPTY = frozenset({("Modal", "english_negated_third"), ("Modal", "english_negated_plural")})
_OBJECT_VERB_KINDS = ("accusative", "dative", "ditransitive")


def _parse_value(entry_type: type[DataclassInstance], field: Field[Any], value: object, where: str) -> object:
    """Check one value of a lexicon entry against its dataclass field; a list becomes a tuple."""
    annotation = str(field.type)  # a string: the module has ``from __future__ import annotations``
    key = f"{where}: key {field.name!r}"
    required = field.default is MISSING and (entry_type.__name__, field.name) not in _MAY_BE_EMPTY
    if annotation == "bool":
        if not isinstance(value, bool):
            raise LexiconError(f"{key} must be true or false, got {value!r}")
        return value
    if annotation == "tuple[str, ...]":
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise LexiconError(f"{key} must be a list of non-empty strings, got {value!r}")
        if required and not value:
            raise LexiconError(f"{key} must not be empty")
        return tuple(value)
    if annotation != "str" and annotation not in _FIELD_CHOICES:
        raise TypeError(f"no lexicon parser for {entry_type.__name__}.{field.name}: {annotation}")
    if not isinstance(value, str):
        raise LexiconError(f"{key} must be a string, got {value!r}")
    if value != value.strip() or "  " in value:
        raise LexiconError(f"{key} has stray spaces: {value!r}")
    choices = _FIELD_CHOICES.get(annotation)
    if choices is not None and value not in choices:
        raise LexiconError(f"{key} must be one of {', '.join(choices)}, got {value!r}")
    if required and not value:
        raise LexiconError(f"{key} must not be empty")
    return value


def _parse_entry(entry_type: type[DataclassInstance], entry: object, where: str) -> Any:
    """Build one lexicon entry, naming ``where`` and the key at fault when it does not fit."""
    if not isinstance(entry, dict):
        raise LexiconError(
            f"{where}: expected an object with the keys of {entry_type.__name__}, got {entry!r}"
        )
    field_by_name = {field.name: field for field in fields(entry_type)}
    unknown = [name for name in entry if name not in field_by_name]
    if unknown:
        raise LexiconError(
            f"{where}: unknown key {unknown[0]!r}; {entry_type.__name__} has {', '.join(field_by_name)}"
        )
    values: dict[str, object] = {}
    for name, field in field_by_name.items():
        if name in entry:
            values[name] = _parse_value(entry_type, field, entry[name], where)
        elif field.default is MISSING:
            raise LexiconError(f"{where}: missing key {name!r}")
    build: Callable[..., Any] = entry_type
    return build(**values)


def _coverage_problems(lexicon: Lexicon) -> list[str]:
    """List what the grammar draws from but the lexicon lacks; each gap would crash or skew generation."""
    noun_categories = {noun.category for noun in lexicon.nouns}
    proper_categories = {proper.category for proper in lexicon.proper_names}
    subject_categories = {category for categories in _SUBJECT_CATEGORIES.values() for category in categories}
    verb_kinds = {verb.kind for verb in lexicon.verbs}
    roles = {preposition.role for preposition in lexicon.prepositions}
    unknown_proper = sorted(proper_categories - {"name", "city"})
    problems = [f"proper name category {c!r} is neither 'name' nor 'city'" for c in unknown_proper]
    problems += [f"no proper name of category {c!r}" for c in ("name", "city") if c not in proper_categories]
    problems += [
        f"no noun of category {c!r}, which subjects need"
        for c in sorted(subject_categories - noun_categories)
    ]
    problems += [f"no verb of kind {kind!r}" for kind in _FIELD_CHOICES["VerbKind"] if kind not in verb_kinds]
    problems += [
        f"no preposition of role {role!r}" for role in get_args(PrepositionRole) if role not in roles
    ]
    if {adjective.animate_only for adjective in lexicon.adjectives} != {False, True}:
        problems.append("adjectives need entries with animate_only both true and false")
    for verb in lexicon.verbs:
        if (verb.kind in _OBJECT_VERB_KINDS) != bool(verb.object_categories):
            must = "must" if verb.kind in _OBJECT_VERB_KINDS else "must not"
            problems.append(f"verb {verb.english_base!r} of kind {verb.kind!r} {must} list object_categories")
    takers = [(f"verb {verb.english_base!r}", verb.object_categories) for verb in lexicon.verbs]
    takers += [(f"preposition {p.english!r}", p.object_categories) for p in lexicon.prepositions]
    for name, categories in takers:
        unknown = sorted(set(categories) - noun_categories - proper_categories)
        if unknown:
            problems.append(f"{name}: unknown object categories {', '.join(unknown)}")
        elif categories and not set(categories) & noun_categories:
            problems.append(f"{name}: object_categories name no noun category")
    for modal in lexicon.modals:
        if bool(modal.english_negated_third) != bool(modal.english_negated_plural):
            problems.append(f"modal {modal.english_third!r}: give both English negated forms or neither")
    return problems


def parse_lexicon(document: object, source: str) -> Lexicon:
    """Build and check a :class:`Lexicon` from the parsed JSON of a lexicon file.

    Parameters
    ----------
    document : object
        The file's ``json.loads``: an object with one list per section (``nouns``, ``proper_names``,
        ``verbs``, ``modals``, ``adjectives``, ``time_adverbs``, ``manner_adverbs``, ``prepositions``,
        ``conjunctions``) and an optional ``about`` string.
    source : str
        The file's name, put at the front of every error message.

    Returns
    -------
    Lexicon
        The entries, in file order.

    Notes
    -----
    Each entry is an object whose keys are the fields of its dataclass (``Noun``, ``Verb``, ...); a field
    with a default may be left out. Raises :class:`LexiconError` naming the file, the section, the entry's
    index and the key for a missing or unknown section or key, a value of the wrong type, an empty word or
    one outside its closed set (gender, case, verb kind, preposition role); and naming the file when the
    grammar would draw from an empty set (no dative verb, no city, ...), which would otherwise surface as
    an ``IndexError`` deep inside generation. Unknown keys are errors rather than ignored, so that a
    misspelt optional key (``german_befor_city``) cannot silently fall back to its default.
    """
    section_names = [name for name, _ in _LEXICON_SECTIONS]
    if not isinstance(document, dict):
        raise LexiconError(f"{source}: expected a JSON object with the keys {', '.join(section_names)}")
    unknown = [name for name in document if name not in (*section_names, "about")]
    if unknown:
        raise LexiconError(
            f"{source}: unknown key {unknown[0]!r}; the sections are {', '.join(section_names)}"
        )
    sections: dict[str, tuple[Any, ...]] = {}
    for name, entry_type in _LEXICON_SECTIONS:
        if name not in document:
            raise LexiconError(f"{source}: missing key {name!r} (a list of {entry_type.__name__} entries)")
        entries = document[name]
        if not isinstance(entries, list) or not entries:
            raise LexiconError(f"{source}: key {name!r} must be a non-empty list, got {entries!r}")
        sections[name] = tuple(
            _parse_entry(entry_type, entry, f"{source}: {name}[{index}]")
            for index, entry in enumerate(entries)
        )
    lexicon = Lexicon(**sections)
    problems = _coverage_problems(lexicon)
    if problems:
        raise LexiconError(f"{source}: the grammar cannot use this lexicon: {'; '.join(problems)}")
    return lexicon


@functools.cache
def load_lexicon() -> Lexicon:
    """Read the grammar's lexicon from the package data file :data:`LEXICON_FILE`, once per process.

    Returns
    -------
    Lexicon
        The checked lexicon; the same immutable object on every call.

    Notes
    -----
    Read with ``importlib.resources``, so it is found in a wheel, an editable install or a zip import alike.
    Cached instead of loaded at import time: importing the module does no I/O, and the cache is the only
    module state (immutable data). Raises :class:`LexiconError` naming the file when it is missing (a build
    that left out the package data), is not UTF-8 JSON, or fails :func:`parse_lexicon`.
    """
    resource = importlib.resources.files("transformer.data").joinpath(LEXICON_FILE)
    try:
        document = json.loads(resource.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LexiconError(
            f"{resource}: lexicon file missing; was the package built without its data?"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LexiconError(f"{resource}: not UTF-8 JSON ({error})") from None
    return parse_lexicon(document, str(resource))


_ANIMATE = ("person", "animal")
_SUBJECT_CATEGORIES: dict[VerbKind, tuple[str, ...]] = {
    "intransitive": _ANIMATE,
    "motion": _ANIMATE,
    "accusative": _ANIMATE,
    "dative": _ANIMATE,
    "ditransitive": ("person",),
    "clausal": ("person",),
    "copula": ("person", "animal", "thing"),
}
_OBJECT_CASES: dict[VerbKind, tuple[Case, ...]] = {
    "accusative": ("accusative",),
    "dative": ("dative",),
    "ditransitive": ("dative", "accusative"),
}

# --------------------------------------------------------------------------- German morphology

_DEFINITE_ARTICLES: dict[Case, dict[AgreementKey, str]] = {
    "nominative": {"m": "der", "f": "die", "n": "das", "pl": "die"},
    "accusative": {"m": "den", "f": "die", "n": "das", "pl": "die"},
    "dative": {"m": "dem", "f": "der", "n": "dem", "pl": "den"},
}
# Endings of "ein"/"kein"; the plural only occurs with "kein".
_EIN_ENDINGS: dict[Case, dict[AgreementKey, str]] = {
    "nominative": {"m": "", "f": "e", "n": "", "pl": "e"},
    "accusative": {"m": "en", "f": "e", "n": "", "pl": "e"},
    "dative": {"m": "em", "f": "er", "n": "em", "pl": "en"},
}
_WEAK_ADJECTIVE_ENDINGS: dict[Case, dict[AgreementKey, str]] = {
    "nominative": {"m": "e", "f": "e", "n": "e", "pl": "en"},
    "accusative": {"m": "en", "f": "e", "n": "e", "pl": "en"},
    "dative": {"m": "en", "f": "en", "n": "en", "pl": "en"},
}
_MIXED_ADJECTIVE_ENDINGS: dict[Case, dict[AgreementKey, str]] = {
    "nominative": {"m": "er", "f": "e", "n": "es", "pl": "en"},
    "accusative": {"m": "en", "f": "e", "n": "es", "pl": "en"},
    "dative": {"m": "en", "f": "en", "n": "en", "pl": "en"},
}
_STRONG_ADJECTIVE_ENDINGS: dict[Case, dict[AgreementKey, str]] = {
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
    endings = _STRONG_ADJECTIVE_ENDINGS
    if phrase.determiner == "definite":
        words.append(_DEFINITE_ARTICLES[case][key])
        endings = _WEAK_ADJECTIVE_ENDINGS
    elif negative or phrase.determiner == "indefinite":
        words.append(("kein" if negative else "ein") + _EIN_ENDINGS[case][key])
        endings = _MIXED_ADJECTIVE_ENDINGS
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
    cases = _OBJECT_CASES.get(clause.verb.kind, ())
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


# --------------------------------------------------------------------------- random generation


def _pick(rng: random.Random, weighted: Sequence[tuple[_ChoiceT, float]]) -> _ChoiceT:
    """Draw one option from ``(option, weight)`` pairs."""
    options = [option for option, _ in weighted]
    weights = [weight for _, weight in weighted]
    return rng.choices(options, weights=weights)[0]


@functools.cache
def _nouns_in(categories: tuple[str, ...]) -> tuple[Noun, ...]:
    """Return the nouns of the given categories in lexicon order (never in set order)."""
    return tuple(noun for noun in load_lexicon().nouns if noun.category in categories)


@functools.cache
def _proper_names_in(category: str) -> tuple[ProperName, ...]:
    """Return the first names (``"name"``) or cities (``"city"``) in lexicon order."""
    return tuple(proper for proper in load_lexicon().proper_names if proper.category == category)


@functools.cache
def _adjectives_for(animate: bool, predicative: bool = False) -> tuple[Adjective, ...]:
    """Return the adjectives that may describe an animate or inanimate noun.

    Predicative adjectives of people and animals are restricted to the animate-only ones
    ("the man is tired", not "the man is red").
    """
    adjectives = load_lexicon().adjectives
    if predicative:
        return tuple(adjective for adjective in adjectives if adjective.animate_only == animate)
    return tuple(adjective for adjective in adjectives if animate or not adjective.animate_only)


def _random_noun_phrase(
    rng: random.Random, categories: tuple[str, ...], allow_modifier: bool = True
) -> NounPhrase:
    """Draw a noun phrase whose head belongs to one of ``categories``."""
    proper_categories = [c for c in ("name", "city") if c in categories]
    if "person" in categories:
        proper_categories.insert(0, "name")
    if proper_categories and rng.random() < 0.15:
        return NounPhrase("proper", proper=rng.choice(_proper_names_in(rng.choice(proper_categories))))
    noun = rng.choice(_nouns_in(categories))
    plural = rng.random() < 0.3
    determiners: list[tuple[Determiner, float]] = [("definite", 0.65), ("indefinite", 0.35)]
    determiner = _pick(rng, determiners)
    if plural and determiner == "indefinite":
        determiner = "bare"
    adjective = None
    if rng.random() < 0.3:
        adjective = rng.choice(_adjectives_for(noun.category in _ANIMATE))
    modifier = _random_modifier(rng) if allow_modifier and rng.random() < 0.07 else None
    return NounPhrase(determiner, noun, None, plural, adjective, modifier)


def _random_prepositional_phrase(rng: random.Random, roles: Sequence[PrepositionRole]) -> PrepositionalPhrase:
    """Draw a prepositional phrase whose preposition has one of ``roles``."""
    preposition = rng.choice([p for p in load_lexicon().prepositions if p.role in roles])
    return PrepositionalPhrase(preposition, _random_noun_phrase(rng, preposition.object_categories, False))


def _random_modifier(rng: random.Random) -> PrepositionalPhrase:
    """Draw a prepositional phrase that modifies a noun ("the man with the hat")."""
    return _random_prepositional_phrase(rng, ("companion", "source"))


def _random_adjunct(rng: random.Random, verb: Verb) -> Adjunct | None:
    """Draw an optional manner adverb or prepositional phrase that modifies the verb."""
    if verb.kind in ("clausal", "copula") or rng.random() > 0.35:
        return None
    if rng.random() < 0.3:
        return rng.choice(load_lexicon().manner_adverbs)
    roles: tuple[PrepositionRole, ...] = ("place", "companion")
    if verb.kind == "motion":
        roles = ("place", "companion", "direction", "direction")
    adjunct = _random_prepositional_phrase(rng, roles)
    if verb.kind in ("intransitive", "motion") and adjunct.preposition.english == "for":
        return None  # "waits for" would need "warten auf", not "für".
    return adjunct


_VERB_KIND_WEIGHTS: tuple[tuple[VerbKind, float], ...] = (
    ("intransitive", 0.14),
    ("motion", 0.1),
    ("accusative", 0.38),
    ("dative", 0.1),
    ("ditransitive", 0.1),
    ("copula", 0.08),
    ("clausal", 0.1),
)


def _random_verb(rng: random.Random, allow_clausal: bool) -> Verb:
    """Draw a verb, choosing its kind first so that rare kinds are still frequent enough."""
    weights = [(kind, weight) for kind, weight in _VERB_KIND_WEIGHTS if allow_clausal or kind != "clausal"]
    kind = _pick(rng, weights)
    if kind == "copula":
        return COPULA
    return rng.choice([verb for verb in load_lexicon().verbs if verb.kind == kind])


def _random_objects(rng: random.Random, verb: Verb) -> tuple[NounPhrase, ...]:
    """Draw the objects a verb needs: none, one, or a recipient and a theme."""
    if verb.kind in ("accusative", "dative"):
        return (_random_noun_phrase(rng, verb.object_categories),)
    if verb.kind == "ditransitive":
        recipient = _random_noun_phrase(rng, _ANIMATE)
        return (recipient, _random_noun_phrase(rng, verb.object_categories))
    return ()


def _random_predicate(rng: random.Random, verb: Verb, subject: NounPhrase) -> Adjective | None:
    """Draw the predicative adjective of a copula clause."""
    if verb.kind != "copula":
        return None
    animate = subject.proper is not None or (subject.noun is not None and subject.noun.category in _ANIMATE)
    return rng.choice(_adjectives_for(animate, predicative=True))


def _random_clause(rng: random.Random, allow_clausal: bool) -> Clause:
    """Draw a clause; only main clauses may take a ``that`` complement."""
    verb = _random_verb(rng, allow_clausal)
    subject = _random_noun_phrase(rng, _SUBJECT_CATEGORIES[verb.kind])
    lexicon = load_lexicon()
    modal = rng.choice(lexicon.modals) if verb.kind != "clausal" and rng.random() < 0.2 else None
    negatable = verb.kind != "clausal" and (modal is None or modal.negatable)
    negated = negatable and rng.random() < 0.15
    time_adverb = rng.choice(lexicon.time_adverbs) if rng.random() < 0.25 else None
    return Clause(
        subject=subject,
        verb=verb,
        objects=_random_objects(rng, verb),
        predicate=_random_predicate(rng, verb, subject),
        modal=modal,
        negated=negated,
        time_adverb=time_adverb,
        adjunct=None if negated else _random_adjunct(rng, verb),
        complement=_random_clause(rng, allow_clausal=False) if verb.kind == "clausal" else None,
    )


def _random_fronting(rng: random.Random, clause: Clause) -> Fronted:
    """Choose what a main clause puts before its finite verb."""
    options: list[tuple[Fronted, float]] = [("subject", 1.0)]
    if clause.time_adverb is not None:
        options.append(("time", 0.6))
    if isinstance(clause.adjunct, PrepositionalPhrase) and clause.adjunct.preposition.role == "place":
        options.append(("adjunct", 0.6))
    return _pick(rng, options)


def random_sentence(rng: random.Random) -> Sentence:
    """Draw one sentence tree from the grammar.

    Parameters
    ----------
    rng : random.Random
        The private random source; every choice of the grammar is drawn from it.

    Returns
    -------
    Sentence
        A main clause, possibly with an adverbial subordinate clause before or after it.

    Notes
    -----
    A main clause with a ``that`` complement never also takes an adverbial clause; 45% of the others do,
    and 30% of those put it first, which makes the German main clause invert subject and verb. The sequence
    of ``rng`` calls defines the corpus: reordering them changes the corpus of every seed.
    """
    main = _random_clause(rng, allow_clausal=True)
    if main.complement is not None or rng.random() < 0.55:
        return Sentence(replace(main, fronted=_random_fronting(rng, main)))
    conjunction = rng.choice(load_lexicon().conjunctions)
    subordinate = _random_clause(rng, allow_clausal=False)
    if rng.random() < 0.3:
        return Sentence(main, conjunction, subordinate, subordinate_first=True)
    return Sentence(replace(main, fronted=_random_fronting(rng, main)), conjunction, subordinate)


def random_pair(rng: random.Random) -> tuple[str, str]:
    """Draw one sentence and return its English and German realisations.

    Parameters
    ----------
    rng : random.Random
        The private random source.

    Returns
    -------
    tuple[str, str]
        ``(english, german)``.

    Notes
    -----
    Both strings realise one tree, and the English determines the tree's German realisation, so
    :func:`generate_pairs` can drop repeats by their English side alone.
    """
    sentence = random_sentence(rng)
    return english_sentence(sentence), german_sentence(sentence)


# --------------------------------------------------------------------------- public API


def _check_count(name: str, value: int) -> None:
    """Raise ValueError unless ``value`` is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _distinct_pairs(
    num_pairs: int,
    rng: random.Random,
    draw: Callable[[random.Random], tuple[str, str]],
    max_attempts: int,
) -> list[tuple[str, str]]:
    """Draw pairs until ``num_pairs`` distinct English sentences are found."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for _ in range(max_attempts):
        english, german = draw(rng)
        if english not in seen:
            seen.add(english)
            pairs.append((english, german))
            if len(pairs) == num_pairs:
                return pairs
    raise ValueError(
        f"num_pairs={num_pairs} is more distinct pairs than the grammar produced in "
        f"{max_attempts} attempts ({len(pairs)} found)"
    )


def generate_pairs(num_pairs: int, seed: int) -> list[tuple[str, str]]:
    """Generate distinct English-German sentence pairs from the built-in grammar.

    Parameters
    ----------
    num_pairs : int
        How many pairs to return; between 1 and :data:`MAX_PAIRS`.
    seed : int
        Seed of the private ``random.Random`` that drives the grammar.

    Returns
    -------
    list[tuple[str, str]]
        ``num_pairs`` ``(english, german)`` pairs with pairwise different English sides, in
        the order they were drawn.

    Notes
    -----
    The result depends only on ``num_pairs`` and ``seed`` (and the Python version's
    ``random`` algorithm), never on global random state or hash randomisation, and a
    shorter list is a prefix of a longer one with the same seed. Each English sentence
    has exactly one German translation. Raises ``ValueError`` if ``num_pairs`` is not a
    positive integer, exceeds :data:`MAX_PAIRS`, or cannot be reached in
    ``10 * num_pairs + 1000`` draws.
    """
    _check_count("num_pairs", num_pairs)
    if num_pairs > MAX_PAIRS:
        raise ValueError(f"num_pairs must be at most {MAX_PAIRS}, got {num_pairs}")
    return _distinct_pairs(num_pairs, random.Random(seed), random_pair, 10 * num_pairs + 1000)


@dataclass(frozen=True)
class SyntheticSplits:
    """Train, validation and test pairs of the synthetic corpus.

    Parameters
    ----------
    train, valid, test : list[tuple[str, str]]
        ``(english, german)`` pairs of each split.

    Returns
    -------
    SyntheticSplits
        An immutable record of the three lists.

    Notes
    -----
    Made by :func:`generate_splits`, which guarantees that no English sentence occurs in
    more than one split.
    """

    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]


def generate_splits(
    num_train: int = 20000,
    num_valid: int = 500,
    num_test: int = 500,
    seed: int = 1234,
) -> SyntheticSplits:
    """Generate disjoint train, validation and test splits of the synthetic corpus.

    Parameters
    ----------
    num_train : int
        Number of training pairs (positive).
    num_valid : int
        Number of validation pairs (positive).
    num_test : int
        Number of test pairs (positive).
    seed : int
        Seed of the grammar's random generator.

    Returns
    -------
    SyntheticSplits
        The three splits; no English sentence appears in two of them.

    Notes
    -----
    All pairs come from one call to :func:`generate_pairs`: the first ``num_test`` pairs
    form the test split, the next ``num_valid`` the validation split and the rest the
    training split, so the test and validation sets stay the same when only ``num_train``
    changes. Raises ``ValueError`` naming the offending count if one is not positive.
    """
    _check_count("num_train", num_train)
    _check_count("num_valid", num_valid)
    _check_count("num_test", num_test)
    pairs = generate_pairs(num_test + num_valid + num_train, seed)
    return SyntheticSplits(
        train=pairs[num_test + num_valid :],
        valid=pairs[num_test : num_test + num_valid],
        test=pairs[:num_test],
    )


def write_corpus(
    directory: Path,
    splits: SyntheticSplits,
    source_lang: str = "en",
    target_lang: str = "de",
) -> dict[str, tuple[Path, Path]]:
    r"""Write the splits as line-aligned plain-text files.

    Parameters
    ----------
    directory : Path
        Output directory; created (with parents) if missing.
    splits : SyntheticSplits
        The pairs to write; the English side is the source, the German side the target.
    source_lang : str
        File suffix of the source side, ``"en"`` by default.
    target_lang : str
        File suffix of the target side, ``"de"`` by default.

    Returns
    -------
    dict[str, tuple[Path, Path]]
        ``{"train": (train.en, train.de), "valid": ..., "test": ...}``.

    Notes
    -----
    Files are UTF-8 with one sentence per line and ``\n`` line endings on every platform;
    line ``i`` of the source file translates to line ``i`` of the target file. Each file is
    streamed through :func:`transformer.atomic_files.atomic_write` (a hidden sibling, fsynced,
    then renamed), so a reader such as a resumed run never sees a half-written split, and it
    gets the mode a plain ``open`` would (0644 under umask 022), not ``mkstemp``'s 0600.
    Raises ``ValueError`` if a language suffix is empty, contains a path separator, or both
    suffixes are equal.
    """
    for name, suffix in (("source_lang", source_lang), ("target_lang", target_lang)):
        if not suffix or "/" in suffix or os.sep in suffix:
            raise ValueError(f"{name} must be a non-empty file suffix without separators, got {suffix!r}")
    if source_lang == target_lang:
        raise ValueError(f"source_lang and target_lang must differ, both are {source_lang!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths: dict[str, tuple[Path, Path]] = {}
    for split_name in ("train", "valid", "test"):
        pairs: list[tuple[str, str]] = getattr(splits, split_name)
        source_path = directory / f"{split_name}.{source_lang}"
        target_path = directory / f"{split_name}.{target_lang}"
        for path, side in ((source_path, 0), (target_path, 1)):
            with atomic_write(path, "w") as handle:
                handle.writelines(pair[side] + "\n" for pair in pairs)
        paths[split_name] = (source_path, target_path)
    return paths
