"""The attention-scoring experiment's settings: the scorings, the key widths, the scales and the plan."""

import functools
from typing import Any

from transformer.experiments.common.plan import ExperimentPlan, Variant, short_recipe, short_schedule

#: Scoring name -> model overrides.
SCORINGS = {
    "unscaled": {"model.attention_scoring": "dot_product", "model.attention_scaling": "none"},
    "sqrt": {"model.attention_scoring": "dot_product", "model.attention_scaling": "sqrt"},
    "linear": {"model.attention_scoring": "dot_product", "model.attention_scaling": "linear"},
    "additive": {"model.attention_scoring": "additive", "model.attention_scaling": "sqrt"},
}
#: What each scoring computes, for tables and legends.
SCORING_LABELS = {
    "unscaled": "q.k",
    "sqrt": "q.k / sqrt(d_k)",
    "linear": "q.k / d_k",
    "additive": "additive",
}
KEY_WIDTHS = (4, 8, 16, 32, 64, 128, 256)
#: Training steps per run at the cpu scale (see the calibration in the module docstring).
CPU_STEPS = 400
#: Validation pairs at the cpu scale (BLEU is decoded on all of them with beam 4).
CPU_VALID_PAIRS = 500
#: Validation pairs the attention statistics are measured on (the first ones of the split).
STATISTICS_PAIRS = 200
#: Token budget of the statistics' batches.
STATISTICS_MAX_TOKENS = 1024


def scale_settings(scale: str) -> dict[str, Any]:
    """Give the base run configuration of a scale.

    Parameters
    ----------
    scale : str
        ``tiny``, ``cpu``, ``gpu`` or ``paper``.

    Returns
    -------
    dict of str to Any
        The base configuration, nested like a YAML file; every variant changes only the scoring, d_k and d_v.

    Raises
    ------
    ValueError
        For another scale.

    Notes
    -----
    The CPU scale's steps come from the calibration in the module docstring.
    """
    if scale == "tiny":
        return {
            "model": {
                "vocab_size": 120,
                "d_model": 32,
                "d_ff": 64,
                "num_heads": 4,
                "num_encoder_layers": 1,
                "num_decoder_layers": 1,
                "dropout": 0.0,
                "norm_first": True,
            },
            "data": {
                "corpus": "synthetic",
                "synthetic_train_pairs": 300,
                "synthetic_valid_pairs": 12,
                "synthetic_test_pairs": 12,
                "max_len": 64,
            },
            "train": {**short_recipe(4, max_tokens=512, peak=0.002, warmup=1, checkpoints=2), "threads": 1},
            "decode": {"beam_size": 2, "max_length_offset": 5},
        }
    if scale == "cpu":
        steps = CPU_STEPS
        return {
            "model": {
                "vocab_size": 1000,
                "d_model": 128,
                "d_ff": 512,
                "num_heads": 4,
                "num_encoder_layers": 2,
                "num_decoder_layers": 2,
                "dropout": 0.0,
                "norm_first": True,
            },
            "data": {
                "corpus": "synthetic",
                "synthetic_train_pairs": 20000,
                "synthetic_valid_pairs": CPU_VALID_PAIRS,
                "synthetic_test_pairs": 500,
                "max_len": 64,
            },
            "train": short_recipe(steps, max_tokens=1024, peak=0.003, warmup=steps // 10, checkpoints=2),
            "decode": {"beam_size": 4, "length_penalty": 0.6},
        }
    if scale == "gpu":
        steps = 2800
        return {
            "model": {
                "vocab_size": 10000,
                "d_model": 256,
                "d_ff": 1024,
                "num_heads": 8,
                "num_encoder_layers": 4,
                "num_decoder_layers": 4,
                "norm_first": True,
            },
            "data": {"corpus": "multi30k", "source_lang": "en", "target_lang": "de", "max_len": 100},
            "train": short_recipe(steps, max_tokens=4096, peak=0.002, warmup=steps // 10, checkpoints=2),
            "decode": {"beam_size": 4, "length_penalty": 1.0, "length_penalty_form": "power"},
        }
    if scale == "paper":
        return {
            "model": {"vocab_size": 37000, "norm_first": False},
            "data": {"corpus": "wmt14-en-de", "token_store": True, "max_len": 256},
            "train": {
                "max_steps": 100_000,
                "max_minutes": None,
                "max_tokens": 25000,
                "warmup_steps": 4000,
                "label_smoothing": 0.1,
                "validate_every": 5000,
                "checkpoint_every": 5000,
                "keep_checkpoints": 2,
            },
            "decode": {"beam_size": 4, "length_penalty": 0.6, "length_penalty_form": "gnmt"},
        }
    raise ValueError(f"--scale {scale}: attention-scoring runs at scale tiny, cpu, gpu or paper")


def variant_name(scoring: str, d_k: int) -> str:
    """Name the variant of one scoring and key width.

    Parameters
    ----------
    scoring : str
        A key of :data:`SCORINGS`.
    d_k : int
        The key width.

    Returns
    -------
    str
        ``SCORING-dkN``, e.g. ``sqrt-dk64``.

    Notes
    -----
    Also the name of the run's directory (with the seed appended).
    """
    return f"{scoring}-dk{d_k}"


def build_plan(scale: str) -> ExperimentPlan:
    """Build the experiment at a scale: four scorings times seven key widths.

    Parameters
    ----------
    scale : str
        ``tiny``, ``cpu``, ``gpu`` or ``paper``.

    Returns
    -------
    ExperimentPlan
        28 variants, scoring-major (all of ``unscaled``, then ``sqrt``, ...), d_k ascending within each;
        scored on the last checkpoint alone.

    Notes
    -----
    Each variant sets ``attention_scoring``, ``attention_scaling``, ``d_k`` and ``d_v`` explicitly, so the
    recorded configuration of a run says what was trained even if a default changes later.
    """
    base = scale_settings(scale)
    variants = [
        Variant(
            variant_name(scoring, d_k),
            {**overrides, "model.d_k": d_k, "model.d_v": d_k},
            group=scoring,
        )
        for scoring, overrides in SCORINGS.items()
        for d_k in KEY_WIDTHS
    ]
    model, train = base["model"], base["train"]
    notes = (
        f"Scale {scale}: d_model {model.get('d_model', 512)}, {model.get('num_heads', 8)} heads, d_v = d_k, "
        f"{train['max_steps']} steps per run, everything else fixed; scored on the last checkpoint. "
        "Dev loss is the NLL per target BPE token. Statistics are measured on the first "
        f"{STATISTICS_PAIRS} validation pairs, in eval mode, averaged over the layers of all three attention "
        "kinds; 'init' is the same configuration and seed before training."
    )
    # --set train.max_steps brings warm-up, cool-down and the two checkpoints along (short_recipe's rule).
    schedule = None if scale == "paper" else functools.partial(short_schedule, checkpoints=2)
    return ExperimentPlan(
        "attention-scoring", scale, base, variants, average_last=1, notes=notes, schedule=schedule
    )
