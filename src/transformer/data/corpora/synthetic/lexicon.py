"""The grammar's lexicon: read from the package's JSON file, checked entry by entry, cached once per process."""

from __future__ import annotations

import functools
import importlib.resources
import json
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, fields
from typing import TYPE_CHECKING, Any, get_args

from transformer.data.corpora.synthetic.words import (
    SUBJECT_CATEGORIES,
    Adjective,
    Adverb,
    Case,
    Conjunction,
    Gender,
    Modal,
    Noun,
    Preposition,
    PrepositionRole,
    ProperName,
    Verb,
    VerbKind,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# --------------------------------------------------------------------------- lexicon

LEXICON_FILE = "synthetic_lexicon.json"
"""File name of the lexicon inside the ``transformer.data.corpora.synthetic`` package (shipped as package data)."""

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
    subject_categories = {category for categories in SUBJECT_CATEGORIES.values() for category in categories}
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

    Raises
    ------
    LexiconError
        Naming the file, the section, the entry's index and the key for a missing or unknown section or key, a
        value of the wrong type, an empty word or one outside its closed set (gender, case, verb kind,
        preposition role); naming the file when the grammar would draw from an empty set.

    Notes
    -----
    Each entry is an object whose keys are the fields of its dataclass (``Noun``, ``Verb``, ...); a field with
    a default may be left out. An empty set the grammar draws from (no dative verb, no city, ...) is refused
    here, since it would otherwise surface as an ``IndexError`` deep inside generation. Unknown keys are
    errors rather than ignored, so that a misspelt optional key (``german_befor_city``) cannot silently fall
    back to its default.
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

    Raises
    ------
    LexiconError
        Naming the file when it is missing (a build that left out the package data), is not UTF-8 JSON, or
        fails :func:`parse_lexicon`.

    Notes
    -----
    Read with ``importlib.resources``, so it is found in a wheel, an editable install or a zip import alike.
    Cached instead of loaded at import time: importing the module does no I/O, and the cache is the only
    module state (immutable data).
    """
    resource = importlib.resources.files("transformer.data.corpora.synthetic").joinpath(LEXICON_FILE)
    try:
        document = json.loads(resource.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LexiconError(
            f"{resource}: lexicon file missing; was the package built without its data?"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LexiconError(f"{resource}: not UTF-8 JSON ({error})") from None
    return parse_lexicon(document, str(resource))
