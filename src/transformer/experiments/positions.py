"""``transformer experiment positions``: no positions, sinusoids or learned positions (section 3.5, Table 2 row E).

Three questions, one command:

1. **Does the encoding matter?** Group ``multi30k``: the Table 2 base row of the scale (the same
   configuration as ``table2``'s ``base``; Multi30k at ``cpu`` and ``gpu``, WMT14 at ``paper``, the grammar
   corpus at ``tiny``) trained with ``positional_encoding`` ``none``, ``sinusoidal`` and ``learned``; dev
   perplexity and BLEU.
2. **Do the encodings extrapolate?** Group ``length``: the built-in grammar corpus, trained only on pairs of at
   most L BPE tokens on both sides (EOS included; ``data.max_len = L``, which drops longer training pairs) and
   tested on sentences of the same grammar bucketed by *source* length in tokens: ``<= L`` (the trained
   range), ``(L, 1.5L]``, ``(1.5L, 2L]``, ``(2L, 3L]``. The test sentences are generated from another seed
   (:data:`TEST_SEED`) and any English sentence of the run's training file is removed, so they are disjoint
   from training. Section 3.5 chose sinusoids because they "may allow the model to extrapolate to sequence
   lengths longer than the ones encountered during training".
3. **The permutation probe.** Pairs "The X verbs the Y." / "The Y verbs the X." built from the grammar's
   lexicon, whose token sequences are permutations of each other: (i) without positions the encoder output
   of the swapped sentence must be the same permutation of the original's rows (the largest difference is
   reported, float rounding only); (ii) how often the translation changes when subject and object swap —
   with positions it should almost always change (the meaning did), without them it cannot.

Learned positions and lengths beyond the table
----------------------------------------------
A learned table cannot index past its last row. The ``length-learned`` variant is trained with a table of
:data:`LEARNED_TABLE` rows (enough for every sentence the grammar makes, so the worker's dev scoring never
hits the limit), but on pairs of at most L tokens, so rows L and beyond never receive a gradient (Adam
without weight decay leaves them at their random initialisation). Its ``measure`` scores it twice:

* with the whole table (positions beyond L are untrained random vectors), and
* with the table cut to its first L rows: exactly a model trained with ``max_positions = L`` (the rows it
  keeps are the only ones training used; only the random initialisation of the other weights differs). Here
  the library's behaviour shows: the :class:`~transformer.decoding.translator.Translator` truncates every
  input to ``max_positions`` tokens (the share truncated is reported per bucket, 100% beyond L by
  construction), and the model raises ``ValueError`` ("sequence needs position ... but the learned
  positional embedding has max_positions=...") for anything longer. On the output side the searches cap
  every hypothesis at the table's size (``TransformerStepModel.max_output_length``; before that fix a
  hypothesis reaching L target tokens raised mid-search). The table says, per bucket, whether a search
  raised with the run's decode settings; the BLEU shown is with outputs capped at L tokens
  (``DecodeConfig.max_length = L``), the only way a table of L rows can translate.

Scales (one seed per run by default): ``tiny`` (seconds per run, the grammar corpus in both groups, for
tests); ``cpu`` (group ``multi30k`` = ``table2 --scale cpu``'s base row: d_model 128, 3+3 layers, 800 steps on
Multi30k; group ``length``: L = 12, d_model 256, 2+2 layers, 1,600 steps of 1,024 tokens, as the quickstart
recipe, on the about 13,000 of 40,000 generated pairs that fit L); ``gpu`` (Multi30k at the shipped model's size;
L = 16, d_model 256, 3+3 layers, 4,000 steps of 4,096 tokens); ``paper`` (the paper's base model on WMT14 as
in Table 2, with the paper's figures beside it; the length group as at ``gpu``).

Calibration of ``cpu`` (``Intel(R) Xeon(R) Processor``, 2 cores with AVX-512 and no AMX, fp32, while
``table2 --scale cpu`` trained beside it): the ``multi30k`` runs are ``table2``'s base row, which trained its
800 steps in 376 s (0.47 s a step) and was scored in 17 s; a ``length`` run measured 0.33 s a step over 60
steps (the trainer chose one thread, the other core being busy) and its ``measure`` took 40 s on an untrained
model (the longest outputs; the learned variant translates each bucket twice more). Whole experiment: about
3 x 7 + 3 x (1,600 x 0.33 s + 1.5 min) = 50 minutes, less on an idle machine.

``--set`` changes the base configuration, which is the ``multi30k`` group's; the ``length`` group sets the
keys of its own recipe explicitly (every key the ``multi30k`` base sets), so only keys neither base sets
(``data.mirror``, ``train.precision``, ...) reach it.
"""

import copy
import dataclasses
import json
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from transformer.config import DecodeConfig, ExperimentConfig, experiment_from_dict
from transformer.data.dataset import read_lines
from transformer.data.synthetic import (
    Clause,
    Noun,
    NounPhrase,
    Sentence,
    english_sentence,
    generate_pairs,
    german_sentence,
    load_lexicon,
)
from transformer.data.text_tokenizer import TextTokenizer
from transformer.decoding.translator import Translator
from transformer.evaluation.bleu import score_translations
from transformer.experiments import table2
from transformer.experiments.plan import ExperimentPlan, Variant, flatten, short_recipe
from transformer.experiments.results import format_metric
from transformer.model.transformer import Transformer

#: The encodings compared, in table order.
ENCODINGS = ("none", "sinusoidal", "learned")
#: Rows of the learned table in the length group: more than any grammar sentence plus the output margin.
LEARNED_TABLE = 256
#: Seed of the grammar for the length test sets and the probe (training uses ``data.synthetic_seed``).
TEST_SEED = 4321
#: Length buckets in multiples of L: ``(low * L, high * L]`` source tokens, EOS included.
BUCKETS = ((0.0, 1.0), (1.0, 1.5), (1.5, 2.0), (2.0, 3.0))
#: Noun categories that may be both subject and object of the grammar's accusative and dative verbs.
ANIMATE = ("person", "animal")
#: The paper's Table 2 figures for the base row (sinusoids) and row E (learned), EN-DE newstest2013.
PAPER_REPORTED = {
    "sinusoidal": {"dev_perplexity": 4.92, "dev_bleu": 25.8},
    "learned": {"dev_perplexity": 4.92, "dev_bleu": 25.7},
}


@dataclass(frozen=True)
class LengthScale:
    """The length group at one scale: corpus, length limit, model and recipe.

    Parameters
    ----------
    limit : int
        L: the longest training pair, in BPE tokens per side with EOS (``data.max_len``).
    train_pairs : int
        Pairs generated for training before the length filter keeps those of at most L tokens.
    vocab_size : int
        Joint BPE vocabulary.
    d_model, d_ff, num_heads, layers : int
        Model size (``layers`` encoder and as many decoder layers).
    steps, max_tokens : int
        Training steps and tokens per batch.
    per_bucket : int
        Test sentences per length bucket.
    generated : int
        Grammar sentences drawn (seed :data:`TEST_SEED`) to fill the buckets.
    probe_pairs : int
        Subject/object swap pairs of the permutation probe (both groups).
    max_length_offset : int
        ``decode.max_length_offset`` of the length runs.

    Notes
    -----
    One record per scale, so the cpu scale's budget is decided in one place (see the module notes).
    """

    limit: int
    train_pairs: int
    vocab_size: int
    d_model: int
    d_ff: int
    num_heads: int
    layers: int
    steps: int
    max_tokens: int
    per_bucket: int
    generated: int
    probe_pairs: int
    max_length_offset: int = 50


_LARGE = {
    "limit": 16,
    "train_pairs": 100_000,
    "vocab_size": 1000,
    "d_model": 256,
    "d_ff": 1024,
    "num_heads": 4,
}
#: The length group (and the probe's size) per scale.
LENGTH_SCALES = {
    "tiny": LengthScale(
        limit=20, train_pairs=600, vocab_size=200, d_model=32, d_ff=64, num_heads=4, layers=1, steps=4,
        max_tokens=512, per_bucket=3, generated=400, probe_pairs=4, max_length_offset=5,
    ),
    "cpu": LengthScale(
        limit=12, train_pairs=40_000, vocab_size=1000, d_model=256, d_ff=1024, num_heads=4, layers=2,
        steps=1600, max_tokens=1024, per_bucket=150, generated=20_000, probe_pairs=200,
    ),
    "gpu": LengthScale(
        **_LARGE, layers=3, steps=4000, max_tokens=4096, per_bucket=500, generated=100_000, probe_pairs=500
    ),
    "paper": LengthScale(
        **_LARGE, layers=3, steps=4000, max_tokens=4096, per_bucket=500, generated=100_000, probe_pairs=500
    ),
}  # fmt: skip


def multi30k_base(scale: str) -> dict[str, Any]:
    """Give the ``multi30k`` group's base configuration: Table 2's base row at the scale.

    Parameters
    ----------
    scale : str
        ``tiny``, ``cpu``, ``gpu`` or ``paper``.

    Returns
    -------
    dict of str to Any
        A nested run configuration, equal to ``table2``'s ``base`` variant at the same scale.

    Notes
    -----
    Sharing Table 2's configuration makes this group's ``sinusoidal`` and ``learned`` rows the same runs
    as ``table2``'s ``base`` and ``E1``: the two experiments check each other.
    """
    settings = table2.scale_settings(scale)
    base: dict[str, Any] = copy.deepcopy(settings["base"])
    name, _, model, smoothing, _, _ = table2.table_rows()[0]
    assert name == "base"
    base.setdefault("model", {}).update(table2.scaled_row(model, settings["width"], settings["layers"]))
    base.setdefault("train", {})["label_smoothing"] = smoothing
    return base


def length_base(scale: str) -> dict[str, Any]:
    """Give the ``length`` group's configuration: the grammar corpus, filtered to pairs of at most L tokens.

    Parameters
    ----------
    scale : str
        ``tiny``, ``cpu``, ``gpu`` or ``paper``.

    Returns
    -------
    dict of str to Any
        A nested run configuration (without the positional encoding, which each variant sets).

    Notes
    -----
    Pre-norm without dropout, as the shipped quickstart recipe for this corpus (a noise-free corpus; dropout
    only slowed learning there). ``data.max_len = L`` drops every training pair with more than L tokens on
    either side, so no position beyond L - 1 is ever trained, on the source or the target side.
    """
    if scale not in LENGTH_SCALES:
        raise ValueError(f"--scale {scale}: positions runs at scale tiny, cpu, gpu or paper")
    size = LENGTH_SCALES[scale]
    return {
        "model": {
            "vocab_size": size.vocab_size,
            "d_model": size.d_model,
            "d_ff": size.d_ff,
            "num_heads": size.num_heads,
            "d_k": None,
            "d_v": None,
            "num_encoder_layers": size.layers,
            "num_decoder_layers": size.layers,
            "dropout": 0.0,
            "norm_first": True,
            "max_positions": LEARNED_TABLE,
        },
        "data": {
            "corpus": "synthetic",
            "source_lang": "en",
            "target_lang": "de",
            "max_len": size.limit,
            "synthetic_train_pairs": size.train_pairs,
            "synthetic_valid_pairs": 500 if scale != "tiny" else 12,
            "synthetic_test_pairs": 500 if scale != "tiny" else 12,
            "synthetic_seed": 1234,
        },
        "train": short_recipe(size.steps, size.max_tokens, 0.003),
        "decode": {
            "beam_size": 4 if scale != "tiny" else 2,
            "length_penalty": 0.6,
            "length_penalty_form": "gnmt",
            "max_length_offset": size.max_length_offset,
        },
    }


def _same_keys(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Give ``second`` every key ``first`` sets that it lacks, at that field's default value."""
    filled = copy.deepcopy(second)
    vocabulary = {"model": {"vocab_size": second["model"]["vocab_size"]}}
    defaults = flatten(experiment_from_dict(vocabulary, source="defaults").to_dict())
    for key in flatten(first):
        section, _, name = key.partition(".")
        if name not in filled.get(section, {}):
            filled.setdefault(section, {})[name] = defaults[key]
    return filled


def build_plan(scale: str) -> ExperimentPlan:
    """Build the positions experiment at a scale.

    Parameters
    ----------
    scale : str
        ``tiny``, ``cpu``, ``gpu`` or ``paper``.

    Returns
    -------
    ExperimentPlan
        Base: the ``multi30k`` group's configuration. Variants ``multi30k-none``, ``multi30k-sinusoidal``,
        ``multi30k-learned`` and ``length-none``, ``length-sinusoidal``, ``length-learned``; scored with the
        last checkpoint, as Table 2.

    Notes
    -----
    The length variants override every key of the base configuration with their own recipe (explicitly,
    so nothing of the Multi30k recipe leaks into them), then set the encoding.
    """
    if scale not in LENGTH_SCALES:
        raise ValueError(f"--scale {scale}: positions runs at scale tiny, cpu, gpu or paper")
    base = multi30k_base(scale)
    length = _same_keys(base, length_base(scale))
    base_flat = flatten(base)
    length_overrides = dict(flatten(length))
    missing = sorted(set(base_flat) - set(length_overrides))
    if missing:  # pragma: no cover - _same_keys guarantees it
        raise AssertionError(f"length group does not set {missing}")
    variants = [
        Variant(
            f"multi30k-{encoding}",
            {"model.positional_encoding": encoding},
            "multi30k",
            PAPER_REPORTED.get(encoding, {}) if scale == "paper" else {},
        )
        for encoding in ENCODINGS
    ]
    variants += [
        Variant(f"length-{encoding}", {**length_overrides, "model.positional_encoding": encoding}, "length")
        for encoding in ENCODINGS
    ]
    size = LENGTH_SCALES[scale]
    notes = (
        f"Scale {scale}. Group multi30k: Table 2's base row at this scale with each encoding; dev = the "
        "validation split, perplexity per BPE token, last checkpoint. Group length: the grammar corpus, "
        f"trained on pairs of at most L = {size.limit} BPE tokens per side (EOS included), tested on "
        f"{size.per_bucket} sentences per source-length bucket (grammar seed {TEST_SEED}, none in the "
        f"training file); the learned table has {LEARNED_TABLE} rows, of which rows >= L are never trained; "
        "'learned, table cut to L' is the same model with max_positions = L."
    )
    return ExperimentPlan("positions", scale, base, variants, average_last=1, notes=notes)


# --------------------------------------------------------------------------- length buckets


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

    Notes
    -----
    Realised with the grammar's own :func:`~transformer.data.synthetic.english_sentence` and
    :func:`~transformer.data.synthetic.german_sentence`, so the German references follow its agreement
    rules (nominative subject, accusative or dative object). Raises ValueError when the lexicon cannot give
    ``count`` distinct pairs.
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
    eos = model.config.eos_id
    used: list[SwapPair] = []
    permutations: list[list[int]] = []
    originals: list[list[int]] = []
    swapped: list[list[int]] = []
    for pair in pairs:
        first = [*tokenizer.encode(pair.english), eos]
        second = [*tokenizer.encode(pair.swapped_english), eos]
        permutation = token_permutation(first, second)
        if permutation is not None:
            used.append(pair)
            permutations.append(permutation)
            originals.append(first)
            swapped.append(second)
    if not used:
        return {"probe_pairs": 0}
    device = next(model.parameters()).device
    difference, largest = 0.0, 0.0
    with torch.no_grad():
        for start in range(0, len(used), 64):
            chunk = slice(start, start + 64)
            encoded = []
            for batch in (originals[chunk], swapped[chunk]):
                width = max(len(ids) for ids in batch)
                tokens = torch.full((len(batch), width), model.config.pad_id, dtype=torch.long)
                for row, ids in enumerate(batch):
                    tokens[row, : len(ids)] = torch.tensor(ids)
                encoded.append(model.encode(tokens.to(device)).float().cpu())
            for row, permutation in enumerate(permutations[chunk]):
                first_rows = encoded[0][row, permutation]
                second_rows = encoded[1][row, : len(permutation)]
                difference = max(difference, float((second_rows - first_rows).abs().max()))
                largest = max(largest, float(encoded[0][row, : len(permutation)].abs().max()))
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


# --------------------------------------------------------------------------- measure


def cut_learned_table(model: Transformer, rows: int) -> Transformer:
    """Copy a learned-position model keeping only the first ``rows`` rows of its position table.

    Parameters
    ----------
    model : Transformer
        A model with ``positional_encoding="learned"`` and at least ``rows`` positions.
    rows : int
        The new ``max_positions``.

    Returns
    -------
    Transformer
        A model with ``max_positions = rows``, otherwise the same weights, on the same device, in eval mode.

    Notes
    -----
    When training never reached position ``rows`` (``data.max_len <= rows``), the cut model is what training
    with ``max_positions = rows`` would have given, up to the random initialisation of the other weights.
    """
    config = dataclasses.replace(model.config, max_positions=rows)
    cut = Transformer(config)
    state = dict(model.state_dict())
    key = "positional_encoding.embedding.weight"
    state[key] = state[key][:rows]
    cut.load_state_dict(state)
    return cut.to(next(model.parameters()).device).eval()


def _score_buckets(
    model: Transformer,
    tokenizer: TextTokenizer,
    buckets: Sequence[LengthBucket],
    decode: DecodeConfig,
    device: str,
) -> list[dict[str, Any]]:
    """Score each bucket: BLEU and the share of truncated inputs, or the error the translation raised."""
    scores: list[dict[str, Any]] = []
    for bucket in buckets:
        if not bucket.pairs:
            scores.append({"bleu": None, "truncated_share": None, "error": None})
            continue
        translator = Translator(model, tokenizer, decode, device=device)
        try:
            hypotheses = translator.translate([source for source, _ in bucket.pairs])
        except ValueError as error:
            scores.append({"bleu": None, "truncated_share": None, "error": str(error).splitlines()[0]})
            continue
        bleu = score_translations(hypotheses, [target for _, target in bucket.pairs]).bleu
        scores.append(
            {"bleu": bleu, "truncated_share": translator.truncated_count / len(bucket.pairs), "error": None}
        )
    return scores


def _run_spec(run_dir: Path) -> dict[str, Any]:
    """Read the run's ``run.json`` (written by the runner): experiment, scale, variant, group."""
    from transformer.experiments.worker import RUN_FILE

    spec: dict[str, Any] = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    return spec


def _training_sources(run_dir: Path) -> frozenset[str]:
    """Read the source sentences of the run's training split (test sentences are kept disjoint from them)."""
    split_files = json.loads((run_dir / "split_files.json").read_text(encoding="utf-8"))
    return frozenset(line.strip() for line in read_lines(Path(split_files["train"][0])))


def measure(
    *,
    model: Transformer,
    tokenizer: TextTokenizer,
    pairs: Sequence[tuple[str, str]],
    config: ExperimentConfig,
    run_dir: Path,
) -> dict[str, Any]:
    """Measure a trained run: the permutation probe, and for the length group BLEU per length bucket.

    Parameters
    ----------
    model : Transformer
        The scored model.
    tokenizer : TextTokenizer
        Its tokenizer.
    pairs : sequence of (str, str)
        The validation pairs (unused: the length test sets are generated).
    config : ExperimentConfig
        The run's configuration; ``data.max_len`` is L for the length group.
    run_dir : Path
        The run directory (its ``run.json`` names the group and scale).

    Returns
    -------
    dict of str to Any
        The probe's keys (:func:`permutation_probe`); for the length group also ``length_limit`` (L) and
        ``length_buckets``: per bucket ``name``, ``sentences``, ``bleu``, ``truncated_share`` and ``error``,
        and for learned positions ``cut_bleu``, ``cut_truncated_share`` (table cut to L rows, outputs capped
        at L tokens) and ``cut_uncapped_error`` (what the run's own decode settings raised with the cut
        table, None if nothing), plus ``learned_position_error``: the model's message for a too-long input.

    Notes
    -----
    Called by the worker after the dev scoring. Everything is deterministic given the model: the test
    sentences come from the grammar with :data:`TEST_SEED`.
    """
    del pairs
    spec = _run_spec(run_dir)
    size = LENGTH_SCALES[spec["scale"]]
    model.eval()
    device = config.train.device
    translator = Translator(model, tokenizer, config.decode, device=device)
    metrics: dict[str, Any] = permutation_probe(
        model, tokenizer, translator, swap_pairs(size.probe_pairs, TEST_SEED)
    )
    if spec["group"] != "length":
        return metrics
    limit = config.data.max_len
    buckets = length_buckets(
        generate_pairs(size.generated, TEST_SEED),
        lambda sentence: len(tokenizer.encode(sentence)) + 1,
        limit,
        size.per_bucket,
        exclude=_training_sources(run_dir),
    )
    rows = [
        {"name": bucket.name, "low": bucket.low, "high": bucket.high, "sentences": len(bucket.pairs), **score}
        for bucket, score in zip(
            buckets, _score_buckets(model, tokenizer, buckets, config.decode, device), strict=True
        )
    ]
    if model.config.positional_encoding == "learned":
        cut = cut_learned_table(model, limit)
        capped = dataclasses.replace(config.decode, max_length=min(config.decode.max_length or limit, limit))
        for row, score in zip(rows, _score_buckets(cut, tokenizer, buckets, capped, device), strict=True):
            row["cut_bleu"], row["cut_truncated_share"] = score["bleu"], score["truncated_share"]
        for row, score in zip(
            rows, _score_buckets(cut, tokenizer, buckets, config.decode, device), strict=True
        ):
            row["cut_uncapped_error"] = score["error"]
        too_long = torch.full((1, limit + 1), cut.config.unk_id, device=next(cut.parameters()).device)
        try:
            cut.encode(too_long)
            metrics["learned_position_error"] = None
        except ValueError as error:
            metrics["learned_position_error"] = str(error)
    metrics["length_limit"] = limit
    metrics["length_buckets"] = rows
    return metrics


# --------------------------------------------------------------------------- table and plot


def _by_variant(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Group result records by variant name."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        grouped[record["variant"]].append(record)
    return grouped


def _percent(values: Sequence[float | None]) -> str:
    """Format shares as a percentage over seeds."""
    return format_metric([None if value is None else 100 * value for value in values], 0)


def bucket_series(records: Sequence[dict[str, Any]], key: str) -> dict[str, list[float | None]]:
    """Collect one per-bucket metric of a variant's records, bucket by bucket.

    Parameters
    ----------
    records : sequence of dict
        The variant's result records (one per seed).
    key : str
        ``bleu``, ``truncated_share``, ``cut_bleu`` or ``cut_truncated_share``.

    Returns
    -------
    dict of str to list
        Bucket name -> one value per seed (None where the bucket was empty or its translation failed).

    Notes
    -----
    Buckets are matched by name, so seeds with the same L line up.
    """
    series: dict[str, list[float | None]] = defaultdict(list)
    for record in records:
        for bucket in record.get("length_buckets", []):
            series[bucket["name"]].append(bucket.get(key))
    return dict(series)


def render_table(plan: ExperimentPlan, records: list[dict[str, Any]]) -> str:
    """Print the three results: dev scores per encoding, BLEU per length bucket, the permutation probe.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its ``results.jsonl`` records.

    Returns
    -------
    str
        Markdown: a dev table (both groups), a length table (BLEU and the share of truncated inputs per
        bucket, with the learned table cut to L as an extra row) and a probe table.

    Notes
    -----
    Values are means over seeds with their spread; ``-`` marks what has not run. The learned variant's
    error messages are quoted under the length table, since how the library handles a too-long input is
    one of the results.
    """
    grouped = _by_variant(records)
    lines = [f"# Positional encodings at scale {plan.scale}", "", plan.notes, ""]
    lines += [
        "## Dev scores",
        "",
        "| variant | positions | data | dev PPL | dev BLEU | params x10^6 | seeds | min/run | paper PPL | paper BLEU |",
        "|" + "---|" * 10,
    ]
    for variant in plan.variants:
        found = grouped.get(variant.name, [])
        corpus = "grammar, pairs <= L tokens" if variant.group == "length" else "table2 base row"
        cells = [
            variant.name,
            variant.overrides["model.positional_encoding"],
            corpus,
            format_metric([record["dev_perplexity"] for record in found], 2),
            format_metric([record["dev_bleu"] for record in found], 1),
            format_metric([record["params"] / 1e6 for record in found], 2),
            len(found),
            format_metric([record["train_seconds"] / 60 for record in found], 1),
            variant.reported.get("dev_perplexity", "-"),
            variant.reported.get("dev_bleu", "-"),
        ]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    length_variants = [variant for variant in plan.variants if variant.group == "length"]
    length_records = [record for variant in length_variants for record in grouped.get(variant.name, [])]
    if length_records:
        names = list(bucket_series(length_records, "bleu"))
        sizes = {
            bucket["name"]: bucket["sentences"] for r in length_records for bucket in r["length_buckets"]
        }
        limit = length_records[0]["length_limit"]
        lines += [
            "",
            f"## BLEU per source length (tokens, EOS included; trained on <= {limit}), truncated inputs in %",
            "",
            "| variant | " + " | ".join(f"{name} ({sizes[name]} sent.)" for name in names) + " |",
            "|" + "---|" * (len(names) + 1),
        ]
        refusals: dict[str, None] = {}
        uncapped: dict[str, list[str]] = defaultdict(list)
        for variant in length_variants:
            found = grouped.get(variant.name, [])
            if not found:
                continue
            rows = [(variant.name, "bleu", "truncated_share")]
            if variant.overrides["model.positional_encoding"] == "learned":
                rows.append((f"{variant.name}, table cut to L", "cut_bleu", "cut_truncated_share"))
            for label, bleu_key, share_key in rows:
                bleu, share = bucket_series(found, bleu_key), bucket_series(found, share_key)
                cells = [f"{format_metric(bleu[name], 1)} ({_percent(share[name])}%)" for name in names]
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
            for record in found:
                if record.get("learned_position_error"):
                    refusals[record["learned_position_error"]] = None
                for bucket in record["length_buckets"]:
                    if "cut_uncapped_error" in bucket:
                        outcome = (
                            f"`{bucket['cut_uncapped_error']}`"
                            if bucket["cut_uncapped_error"]
                            else "no error"
                        )
                        if bucket["name"] not in uncapped[outcome]:
                            uncapped[outcome].append(bucket["name"])
        if refusals or uncapped:
            lines += [
                "",
                "How the library handles inputs beyond a learned table of L rows (row 'table cut to L'): the "
                "Translator truncates every input to L tokens, EOS included (the share in brackets), and the BLEU "
                "shown caps outputs at L tokens (decode.max_length = L).",
                "",
                *[f"- the model refuses a longer input: `{message}`" for message in refusals],
                *[
                    f"- buckets {', '.join(buckets)} translated with the run's decode settings (outputs up to the "
                    f"source length + max_length_offset, not capped at L): {outcome}"
                    for outcome, buckets in uncapped.items()
                ],
            ]
    lines += [
        "",
        "## Permutation probe: 'The X verbs the Y.' against 'The Y verbs the X.'",
        "",
        "| variant | pairs | encoder max abs diff under the permutation (max over seeds) | encoder max abs | "
        "translation changed "
        "| exact (original) | exact (swapped) |",
        "|" + "---|" * 7,
    ]
    for variant in plan.variants:
        found = [record for record in grouped.get(variant.name, []) if record.get("probe_pairs")]
        if not found:
            continue
        cells = [
            variant.name,
            found[0]["probe_pairs"],
            f"{max(record['probe_encoder_max_abs_diff'] for record in found):.1e}",
            format_metric([record["probe_encoder_max_abs"] for record in found], 2),
            _percent([record["probe_translation_changed"] for record in found]) + "%",
            _percent([record["probe_exact_original"] for record in found]) + "%",
            _percent([record["probe_exact_swapped"] for record in found]) + "%",
        ]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def plot(plan: ExperimentPlan, records: list[dict[str, Any]], output_dir: Path) -> list[Path]:
    """Plot BLEU against source length bucket per encoding (one PNG).

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its results.
    output_dir : Path
        Where ``positions.png`` goes.

    Returns
    -------
    list of Path
        The written figure, or nothing before a length run has finished.

    Notes
    -----
    The first bucket is the trained range; a vertical line marks L. The learned table cut to L rows is
    drawn dashed: its inputs beyond L are truncated.
    """
    from matplotlib.figure import Figure

    from transformer.visualization.attention_plot import save_figure_atomically

    grouped = _by_variant(records)
    length_variants = [
        variant for variant in plan.variants if variant.group == "length" and variant.name in grouped
    ]
    if not length_variants:
        return []
    figure = Figure(figsize=(7, 4.5))
    axes = figure.subplots()
    names: list[str] = []
    for variant in length_variants:
        found = grouped[variant.name]
        series = [(variant.name, "bleu", "-")]
        if variant.overrides["model.positional_encoding"] == "learned":
            series.append((f"{variant.name} (table cut to L)", "cut_bleu", "--"))
        color = None
        for label, key, style in series:
            values = bucket_series(found, key)
            names = list(values)
            means = [
                sum(value for value in seeds if value is not None) / max(1, sum(v is not None for v in seeds))
                if any(value is not None for value in seeds)
                else float("nan")
                for seeds in values.values()
            ]
            (line,) = axes.plot(range(len(names)), means, style, marker="o", label=label, color=color)
            color = line.get_color()  # the cut table in the colour of its model
    axes.set_xticks(range(len(names)), names)
    axes.axvline(0.5, color="grey", linewidth=0.8)
    limit = grouped[length_variants[0].name][0].get("length_limit", "L")
    axes.set(
        title=f"Length generalisation (scale {plan.scale}; trained on <= {limit} tokens)",
        xlabel="source length bucket (BPE tokens, EOS included)",
        ylabel="BLEU",
    )
    axes.legend(fontsize=8)
    figure.tight_layout()
    path = output_dir / "positions.png"
    save_figure_atomically(figure, path)
    return [path]
