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
  58 verbs, 35 adjectives, 12 first names and 8 cities complete the lexicon.
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
import os
import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TypeVar

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
    """A common noun with its English and German singular and plural forms."""

    category: str
    gender: Gender
    english_singular: str
    english_plural: str
    german_singular: str
    german_plural: str

    def german_form(self, plural: bool, case: Case) -> str:
        """Return the German form; dative plurals gain ``-n`` unless they end in n or s."""
        if not plural:
            return self.german_singular
        if case == "dative" and not self.german_plural.endswith(("n", "s")):
            return self.german_plural + "n"
        return self.german_plural


@dataclass(frozen=True)
class ProperName:
    """A first name or a city: no article, singular, spelt alike or translated."""

    category: str
    english: str
    german: str


@dataclass(frozen=True)
class Verb:
    """A verb with the forms needed for 3rd person present tense in both languages."""

    kind: VerbKind
    english_base: str
    english_third: str
    german_infinitive: str
    german_third: str
    object_categories: tuple[str, ...] = ()
    english_plural: str = ""
    german_plural: str = ""

    def english_finite(self, plural: bool) -> str:
        """Return the English present tense form agreeing with the subject."""
        if not plural:
            return self.english_third
        return self.english_plural or self.english_base

    def german_finite(self, plural: bool) -> str:
        """Return the German present tense form agreeing with the subject."""
        if not plural:
            return self.german_third
        return self.german_plural or self.german_infinitive


@dataclass(frozen=True)
class Modal:
    """A modal verb; the English negated forms are empty when it is never negated."""

    english_third: str
    english_plural: str
    english_negated_third: str
    english_negated_plural: str
    german_third: str
    german_plural: str

    @property
    def negatable(self) -> bool:
        """Whether the grammar may negate this modal."""
        return bool(self.english_negated_third)


@dataclass(frozen=True)
class Adjective:
    """An adjective; ``animate_only`` ones (happy, tired) only describe people and animals."""

    english: str
    german_stem: str
    animate_only: bool


@dataclass(frozen=True)
class Adverb:
    """A time or manner adverb, possibly several words long in either language."""

    english: str
    german: str


@dataclass(frozen=True)
class Preposition:
    """A preposition with the case it governs and the noun categories it takes.

    ``german_before_city`` replaces ``german`` before a city name ("to" -> "nach Berlin").
    """

    role: PrepositionRole
    english: str
    german: str
    case: Case
    object_categories: tuple[str, ...]
    german_before_city: str = ""


@dataclass(frozen=True)
class Conjunction:
    """A subordinating conjunction; German clauses it introduces are verb-final."""

    english: str
    german: str


# --------------------------------------------------------------------------- lexicon tables


def _rows(table: str) -> list[list[str]]:
    """Split a ``|``-separated table into rows of stripped cells, ignoring blank lines."""
    return [[cell.strip() for cell in line.split("|")] for line in table.strip().splitlines()]


_NOUN_TABLE = """
person | m | man | men | Mann | Männer
person | f | woman | women | Frau | Frauen
person | n | child | children | Kind | Kinder
person | m | teacher | teachers | Lehrer | Lehrer
person | m | doctor | doctors | Arzt | Ärzte
person | m | cook | cooks | Koch | Köche
person | m | baker | bakers | Bäcker | Bäcker
person | m | driver | drivers | Fahrer | Fahrer
person | m | father | fathers | Vater | Väter
person | f | mother | mothers | Mutter | Mütter
person | m | brother | brothers | Bruder | Brüder
person | f | sister | sisters | Schwester | Schwestern
person | m | friend | friends | Freund | Freunde
person | m | king | kings | König | Könige
person | f | queen | queens | Königin | Königinnen
person | m | uncle | uncles | Onkel | Onkel
person | f | aunt | aunts | Tante | Tanten
person | m | son | sons | Sohn | Söhne
person | f | daughter | daughters | Tochter | Töchter
person | n | girl | girls | Mädchen | Mädchen
person | m | singer | singers | Sänger | Sänger
person | m | painter | painters | Maler | Maler
person | m | pupil | pupils | Schüler | Schüler
person | m | thief | thieves | Dieb | Diebe
person | m | guest | guests | Gast | Gäste
animal | m | dog | dogs | Hund | Hunde
animal | f | cat | cats | Katze | Katzen
animal | n | horse | horses | Pferd | Pferde
animal | m | bird | birds | Vogel | Vögel
animal | f | mouse | mice | Maus | Mäuse
animal | f | cow | cows | Kuh | Kühe
animal | n | pig | pigs | Schwein | Schweine
animal | m | wolf | wolves | Wolf | Wölfe
animal | m | fox | foxes | Fuchs | Füchse
animal | f | duck | ducks | Ente | Enten
animal | f | goat | goats | Ziege | Ziegen
animal | n | rabbit | rabbits | Kaninchen | Kaninchen
animal | m | frog | frogs | Frosch | Frösche
animal | f | snake | snakes | Schlange | Schlangen
animal | n | chicken | chickens | Huhn | Hühner
animal | m | donkey | donkeys | Esel | Esel
animal | f | owl | owls | Eule | Eulen
thing | m | table | tables | Tisch | Tische
thing | m | chair | chairs | Stuhl | Stühle
thing | m | ball | balls | Ball | Bälle
thing | n | car | cars | Auto | Autos
thing | f | door | doors | Tür | Türen
thing | n | window | windows | Fenster | Fenster
thing | m | key | keys | Schlüssel | Schlüssel
thing | f | cup | cups | Tasse | Tassen
thing | f | bottle | bottles | Flasche | Flaschen
thing | n | glass | glasses | Glas | Gläser
thing | m | hat | hats | Hut | Hüte
thing | m | coat | coats | Mantel | Mäntel
thing | m | shoe | shoes | Schuh | Schuhe
thing | m | plate | plates | Teller | Teller
thing | f | lamp | lamps | Lampe | Lampen
thing | f | bag | bags | Tasche | Taschen
thing | n | picture | pictures | Bild | Bilder
thing | f | flower | flowers | Blume | Blumen
thing | m | stone | stones | Stein | Steine
thing | f | box | boxes | Kiste | Kisten
thing | f | clock | clocks | Uhr | Uhren
thing | n | boat | boats | Boot | Boote
thing | n | bicycle | bicycles | Fahrrad | Fahrräder
thing | m | ring | rings | Ring | Ringe
text | n | book | books | Buch | Bücher
text | m | letter | letters | Brief | Briefe
text | f | newspaper | newspapers | Zeitung | Zeitungen
text | f | map | maps | Karte | Karten
text | f | story | stories | Geschichte | Geschichten
text | n | poem | poems | Gedicht | Gedichte
text | n | song | songs | Lied | Lieder
food | m | apple | apples | Apfel | Äpfel
food | m | cake | cakes | Kuchen | Kuchen
food | n | egg | eggs | Ei | Eier
food | f | banana | bananas | Banane | Bananen
food | f | pear | pears | Birne | Birnen
food | f | sausage | sausages | Wurst | Würste
food | f | tomato | tomatoes | Tomate | Tomaten
food | f | potato | potatoes | Kartoffel | Kartoffeln
food | m | cookie | cookies | Keks | Kekse
place | m | garden | gardens | Garten | Gärten
place | m | park | parks | Park | Parks
place | m | forest | forests | Wald | Wälder
place | f | kitchen | kitchens | Küche | Küchen
place | f | school | schools | Schule | Schulen
place | f | city | cities | Stadt | Städte
place | n | village | villages | Dorf | Dörfer
place | n | room | rooms | Zimmer | Zimmer
place | f | street | streets | Straße | Straßen
place | f | church | churches | Kirche | Kirchen
place | m | station | stations | Bahnhof | Bahnhöfe
place | f | library | libraries | Bibliothek | Bibliotheken
place | n | hotel | hotels | Hotel | Hotels
place | n | house | houses | Haus | Häuser
place | n | field | fields | Feld | Felder
place | m | market | markets | Markt | Märkte
"""

_PROPER_NAME_TABLE = """
name | Anna | Anna
name | Maria | Maria
name | Peter | Peter
name | Thomas | Thomas
name | Paul | Paul
name | Lisa | Lisa
name | Julia | Julia
name | Max | Max
name | Sophie | Sophie
name | Lukas | Lukas
name | Emma | Emma
name | Felix | Felix
city | Berlin | Berlin
city | Paris | Paris
city | London | London
city | Rome | Rom
city | Vienna | Wien
city | Munich | München
city | Cologne | Köln
city | Prague | Prag
"""

# kind | English base | English 3rd singular | German infinitive | German 3rd singular | objects
_VERB_TABLE = """
intransitive | sleep | sleeps | schlafen | schläft |
intransitive | laugh | laughs | lachen | lacht |
intransitive | sing | sings | singen | singt |
intransitive | dance | dances | tanzen | tanzt |
intransitive | wait | waits | warten | wartet |
intransitive | work | works | arbeiten | arbeitet |
intransitive | play | plays | spielen | spielt |
intransitive | cry | cries | weinen | weint |
intransitive | sit | sits | sitzen | sitzt |
intransitive | stand | stands | stehen | steht |
intransitive | smile | smiles | lächeln | lächelt |
intransitive | live | lives | wohnen | wohnt |
intransitive | learn | learns | lernen | lernt |
intransitive | talk | talks | reden | redet |
motion | run | runs | rennen | rennt |
motion | walk | walks | laufen | läuft |
motion | swim | swims | schwimmen | schwimmt |
motion | fly | flies | fliegen | fliegt |
motion | travel | travels | reisen | reist |
motion | jump | jumps | springen | springt |
accusative | see | sees | sehen | sieht | person animal thing text food place
accusative | find | finds | finden | findet | person animal thing text food
accusative | like | likes | mögen | mag | person animal thing text food place
accusative | hold | holds | halten | hält | animal thing text food
accusative | carry | carries | tragen | trägt | animal thing text food
accusative | read | reads | lesen | liest | text
accusative | eat | eats | essen | isst | food
accusative | buy | buys | kaufen | kauft | animal thing text food
accusative | sell | sells | verkaufen | verkauft | animal thing text food
accusative | take | takes | nehmen | nimmt | thing text food
accusative | need | needs | brauchen | braucht | thing text food
accusative | visit | visits | besuchen | besucht | person place city
accusative | love | loves | lieben | liebt | person animal
accusative | look for | looks for | suchen | sucht | person animal thing text food
accusative | paint | paints | malen | malt | person animal thing food place
accusative | write | writes | schreiben | schreibt | text
accusative | open | opens | öffnen | öffnet | thing text
accusative | build | builds | bauen | baut | thing place
accusative | call | calls | rufen | ruft | person animal
accusative | know | knows | kennen | kennt | person animal place city
accusative | ask | asks | fragen | fragt | person
accusative | meet | meets | treffen | trifft | person animal
accusative | catch | catches | fangen | fängt | animal thing
accusative | hear | hears | hören | hört | person animal
dative | help | helps | helfen | hilft | person animal
dative | follow | follows | folgen | folgt | person animal
dative | thank | thanks | danken | dankt | person
dative | answer | answers | antworten | antwortet | person
ditransitive | give | gives | geben | gibt | thing text food
ditransitive | show | shows | zeigen | zeigt | thing text food
ditransitive | bring | brings | bringen | bringt | thing text food
ditransitive | send | sends | schicken | schickt | thing text food
ditransitive | tell | tells | erzählen | erzählt | text
clausal | know | knows | wissen | weiß |
clausal | say | says | sagen | sagt |
clausal | think | thinks | denken | denkt |
clausal | believe | believes | glauben | glaubt |
clausal | hope | hopes | hoffen | hofft |
"""

COPULA = Verb("copula", "be", "is", "sein", "ist", english_plural="are", german_plural="sind")

# English third, plural, negated third, negated plural | German third, plural
_MODAL_TABLE = """
can | can | cannot | cannot | kann | können
must | must | | | muss | müssen
should | should | should not | should not | soll | sollen
wants to | want to | does not want to | do not want to | will | wollen
"""

# English | German stem | animate only (y/n)
_ADJECTIVE_TABLE = """
big | groß | n
small | klein | n
old | alt | n
new | neu | n
red | rot | n
blue | blau | n
green | grün | n
black | schwarz | n
white | weiß | n
yellow | gelb | n
beautiful | schön | n
ugly | hässlich | n
heavy | schwer | n
dirty | schmutzig | n
clean | sauber | n
wet | nass | n
dry | trocken | n
young | jung | y
happy | glücklich | y
sad | traurig | y
tired | müde | y
hungry | hungrig | y
friendly | freundlich | y
clever | klug | y
strong | stark | y
brave | mutig | y
lazy | faul | y
funny | lustig | y
angry | wütend | y
curious | neugierig | y
proud | stolz | y
shy | schüchtern | y
sick | krank | y
rich | reich | y
poor | arm | y
"""

_TIME_ADVERB_TABLE = """
today | heute
tomorrow | morgen
now | jetzt
tonight | heute Abend
soon | bald
every day | jeden Tag
"""

_MANNER_ADVERB_TABLE = """
quickly | schnell
slowly | langsam
quietly | leise
loudly | laut
carefully | vorsichtig
happily | fröhlich
together | zusammen
alone | allein
"""

# role | English | German | German before a city | case | object categories
_PREPOSITION_TABLE = """
place | in | in | in | dative | place city
place | on | auf | | dative | place
place | behind | hinter | | dative | place thing
place | in front of | vor | | dative | place thing person
place | next to | neben | | dative | place thing person animal
place | under | unter | | dative | thing
place | near | bei | | dative | person place
companion | with | mit | | dative | person animal thing
companion | without | ohne | | accusative | person animal thing
companion | for | für | | accusative | person animal
source | from | von | aus | dative | person city
direction | to | zu | nach | dative | person place city
direction | out of | aus | | dative | place
direction | through | durch | durch | accusative | place city
"""

_CONJUNCTION_TABLE = """
because | weil
although | obwohl
when | wenn
while | während
before | bevor
"""

THAT = Conjunction("that", "dass")


def _parse_case(name: str) -> Case:
    """Return ``name`` as a :data:`Case`."""
    cases: dict[str, Case] = {"nominative": "nominative", "accusative": "accusative", "dative": "dative"}
    return cases[name]


def _parse_nouns() -> tuple[Noun, ...]:
    """Build the noun lexicon from its table."""
    genders: dict[str, Gender] = {"m": "m", "f": "f", "n": "n"}
    return tuple(Noun(row[0], genders[row[1]], *row[2:6]) for row in _rows(_NOUN_TABLE))


def _parse_verbs() -> tuple[Verb, ...]:
    """Build the verb lexicon (without the copula) from its table."""
    kinds: dict[str, VerbKind] = {
        "intransitive": "intransitive",
        "motion": "motion",
        "accusative": "accusative",
        "dative": "dative",
        "ditransitive": "ditransitive",
        "clausal": "clausal",
    }
    return tuple(
        Verb(kinds[row[0]], row[1], row[2], row[3], row[4], tuple(row[5].split()))
        for row in _rows(_VERB_TABLE)
    )


def _parse_prepositions() -> tuple[Preposition, ...]:
    """Build the preposition lexicon from its table."""
    roles: dict[str, PrepositionRole] = {
        "place": "place",
        "companion": "companion",
        "direction": "direction",
        "source": "source",
    }
    return tuple(
        Preposition(roles[row[0]], row[1], row[2], _parse_case(row[4]), tuple(row[5].split()), row[3])
        for row in _rows(_PREPOSITION_TABLE)
    )


NOUNS: tuple[Noun, ...] = _parse_nouns()
PROPER_NAMES: tuple[ProperName, ...] = tuple(ProperName(*row) for row in _rows(_PROPER_NAME_TABLE))
VERBS: tuple[Verb, ...] = _parse_verbs()
MODALS: tuple[Modal, ...] = tuple(Modal(*row) for row in _rows(_MODAL_TABLE))
ADJECTIVES: tuple[Adjective, ...] = tuple(
    Adjective(row[0], row[1], row[2] == "y") for row in _rows(_ADJECTIVE_TABLE)
)
TIME_ADVERBS: tuple[Adverb, ...] = tuple(Adverb(*row) for row in _rows(_TIME_ADVERB_TABLE))
MANNER_ADVERBS: tuple[Adverb, ...] = tuple(Adverb(*row) for row in _rows(_MANNER_ADVERB_TABLE))
PREPOSITIONS: tuple[Preposition, ...] = _parse_prepositions()
CONJUNCTIONS: tuple[Conjunction, ...] = tuple(Conjunction(*row) for row in _rows(_CONJUNCTION_TABLE))

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
    """Attach an ending to an adjective stem, merging a doubled ``e`` (``müde`` + ``e``)."""
    if stem.endswith("e") and ending.startswith("e"):
        return stem + ending[1:]
    return stem + ending


# --------------------------------------------------------------------------- syntax trees


@dataclass(frozen=True)
class NounPhrase:
    """A noun phrase: either ``noun`` with a determiner, or a ``proper`` name or city."""

    determiner: Determiner
    noun: Noun | None = None
    proper: ProperName | None = None
    plural: bool = False
    adjective: Adjective | None = None
    modifier: PrepositionalPhrase | None = None


@dataclass(frozen=True)
class PrepositionalPhrase:
    """A preposition and its noun phrase complement."""

    preposition: Preposition
    complement: NounPhrase


Adjunct = Adverb | PrepositionalPhrase


@dataclass(frozen=True)
class Clause:
    """One clause; ``objects`` lists a ditransitive verb's recipient before its theme."""

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
    """A main clause with an optional adverbial subordinate clause before or after it."""

    main: Clause
    conjunction: Conjunction | None = None
    subordinate: Clause | None = None
    subordinate_first: bool = False


# --------------------------------------------------------------------------- English realisation


def _english_article(next_word: str) -> str:
    """Return ``a`` or ``an`` for the word that follows."""
    return "an" if next_word[0] in "aeiou" else "a"


def english_noun_phrase(phrase: NounPhrase) -> list[str]:
    """Realise a noun phrase in English."""
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
    """Realise a clause in English word order (subject, verb, objects, adjuncts)."""
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
    """Realise a whole sentence in English, capitalised and with a full stop."""
    words = english_clause(sentence.main)
    if sentence.subordinate is not None and sentence.conjunction is not None:
        subordinate = [sentence.conjunction.english, *english_clause(sentence.subordinate)]
        words = [*subordinate, ",", *words] if sentence.subordinate_first else words + subordinate
    return _finish(words)


# --------------------------------------------------------------------------- German realisation


def german_noun_phrase(phrase: NounPhrase, case: Case, negative: bool = False) -> list[str]:
    """Realise a noun phrase in German in ``case``; ``negative`` turns ``ein`` into ``kein``."""
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
    """Realise a verb-second main clause; ``prefield`` is a fronted subordinate clause."""
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
    """Realise a verb-final subordinate clause introduced by ``conjunction``."""
    finite, right_bracket = _german_verbs(clause)
    return [conjunction.german, *_german_middle_field(clause, include_subject=True), *right_bracket, finite]


def german_sentence(sentence: Sentence) -> str:
    """Realise a whole sentence in German, capitalised and with a full stop."""
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
    return tuple(noun for noun in NOUNS if noun.category in categories)


@functools.cache
def _proper_names_in(category: str) -> tuple[ProperName, ...]:
    """Return the first names (``"name"``) or cities (``"city"``) in lexicon order."""
    return tuple(proper for proper in PROPER_NAMES if proper.category == category)


@functools.cache
def _adjectives_for(animate: bool, predicative: bool = False) -> tuple[Adjective, ...]:
    """Return the adjectives that may describe an animate or inanimate noun.

    Predicative adjectives of people and animals are restricted to the animate-only ones
    ("the man is tired", not "the man is red").
    """
    if predicative:
        return tuple(adjective for adjective in ADJECTIVES if adjective.animate_only == animate)
    return tuple(adjective for adjective in ADJECTIVES if animate or not adjective.animate_only)


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
    preposition = rng.choice([p for p in PREPOSITIONS if p.role in roles])
    return PrepositionalPhrase(preposition, _random_noun_phrase(rng, preposition.object_categories, False))


def _random_modifier(rng: random.Random) -> PrepositionalPhrase:
    """Draw a prepositional phrase that modifies a noun ("the man with the hat")."""
    return _random_prepositional_phrase(rng, ("companion", "source"))


def _random_adjunct(rng: random.Random, verb: Verb) -> Adjunct | None:
    """Draw an optional manner adverb or prepositional phrase that modifies the verb."""
    if verb.kind in ("clausal", "copula") or rng.random() > 0.35:
        return None
    if rng.random() < 0.3:
        return rng.choice(MANNER_ADVERBS)
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
    return rng.choice([verb for verb in VERBS if verb.kind == kind])


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
    modal = rng.choice(MODALS) if verb.kind != "clausal" and rng.random() < 0.2 else None
    negatable = verb.kind != "clausal" and (modal is None or modal.negatable)
    negated = negatable and rng.random() < 0.15
    time_adverb = rng.choice(TIME_ADVERBS) if rng.random() < 0.25 else None
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
    """Draw one sentence tree from the grammar."""
    main = _random_clause(rng, allow_clausal=True)
    if main.complement is not None or rng.random() < 0.55:
        return Sentence(replace(main, fronted=_random_fronting(rng, main)))
    conjunction = rng.choice(CONJUNCTIONS)
    subordinate = _random_clause(rng, allow_clausal=False)
    if rng.random() < 0.3:
        return Sentence(main, conjunction, subordinate, subordinate_first=True)
    return Sentence(replace(main, fronted=_random_fronting(rng, main)), conjunction, subordinate)


def random_pair(rng: random.Random) -> tuple[str, str]:
    """Draw one sentence and return its English and German realisations."""
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


def _write_atomically(path: Path, lines: Sequence[str]) -> None:
    """Write ``lines`` to ``path`` through a temporary file in the same directory."""
    descriptor, temporary_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="\n") as handle:
            handle.writelines(line + "\n" for line in lines)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary_name, 0o644)  # mkstemp creates files readable by their owner only.
        os.replace(temporary_name, path)
    except BaseException:
        Path(temporary_name).unlink(missing_ok=True)
        raise


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
    Files are UTF-8 with one sentence per line and ``\n`` line endings; line ``i`` of the
    source file translates to line ``i`` of the target file. Each file is written to a
    temporary file in ``directory`` and moved into place with ``os.replace``, so a reader
    never sees a half-written file. Raises ``ValueError`` if a language suffix is empty,
    contains a path separator, or both suffixes are equal.
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
        _write_atomically(source_path, [source for source, _ in pairs])
        _write_atomically(target_path, [target for _, target in pairs])
        paths[split_name] = (source_path, target_path)
    return paths
