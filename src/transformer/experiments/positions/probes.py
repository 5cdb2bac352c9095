"""The positions experiment's probes: length-bucketed test sets and the subject-object permutation probe."""

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from transformer.data.corpora.synthetic import (
    Clause,
    Noun,
    NounPhrase,
    Sentence,
    english_sentence,
    german_sentence,
    load_lexicon,
)
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.translator import Translator
from transformer.experiments.positions.settings import ANIMATE, BUCKETS
from transformer.model.transformer import Transformer


@dataclass(frozen=True)
class LengthBucket:
    """Test sentences whose source has ``low < tokens <= high`` BPE tokens (EOS included).

    Parameters
    ----------
    name : str
        ``"1-12"``, ``"13-18"``, ...
    low, high : int
        Exclusive lower and inclusive upper bound on source tokens.
    pairs : list of (str, str)
        English source and German reference.

    Notes
    -----
    Source tokens count as the model sees them: the BPE pieces plus EOS, the positions the encoder needs.
    """

    name: str
    low: int
    high: int
    pairs: list[tuple[str, str]]


def bucket_bounds(limit: int) -> list[tuple[int, int]]:
    """Turn L into the buckets' bounds in tokens.

    Parameters
    ----------
    limit : int
        L, the training length limit.

    Returns
    -------
    list of (int, int)
        ``(low, high]`` per bucket: ``(0, L]``, ``(L, 1.5L]``, ``(1.5L, 2L]``, ``(2L, 3L]`` (rounded down).

    Notes
    -----
    The first bucket is the trained range, the reference the others are compared with.
    """
    return [(int(low * limit), int(high * limit)) for low, high in BUCKETS]


def length_buckets(
    pairs: Sequence[tuple[str, str]],
    source_length: Any,
    limit: int,
    per_bucket: int,
    exclude: frozenset[str] = frozenset(),
) -> list[LengthBucket]:
    """Sort sentence pairs into the length buckets, keeping the first ``per_bucket`` of each.

    Parameters
    ----------
    pairs : sequence of (str, str)
        Candidate pairs, in a fixed order (the grammar's, from a seed).
    source_length : callable
        ``source_length(sentence) -> int``: tokens of a source sentence, EOS included.
    limit : int
        L.
    per_bucket : int
        Most pairs per bucket.
    exclude : frozenset of str
        Source sentences to leave out (the training split's).

    Returns
    -------
    list of LengthBucket
        One per bucket of :func:`bucket_bounds`, in order; a bucket may hold fewer pairs when the candidates
        run out.

    Notes
    -----
    Deterministic: the same candidates in the same order give the same buckets. Sentences longer than the
    last bound are left out.
    """
    bounds = bucket_bounds(limit)
    chosen: list[list[tuple[str, str]]] = [[] for _ in bounds]
    for source, target in pairs:
        if source in exclude:
            continue
        length = source_length(source)
        for index, (low, high) in enumerate(bounds):
            if low < length <= high and len(chosen[index]) < per_bucket:
                chosen[index].append((source, target))
                break
        if all(len(bucket) == per_bucket for bucket in chosen):
            break
    return [
        LengthBucket(f"{low + 1}-{high}", low, high, bucket)
        for (low, high), bucket in zip(bounds, chosen, strict=True)
    ]


# --------------------------------------------------------------------------- the permutation probe


@dataclass(frozen=True)
class SwapPair:
    """A sentence and the same sentence with subject and object swapped, with their German.

    Parameters
    ----------
    english, german : str
        "The tired man sees the dog." / "Der müde Mann sieht den Hund."
    swapped_english, swapped_german : str
        "The dog sees the tired man." / "Der Hund sieht den müden Mann."

    Notes
    -----
    The English words of the two are the same multiset (both noun phrases are definite and agree in number,
    so the article, the verb form and the capital "The" stay); the German changes case and word order.
    """

    english: str
    german: str
    swapped_english: str
    swapped_german: str


def swap_pairs(count: int, seed: int) -> list[SwapPair]:
    """Build subject/object swap pairs from the grammar's lexicon.

    Parameters
    ----------
    count : int
        Pairs wanted.
    seed : int
        Seed of the private random source.

    Returns
    -------
    list of SwapPair
        ``count`` distinct pairs "The X verbs the Y." with an accusative or dative verb whose objects may be
        people or animals, X and Y different nouns of those categories (which every such verb accepts as
        subject), both singular or both plural, each with an optional adjective.

    Raises
    ------
    ValueError
        When the lexicon cannot give ``count`` distinct pairs.

    Notes
    -----
    Realised with the grammar's own :func:`~transformer.data.corpora.synthetic.english_sentence` and
    :func:`~transformer.data.corpora.synthetic.german_sentence`, so the German references follow its agreement rules
    (nominative subject, accusative or dative object).
    """
    lexicon = load_lexicon()
    verbs = [
        verb
        for verb in lexicon.verbs
        if verb.kind in ("accusative", "dative") and set(verb.object_categories) & set(ANIMATE)
    ]
    adjectives = list(lexicon.adjectives)
    rng = random.Random(seed)
    pairs: dict[str, SwapPair] = {}
    for _ in range(50 * count + 100):
        verb = rng.choice(verbs)
        nouns: list[Noun] = [
            noun
            for noun in lexicon.nouns
            if noun.category in ANIMATE and noun.category in verb.object_categories
        ]
        first, second = rng.sample(nouns, 2)
        plural = rng.random() < 0.3
        phrases = [
            NounPhrase("definite", noun, None, plural, rng.choice(adjectives) if rng.random() < 0.3 else None)
            for noun in (first, second)
        ]
        original = Sentence(Clause(subject=phrases[0], verb=verb, objects=(phrases[1],)))
        swapped = Sentence(Clause(subject=phrases[1], verb=verb, objects=(phrases[0],)))
        pair = SwapPair(
            english_sentence(original),
            german_sentence(original),
            english_sentence(swapped),
            german_sentence(swapped),
        )
        pairs.setdefault(pair.english, pair)
        if len(pairs) == count:
            return list(pairs.values())
    raise ValueError(f"the lexicon gave only {len(pairs)} distinct swap pairs, {count} wanted")


def token_permutation(original: Sequence[int], permuted: Sequence[int]) -> list[int] | None:
    """Find ``p`` with ``permuted[j] == original[p[j]]``, if the two are permutations of each other.

    Parameters
    ----------
    original, permuted : sequence of int
        Token ids.

    Returns
    -------
    list of int or None
        The permutation (equal tokens matched in order), or None when the multisets differ.

    Notes
    -----
    Which of several equal tokens is matched does not matter for the probe: without positions equal tokens
    of one sentence get equal encoder rows.
    """
    if sorted(original) != sorted(permuted):
        return None
    positions: dict[int, list[int]] = defaultdict(list)
    for index, token in enumerate(original):
        positions[token].append(index)
    return [positions[token].pop(0) for token in permuted]


def permutation_probe(
    model: Transformer, tokenizer: TextTokenizer, translator: Translator, pairs: Sequence[SwapPair]
) -> dict[str, Any]:
    """Run the permutation probe on a trained model.

    Parameters
    ----------
    model : Transformer
        The model (on the translator's device).
    tokenizer : TextTokenizer
        Its tokenizer.
    translator : Translator
        A translator of the model, with the run's decode settings.
    pairs : sequence of SwapPair
        The probe pairs.

    Returns
    -------
    dict of str to Any
        ``probe_pairs`` (pairs whose tokens are permutations of each other, the only ones used),
        ``probe_encoder_max_abs_diff`` (largest ``|enc(swapped)[j] - enc(original)[p[j]]|``),
        ``probe_encoder_max_abs`` (largest ``|enc(original)|``, for scale), ``probe_translation_changed``
        (share of pairs whose two translations differ), ``probe_exact_original`` and
        ``probe_exact_swapped`` (shares translated exactly as the grammar does).

    Notes
    -----
    Without positions the difference is float rounding (attention sums in another order), and so the two
    translations are the same but for near-ties of the search; a model that cannot tell the orders apart
    can be exactly right on at most one sentence of each pair.
    """
    used, originals, swapped, permutations = _permuted_pairs(tokenizer, pairs, model.config.eos_id)
    if not used:
        return {"probe_pairs": 0}
    difference, largest = _encoder_differences(model, originals, swapped, permutations)
    translations = translator.translate([pair.english for pair in used])
    swapped_translations = translator.translate([pair.swapped_english for pair in used])
    count = len(used)
    return {
        "probe_pairs": count,
        "probe_encoder_max_abs_diff": difference,
        "probe_encoder_max_abs": largest,
        "probe_translation_changed": sum(
            a != b for a, b in zip(translations, swapped_translations, strict=True)
        )
        / count,
        "probe_exact_original": sum(
            hypothesis == pair.german for hypothesis, pair in zip(translations, used, strict=True)
        )
        / count,
        "probe_exact_swapped": sum(
            hypothesis == pair.swapped_german
            for hypothesis, pair in zip(swapped_translations, used, strict=True)
        )
        / count,
        "probe_examples": [
            {
                "english": pair.english,
                "translation": translation,
                "swapped_english": pair.swapped_english,
                "swapped_translation": swapped_translation,
            }
            for pair, translation, swapped_translation in list(
                zip(used, translations, swapped_translations, strict=True)
            )[:3]
        ],
    }


def _permuted_pairs(
    tokenizer: TextTokenizer, pairs: Sequence[SwapPair], eos_id: int
) -> tuple[list[SwapPair], list[list[int]], list[list[int]], list[list[int]]]:
    """Keep the pairs whose two token sequences (EOS appended) are permutations of each other.

    Returns the kept pairs, their original and swapped token ids, and each pair's permutation.
    """
    used: list[SwapPair] = []
    originals: list[list[int]] = []
    swapped: list[list[int]] = []
    permutations: list[list[int]] = []
    for pair in pairs:
        first = [*tokenizer.encode(pair.english), eos_id]
        second = [*tokenizer.encode(pair.swapped_english), eos_id]
        permutation = token_permutation(first, second)
        if permutation is not None:
            used.append(pair)
            originals.append(first)
            swapped.append(second)
            permutations.append(permutation)
    return used, originals, swapped, permutations


def _encoder_differences(
    model: Transformer,
    originals: Sequence[list[int]],
    swapped: Sequence[list[int]],
    permutations: Sequence[list[int]],
) -> tuple[float, float]:
    """Encode both sentences of every probe pair, 64 pairs at a time; compare the rows under the permutation.

    Returns the largest ``|enc(swapped)[j] - enc(original)[p[j]]|`` and the largest ``|enc(original)|``.
    """
    device = next(model.parameters()).device
    difference, largest = 0.0, 0.0
    with torch.no_grad():
        for start in range(0, len(originals), 64):
            chunk = slice(start, start + 64)
            encoded = []
            for batch in (originals[chunk], swapped[chunk]):
                width = max(len(ids) for ids in batch)
                tokens = torch.full((len(batch), width), model.config.pad_id, dtype=torch.long)
                for row, ids in enumerate(batch):
                    tokens[row, : len(ids)] = torch.tensor(ids)
                encoded.append(model.encode(tokens.to(device)).float().cpu())  # (pairs, width, d_model)
            for row, permutation in enumerate(permutations[chunk]):
                first_rows = encoded[0][row, permutation]
                second_rows = encoded[1][row, : len(permutation)]
                difference = max(difference, float((second_rows - first_rows).abs().max()))
                largest = max(largest, float(encoded[0][row, : len(permutation)].abs().max()))
    return difference, largest
