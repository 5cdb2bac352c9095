"""The positions experiment's settings: the encodings, the length group per scale and the plan."""

import copy
from dataclasses import dataclass
from typing import Any

from transformer.config.experiment import experiment_from_dict
from transformer.experiments.common.plan import ExperimentPlan, Variant, flatten
from transformer.experiments.scale_recipes import grammar_data, short_recipe
from transformer.experiments.table2.settings import scale_settings, scaled_row, table_rows

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
    settings = scale_settings(scale)
    base: dict[str, Any] = copy.deepcopy(settings["base"])
    name, _, model, smoothing, _, _ = table_rows()[0]
    assert name == "base"
    base.setdefault("model", {}).update(scaled_row(model, settings["width"], settings["layers"]))
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
    held_out = 500 if scale != "tiny" else 12
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
            **grammar_data(size.train_pairs, valid_pairs=held_out, test_pairs=held_out),
            "source_lang": "en",
            "target_lang": "de",
            "max_len": size.limit,
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
