"""The rnn-baseline experiment's settings: the two variants, the scales and what the measure hook does at each."""

from dataclasses import dataclass
from typing import Any

from transformer.experiments.common.plan import ExperimentPlan, Variant
from transformer.experiments.scale_recipes import grammar_data, multi30k_data, multi30k_decode

#: Dev BLEU levels whose first-reached training time the table reports (greedy search, like the curve).
BLEU_LEVELS = (10.0, 20.0, 30.0, 35.0)
#: Checkpoints averaged for the final score: the configs' runs average their last 3 (README, BENCHMARKS.md).
AVERAGE_LAST = 3
#: Steps between checkpoints (the curve's resolution) at the cpu and gpu scales; the configs save every 250.
CHECKPOINT_EVERY = 100
#: Training time beyond the budget, as a share of it, that the table flags. A run stops at the first step past
#: its budget, so it overshoots by a step and at most one validation (seconds at the cpu scale); a run resumed
#: after an interruption trains another whole budget on top of its checkpoint's time.
BUDGET_TOLERANCE = 0.05


@dataclass(frozen=True)
class MeasureSettings:
    """What the measure hook does at one scale.

    Parameters
    ----------
    flop_batches : int
        Training batches whose FLOPs are counted (the run's first ones).
    decode_threads : int
        CPU threads for the curve's scoring and the timed decoding, the same for both models (capped at the
        CPUs the process may use).

    Notes
    -----
    Eight batches of 4,096 tokens are about 150 sentences of each length bucket the sampler shuffled in: the
    FLOPs per token of the Transformer vary with sentence length only through attention (a few percent at
    Multi30k's lengths), the LSTM's hardly at all.
    """

    flop_batches: int
    decode_threads: int


MEASURE_SETTINGS = {
    "tiny": MeasureSettings(flop_batches=2, decode_threads=1),
    "cpu": MeasureSettings(flop_batches=8, decode_threads=2),
    "gpu": MeasureSettings(flop_batches=8, decode_threads=2),
}


def multi30k_plan_parts() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Give the base configuration and the two variants' keys at the cpu and gpu scales.

    Returns
    -------
    base : dict of str to Any
        What ``configs/multi30k.yaml`` and ``configs/multi30k-rnn.yaml`` share (data, batch, budget, schedule
        length, search), with the curve's checkpoint interval.
    variants : dict of str to dict
        ``"transformer"`` and ``"rnn"``: the dotted keys in which each config differs (the model and the
        optimizer settings).

    Notes
    -----
    Values copied from the two files, which the package does not ship (they live in the repository's
    ``configs/``); the data and search sections are the Multi30k recipe's
    (:mod:`transformer.experiments.scale_recipes`), which the files share.
    ``tests/experiments/test_rnn_baseline.py`` resolves both variants and compares them key by key with the
    files, so an edit to either file shows up there.
    """
    base = {
        "model": {"vocab_size": 10000},
        "data": multi30k_data(),
        "train": {
            "max_tokens": 4096,
            "max_steps": 2800,
            "max_minutes": 28,
            "peak_learning_rate": 0.002,
            "cooldown_steps": 1000,
            "label_smoothing": 0.1,
            "log_every": 50,
            "validate_every": 250,
            "checkpoint_every": CHECKPOINT_EVERY,
            "keep_checkpoints": 2800 // CHECKPOINT_EVERY + 2,  # every checkpoint, the final one included
        },
        "decode": multi30k_decode(),
    }
    transformer = {
        "model.d_model": 256,
        "model.d_ff": 1024,
        "model.num_heads": 4,
        "model.num_encoder_layers": 4,
        "model.num_decoder_layers": 4,
        "model.dropout": 0.3,
        "model.norm_first": True,
        "train.warmup_steps": 600,
    }
    rnn = {
        "model.architecture": "rnn",
        "model.embedding_dim": 384,
        "model.hidden_size": 384,
        "model.num_encoder_layers": 2,
        "model.num_decoder_layers": 2,
        "model.dropout": 0.3,
        "model.attention": "general",
        "model.input_feeding": True,
        "model.share_embeddings": True,
        "model.tie_output_projection": True,
        "train.warmup_steps": 200,
        "train.adam_beta2": 0.999,
        "train.adam_epsilon": 1.0e-8,
        "train.clip_norm": 5.0,
    }
    return base, {"transformer": transformer, "rnn": rnn}


def tiny_plan_parts() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Give the tiny scale's base configuration and variants: seconds per run, for tests.

    Returns
    -------
    base : dict of str to Any
        The built-in grammar corpus (300 training pairs, 12 validation pairs), 8 steps of 512 tokens, a
        one-minute budget 8 steps never reach, a checkpoint every 2 steps (all kept), fp32, one thread.
    variants : dict of str to dict
        A 1+1-layer Transformer of width 32 and a 1+1-layer LSTM of width 32, with the optimizer settings of
        the cpu scale's variants.

    Notes
    -----
    The same keys as :func:`multi30k_plan_parts`, so the tiny runs exercise every option the real ones set.
    """
    base = {
        "model": {"vocab_size": 120},
        "data": grammar_data(train_pairs=300, valid_pairs=12, test_pairs=12),
        "train": {
            "max_tokens": 512,
            "max_steps": 8,
            "max_minutes": 1.0,
            "peak_learning_rate": 0.002,
            "cooldown_steps": 3,
            "label_smoothing": 0.1,
            "log_every": 2,
            "validate_every": 4,
            "checkpoint_every": 2,
            "keep_checkpoints": 8,
            "threads": 1,
            "precision": "fp32",
        },
        "decode": {**multi30k_decode(), "max_length_offset": 5},
    }
    _, full = multi30k_plan_parts()
    transformer = {
        **full["transformer"],
        "model.d_model": 32,
        "model.d_ff": 64,
        "model.num_encoder_layers": 1,
        "model.num_decoder_layers": 1,
        "model.dropout": 0.1,
        "train.warmup_steps": 2,
    }
    rnn = {
        **full["rnn"],
        "model.embedding_dim": 32,
        "model.hidden_size": 32,
        "model.num_encoder_layers": 1,
        "model.num_decoder_layers": 1,
        "model.dropout": 0.1,
        "train.warmup_steps": 2,
    }
    return base, {"transformer": transformer, "rnn": rnn}


def build_plan(scale: str) -> ExperimentPlan:
    """Build the comparison at a scale.

    Parameters
    ----------
    scale : str
        ``tiny``, ``cpu`` or ``gpu``.

    Returns
    -------
    ExperimentPlan
        Variants ``transformer`` and ``rnn`` (each its own group), scored with the average of the last
        :data:`AVERAGE_LAST` checkpoints.

    Raises
    ------
    ValueError
        Naming ``--scale`` for ``paper`` or an unknown scale.

    Notes
    -----
    There is no ``paper`` scale: the comparison is the shipped Multi30k recipes', which have no paper-sized
    counterpart here.
    """
    if scale not in MEASURE_SETTINGS:
        raise ValueError(f"--scale {scale}: rnn-baseline runs at scale tiny, cpu or gpu")
    base, overrides = tiny_plan_parts() if scale == "tiny" else multi30k_plan_parts()
    variants = [Variant(name, keys, name) for name, keys in overrides.items()]
    train = base["train"]
    corpus = "the built-in grammar corpus" if scale == "tiny" else "Multi30k EN-DE"
    flop_batches = MEASURE_SETTINGS[scale].flop_batches
    notes = " ".join(
        [
            f"Scale {scale}: {corpus}, both models on one joint BPE vocabulary of",
            f"{base['model']['vocab_size']} pieces, {train['max_tokens']}-token batches, at most",
            f"{train['max_steps']} steps and {train['max_minutes']} minutes of training each (the learning",
            "rate anneals to zero at whichever comes first).",
            f"Dev BLEU: beam {base['decode']['beam_size']}, power length penalty 1, average of the last",
            f"{AVERAGE_LAST} checkpoints (saved every {train['checkpoint_every']} steps of the schedule, which a",
            "trainer that follows the clock under a binding time budget maps onto one every",
            f"{train['max_minutes'] * train['checkpoint_every'] / train['max_steps']:g} min).",
            "Curve and time to a BLEU level: greedy dev BLEU of every checkpoint against the training",
            "wall-clock time it records (validation and checkpoint writing included); a level's time is that",
            "of the first checkpoint at or above it.",
            f"Training FLOPs: FlopCounterMode on the run's first {flop_batches} training batches (forward,",
            "label-smoothed loss, backward; matrix products, a multiply-add counting 2; oneDNN off and math",
            "attention so that the LSTM and attention kernels are seen), per target token, times the target",
            "tokens trained.",
            "Decoding: the whole validation set, fp32, the same threads for both models.",
        ]
    )
    return ExperimentPlan("rnn-baseline", scale, base, variants, average_last=AVERAGE_LAST, notes=notes)
