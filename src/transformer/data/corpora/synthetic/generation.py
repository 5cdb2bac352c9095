"""Draw random sentences from the grammar and turn them into distinct, reproducible corpus splits and files."""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from transformer.atomic_files import atomic_write
from transformer.data.corpora.synthetic.lexicon import COPULA, load_lexicon
from transformer.data.corpora.synthetic.phrases import (
    Adjunct,
    Clause,
    NounPhrase,
    PrepositionalPhrase,
    Sentence,
)
from transformer.data.corpora.synthetic.realisation import english_sentence, german_sentence
from transformer.data.corpora.synthetic.words import (
    ANIMATE,
    SUBJECT_CATEGORIES,
    Adjective,
    Determiner,
    Fronted,
    Noun,
    PrepositionRole,
    ProperName,
    Verb,
    VerbKind,
)

if TYPE_CHECKING:
    pass

MAX_PAIRS = 2_000_000
"""The largest number of distinct pairs :func:`generate_pairs` agrees to produce."""

_ChoiceT = TypeVar("_ChoiceT")


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
        adjective = rng.choice(_adjectives_for(noun.category in ANIMATE))
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
        recipient = _random_noun_phrase(rng, ANIMATE)
        return (recipient, _random_noun_phrase(rng, verb.object_categories))
    return ()


def _random_predicate(rng: random.Random, verb: Verb, subject: NounPhrase) -> Adjective | None:
    """Draw the predicative adjective of a copula clause."""
    if verb.kind != "copula":
        return None
    animate = subject.proper is not None or (subject.noun is not None and subject.noun.category in ANIMATE)
    return rng.choice(_adjectives_for(animate, predicative=True))


def _random_clause(rng: random.Random, allow_clausal: bool) -> Clause:
    """Draw a clause; only main clauses may take a ``that`` complement."""
    verb = _random_verb(rng, allow_clausal)
    subject = _random_noun_phrase(rng, SUBJECT_CATEGORIES[verb.kind])
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

    Raises
    ------
    ValueError
        If ``num_pairs`` is not a positive integer, exceeds :data:`MAX_PAIRS`, or cannot be reached in
        ``10 * num_pairs + 1000`` draws.

    Notes
    -----
    The result depends only on ``num_pairs`` and ``seed`` (and the Python version's ``random`` algorithm),
    never on global random state or hash randomisation, and a shorter list is a prefix of a longer one with
    the same seed. Each English sentence has exactly one German translation.
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

    Raises
    ------
    ValueError
        Naming the offending count if one is not positive.

    Notes
    -----
    All pairs come from one call to :func:`generate_pairs`: the first ``num_test`` pairs form the test split,
    the next ``num_valid`` the validation split and the rest the training split, so the test and validation
    sets stay the same when only ``num_train`` changes.
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

    Raises
    ------
    ValueError
        If a language suffix is empty, contains a path separator, or both suffixes are equal.

    Notes
    -----
    Files are UTF-8 with one sentence per line and ``\n`` line endings on every platform; line ``i`` of the
    source file translates to line ``i`` of the target file. Each file is streamed through
    :func:`transformer.atomic_files.atomic_write` (a hidden sibling, fsynced, then renamed), so a reader such
    as a resumed run never sees a half-written split, and it gets the mode a plain ``open`` would (0644 under
    umask 022), not ``mkstemp``'s 0600.
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
