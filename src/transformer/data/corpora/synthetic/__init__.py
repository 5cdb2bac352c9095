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
  in ``synthetic_lexicon.json`` in this package (see :func:`load_lexicon`).
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

Modules
-------
``words`` (word classes), ``lexicon`` (the JSON lexicon, read and checked), ``phrases`` (German morphology and
the syntax trees), ``realisation`` (English and German word order and agreement) and ``generation`` (random
sentences, distinct pairs, splits and corpus files). The names below are the package's public API.
"""

from transformer.data.corpora.synthetic.generation import (
    MAX_PAIRS,
    SyntheticSplits,
    generate_pairs,
    generate_splits,
    random_pair,
    random_sentence,
    write_corpus,
)
from transformer.data.corpora.synthetic.lexicon import (
    COPULA,
    LEXICON_FILE,
    THAT,
    Lexicon,
    LexiconError,
    load_lexicon,
    parse_lexicon,
)
from transformer.data.corpora.synthetic.phrases import (
    Clause,
    NounPhrase,
    PrepositionalPhrase,
    Sentence,
    inflect_adjective,
)
from transformer.data.corpora.synthetic.realisation import (
    english_clause,
    english_noun_phrase,
    english_sentence,
    german_main_clause,
    german_noun_phrase,
    german_sentence,
    german_subordinate_clause,
)
from transformer.data.corpora.synthetic.words import (
    Adjective,
    Adverb,
    Conjunction,
    Modal,
    Noun,
    Preposition,
    ProperName,
    Verb,
)

__all__ = [
    "COPULA",
    "LEXICON_FILE",
    "MAX_PAIRS",
    "THAT",
    "Adjective",
    "Adverb",
    "Clause",
    "Conjunction",
    "Lexicon",
    "LexiconError",
    "Modal",
    "Noun",
    "NounPhrase",
    "Preposition",
    "PrepositionalPhrase",
    "ProperName",
    "Sentence",
    "SyntheticSplits",
    "Verb",
    "english_clause",
    "english_noun_phrase",
    "english_sentence",
    "generate_pairs",
    "generate_splits",
    "german_main_clause",
    "german_noun_phrase",
    "german_sentence",
    "german_subordinate_clause",
    "inflect_adjective",
    "load_lexicon",
    "parse_lexicon",
    "random_pair",
    "random_sentence",
    "write_corpus",
]
