"""The attention-scoring experiment's settings: the scorings, the key widths, the scales and the plan."""

import functools
from typing import Any

from transformer.experiments.common.plan import ExperimentPlan, Variant
from transformer.experiments.scale_recipes import (
    grammar_data,
    grammar_test_recipe,
    multi30k_recipe,
    short_recipe,
    short_schedule,
    wmt14_recipe,
)

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
#: The model of each short scale (the paper scale trains the paper's base model).
MODEL_SIZES = {
    "gpu": {"d_model": 256, "d_ff": 1024, "num_heads": 8, "num_encoder_layers": 4, "num_decoder_layers": 4},
    "cpu": {"d_model": 128, "d_ff": 512, "num_heads": 4, "num_encoder_layers": 2, "num_decoder_layers": 2},
    "tiny": {"d_model": 32, "d_ff": 64, "num_heads": 4, "num_encoder_layers": 1, "num_decoder_layers": 1},
}
#: Training steps per run at the cpu scale (see the calibration in the package docstring).
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
    ``paper`` and ``gpu`` train the corpus recipes of :mod:`transformer.experiments.scale_recipes` (the
    ``gpu`` model as Table 2's: d_model 256, 8 heads, 4+4 layers); ``cpu`` trains the grammar, with the steps
    of the calibration in the package docstring. Every short scale keeps two checkpoints over its run.
    """
    if scale == "paper":
        return wmt14_recipe()
    if scale == "gpu":
        base = multi30k_recipe("gpu", checkpoints=2)
        base["model"].update(MODEL_SIZES["gpu"])
        return base
    if scale == "cpu":
        return {
            "model": {"vocab_size": 1000, **MODEL_SIZES["cpu"], "dropout": 0.0, "norm_first": True},
            "data": grammar_data(train_pairs=20000, valid_pairs=CPU_VALID_PAIRS, test_pairs=500),
            "train": short_recipe(CPU_STEPS, max_tokens=1024, peak=0.003, checkpoints=2),
            "decode": {"beam_size": 4, "length_penalty": 0.6},
        }
    if scale == "tiny":
        base = grammar_test_recipe(checkpoints=2)
        base["model"].update({**MODEL_SIZES["tiny"], "dropout": 0.0})
        return base
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
