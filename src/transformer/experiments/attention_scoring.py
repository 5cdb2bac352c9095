"""``transformer experiment attention-scoring``: unscaled, 1/sqrt(d_k), 1/d_k and additive attention against d_k.

Section 3.2.1 of the paper makes three claims it gives no numbers for: additive attention beats unscaled dot
products for larger d_k; unscaled dot products "grow large in magnitude, pushing the softmax function into
regions where it has extremely small gradients"; and 1/sqrt(d_k) fixes that. (The user's notes add that 1/d_k
would give "excessively small values and poor gradient behavior".) This experiment trains one model per
scoring and key width, with everything else fixed, and reports:

* dev loss (NLL per target token), perplexity and BLEU against d_k, one line per scoring (``plot``);
* at initialisation and after training, per attention kind and averaged over layers: the variance of the raw
  q . k, the mean softmax entropy, the share of saturated rows (largest probability > 0.99) and the norm of
  the gradient reaching the attention logits (:mod:`transformer.experiments.attention_statistics`).

Variants: scorings ``unscaled`` (``attention_scaling: none``), ``sqrt`` (the paper's), ``linear`` (1/d_k) and
``additive``, times d_k in {4, 8, 16, 32, 64, 128, 256}, named ``SCORING-dkN`` and grouped by scoring (so
``--only additive`` runs one scoring, ``--only sqrt-dk64`` one run). d_v is set equal to d_k; d_model, the
number of heads (4) and everything else stay fixed, so d_k may exceed d_model / h (the projections then widen:
``h * d_k`` may be larger than d_model, which the model allows). Since d_v follows d_k, the value and output
projections widen with it too: the parameter count grows with d_k for every scoring alike (the table shows it).

Reading the statistics at initialisation: section 3.2.1 assumes q and k have components of unit variance, so
that Var(q . k) = d_k. Here the projections are Xavier-uniform over all heads at once (d_model inputs,
h * d_k outputs), so with unit-variance (layer-normalised) inputs a component of q has variance
2 d_model / (d_model + h d_k), and Var(q . k) = d_k (2 d_model / (d_model + h d_k))^2: d_k only at
d_k = d_model / h, and *falling* beyond it. At the cpu scale it measured 13, 21, 28, 31, 27, 20 and 12.6
for d_k = 4 ... 256 (100 validation pairs, seed 1), so unscaled scores saturate most at d_k = 32 at
initialisation (13% of rows); the growth with d_k that the paper describes appears, if at all, through
training.

Scales:

* ``cpu`` trains on the built-in English-German grammar (``data.corpus: synthetic``, as
  ``configs/quickstart.yaml``): it is noise-free, its sentences are short and a 2+2-layer model of width 128
  learns it within a few hundred steps on two cores, so differences between scorings show in BLEU and
  perplexity instead of drowning in the noise of a Multi30k model trained for two minutes, far from
  converged. (``--set data.corpus=multi30k --set data.mirror=DIR --set model.vocab_size=8000`` runs the
  same grid on Multi30k, at several times the cost per step; the ``gpu`` scale is the place for it.)
* ``gpu``: Multi30k, d_model 256, 8 heads, 4+4 layers, as table2's gpu scale.
* ``paper``: WMT14 English-German from the corpus registry (``data.corpus: wmt14-en-de``), the base model's size.
  Additive scoring keeps a (batch, heads, query, key, d_k) tensor per layer: at d_k = 256 and the paper's
  batch it needs far more memory than one GPU has; lower ``train.max_tokens`` with ``train.accumulate``.
* ``tiny``: a few steps on 300 grammar pairs, for tests.

CPU calibration, 2026-11-23 (``grep -m1 'model name' /proc/cpuinfo``: "Intel(R) Xeon(R) Processor", 2 cores,
AVX-512 without AMX, so training runs in fp32). Measured with one thread while another experiment used the
other core (the process got 97-99% of its core): 40 steps per variant, seconds per training step after
the first five,

==============  =====  =====  =====  =====  =====  =====  =====
d_k               4      8      16     32     64     128    256
==============  =====  =====  =====  =====  =====  =====  =====
sqrt, linear    0.073    -    0.075  0.089  0.118  0.179  0.354
additive        (0.18) 0.103  0.132  0.242  0.49   1.10   2.96
==============  =====  =====  =====  =====  =====  =====  =====

(dot products at d_k 8 not timed; additive d_k 4 timed while the process got about two thirds of its core,
so about 0.09 s at a full core). Two full runs of 500 steps: ``sqrt-dk32``
44.6 s of training, dev BLEU 66.0, 2.7 s of scoring (perplexity, beam-4 BLEU on the 500 validation pairs,
the statistics at initialisation and after training); ``unscaled-dk256`` dev BLEU 1.6, and its steps slowed
from 0.29 s to 1.1 s as training went on: its softmax saturates (89% of rows above 0.99 at the end) and the
vanishing probabilities and gradients are denormal floats, which this CPU computes slowly (a forward and
backward pass of the trained model took 3.1x as long as with ``torch.set_flush_denormal(True)``). Adding
up, with unscaled d_k >= 64 at about three times their early speed, one step of each of the 28 variants
costs about 9.3 s, plus about 5 minutes of data generation and scoring for all runs: **400 steps** make
about 67 minutes at one thread per run (the trainer measures whether two threads are faster on an idle
machine and uses them if so). Additive scoring at d_k = 256 alone is 20 of those minutes.
"""

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from transformer.config.experiment import ExperimentConfig
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.experiments.attention_scoring_verdicts import (
    render_verdicts as render_verdicts,  # EXPERIMENTS.md
)
from transformer.experiments.attention_statistics import STATISTICS, measure_pairs
from transformer.experiments.plan import ExperimentPlan, Variant, run_config, short_recipe, short_schedule
from transformer.experiments.results import format_metric, records_by_variant
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

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
#: The statistics of the table and the plots, with their headings.
STATISTIC_HEADINGS = {
    "qk_variance": "Var(q.k)",
    "entropy": "entropy (nats)",
    "saturated_share": "saturated rows",
    "logit_grad_norm": "|dL/dlogits|",
}


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


def measure(
    *,
    model: Transformer,
    tokenizer: TextTokenizer,
    pairs: Sequence[tuple[str, str]],
    config: ExperimentConfig,
    run_dir: Path,
    **_: Any,
) -> dict[str, Any]:
    """Measure the attention statistics of a trained run and of its model at initialisation.

    Parameters
    ----------
    model : Transformer
        The scored (trained) model.
    tokenizer : TextTokenizer
        Its tokenizer.
    pairs : sequence of (str, str)
        The validation pairs.
    config : ExperimentConfig
        The run's configuration.
    run_dir : Path
        The run directory (unused).
    **_ : Any
        Further inputs a newer worker may pass.

    Returns
    -------
    dict of str to Any
        ``trained_STAT`` and ``init_STAT`` for every statistic (averaged over all layers), ``..._STAT_KIND``
        per attention kind, ``trained_attention_layers`` and ``init_attention_layers`` (per layer), and
        ``statistics_pairs``.

    Notes
    -----
    The initial model is rebuilt as the trainer builds it (``torch.manual_seed(train.seed)`` then
    ``Transformer(config.model)``), so it has the very weights the run started from, without the run having
    to keep a checkpoint of step 0; the global random state is restored afterwards. The loss whose gradient is
    measured uses the run's label smoothing.
    """
    smoothing = config.train.label_smoothing
    selected = list(pairs)[:STATISTICS_PAIRS]
    trained = measure_pairs(model, tokenizer, selected, smoothing, max_tokens=STATISTICS_MAX_TOKENS)
    if not isinstance(config.model, TransformerConfig):
        architecture = config.model.architecture
        raise ValueError(f"attention statistics are a Transformer's; model.architecture is {architecture!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.train.seed)
        initial = Transformer(config.model)
    initial.to(next(model.parameters()).device)
    at_init = measure_pairs(initial, tokenizer, selected, smoothing, max_tokens=STATISTICS_MAX_TOKENS)
    return {**at_init.to_dict("init_"), **trained.to_dict("trained_"), "statistics_pairs": len(selected)}


def _values(found: list[dict[str, Any]], key: str, factor: float = 1.0) -> list[float | None]:
    """Collect one metric of the seeds of a variant (None where a record lacks it)."""
    return [None if record.get(key) is None else float(record[key]) * factor for record in found]


def _grid(grouped: dict[str, list[dict[str, Any]]], key: str, digits: int) -> list[str]:
    """Build a Markdown grid of one metric: a row per scoring, a column per d_k."""
    lines = ["| scoring | " + " | ".join(f"d_k={d_k}" for d_k in KEY_WIDTHS) + " |"]
    lines.append("|---|" + "---|" * len(KEY_WIDTHS))
    for scoring in SCORINGS:
        cells = [
            format_metric(_values(grouped.get(variant_name(scoring, d_k), []), key), digits)
            for d_k in KEY_WIDTHS
        ]
        lines.append(f"| {SCORING_LABELS[scoring]} | " + " | ".join(cells) + " |")
    return lines


def render_table(plan: ExperimentPlan, records: list[dict[str, Any]]) -> str:
    """Print the results: BLEU and perplexity grids, then every run's figures and attention statistics.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its ``results.jsonl`` records.

    Returns
    -------
    str
        Markdown: a dev BLEU grid and a dev perplexity grid (scoring x d_k), a table of dev loss,
        perplexity, BLEU, parameters, seeds and minutes per variant, and a table of the four attention
        statistics at initialisation and after training (``init -> trained``).

    Notes
    -----
    Values are means over seeds (``± spread`` with several); runs not finished yet show ``-``. Statistics
    are averages over all attention layers; the per-kind and per-layer values are in ``results.jsonl``.
    """
    grouped = records_by_variant(records)
    lines = [f"# Attention scoring against d_k at scale {plan.scale}", "", plan.notes, ""]
    lines += ["## Dev BLEU", "", *_grid(grouped, "dev_bleu", 1), ""]
    lines += ["## Dev perplexity (per BPE token)", "", *_grid(grouped, "dev_perplexity", 2), ""]
    lines += ["## Every run", ""]
    lines.append(
        "| variant | scoring | d_k | d_v | steps | dev loss | dev PPL | dev BLEU | params x10^6 | seeds | min/run |"
    )
    lines.append("|" + "---|" * 11)
    for variant in plan.variants:
        model, train = (config := run_config(plan, variant, 1))["model"], config["train"]
        found = grouped.get(variant.name, [])
        cells = [
            variant.name,
            SCORING_LABELS[variant.group],
            model["d_k"],
            model["d_v"],
            train["max_steps"],
            format_metric(_values(found, "dev_nll"), 3),
            format_metric(_values(found, "dev_perplexity"), 2),
            format_metric(_values(found, "dev_bleu"), 1),
            format_metric(_values(found, "params", 1e-6), 2),
            len(found),
            format_metric(_values(found, "worker_seconds", 1 / 60), 1),
        ]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    lines += ["", "## Attention statistics, at initialisation -> after training (mean over layers)", ""]
    lines.append("| variant | " + " | ".join(STATISTIC_HEADINGS[name] for name in STATISTICS) + " |")
    lines.append("|---|" + "---|" * len(STATISTICS))
    for variant in plan.variants:
        found = grouped.get(variant.name, [])
        cells = [variant.name]
        for name in STATISTICS:
            digits = 3 if name in ("entropy", "saturated_share") else 4
            before = format_metric(_values(found, f"init_{name}"), digits)
            after = format_metric(_values(found, f"trained_{name}"), digits)
            cells.append("-" if before == after == "-" else f"{before} -> {after}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _mean_over_seeds(found: list[dict[str, Any]], key: str) -> float | None:
    """Average a metric over seeds, None without a value."""
    values = [float(record[key]) for record in found if record.get(key) is not None]
    return sum(values) / len(values) if values else None


def _draw_lines(axes: Any, grouped: dict[str, list[dict[str, Any]]], key: str) -> None:
    """Plot one metric against d_k, a line per scoring (finished runs only)."""
    for scoring in SCORINGS:
        points = [
            (d_k, value)
            for d_k in KEY_WIDTHS
            if (value := _mean_over_seeds(grouped.get(variant_name(scoring, d_k), []), key)) is not None
        ]
        if points:
            axes.plot(
                [d for d, _ in points], [v for _, v in points], marker="o", label=SCORING_LABELS[scoring]
            )
    axes.set_xscale("log", base=2)
    axes.set_xticks(KEY_WIDTHS, [str(d_k) for d_k in KEY_WIDTHS])
    axes.set_xlabel("d_k")


def plot(plan: ExperimentPlan, records: list[dict[str, Any]], output_dir: Path) -> list[Path]:
    """Plot dev BLEU and perplexity against d_k, and the attention statistics at init and after training.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its results.
    output_dir : Path
        Where ``attention-scoring.png`` and ``attention-scoring-statistics.png`` go.

    Returns
    -------
    list of Path
        The two figures.

    Notes
    -----
    d_k is on a log2 axis, one line per scoring, means over seeds. The statistics figure has a row per
    statistic (saturated share, entropy, q . k variance and logit gradient norm, the last two on log axes)
    and a column each for initialisation and after training, with shared y axes so the columns compare.
    """
    from matplotlib.figure import Figure

    from transformer.visualization.attention_plot import save_figure_atomically

    grouped = records_by_variant(records)
    figure = Figure(figsize=(11, 4.5))
    bleu, perplexity = figure.subplots(1, 2)
    _draw_lines(bleu, grouped, "dev_bleu")
    bleu.set(title=f"dev BLEU (scale {plan.scale})", ylabel="BLEU")
    _draw_lines(perplexity, grouped, "dev_perplexity")
    perplexity.set(title=f"dev perplexity (scale {plan.scale})", ylabel="perplexity per BPE token")
    bleu.legend(fontsize=8)
    figure.tight_layout()
    scores_path = output_dir / "attention-scoring.png"
    save_figure_atomically(figure, scores_path)

    order = ("saturated_share", "entropy", "qk_variance", "logit_grad_norm")
    figure = Figure(figsize=(11, 13))
    grid = figure.subplots(len(order), 2, sharey="row")
    for row, name in enumerate(order):
        for column, stage in enumerate(("init", "trained")):
            axes = grid[row][column]
            _draw_lines(axes, grouped, f"{stage}_{name}")
            axes.set(
                title=f"{STATISTIC_HEADINGS[name]}, {'at initialisation' if stage == 'init' else 'trained'}"
            )
            if name in ("qk_variance", "logit_grad_norm"):
                axes.set_yscale("log")
    grid[0][0].legend(fontsize=8)
    figure.tight_layout()
    statistics_path = output_dir / "attention-scoring-statistics.png"
    save_figure_atomically(figure, statistics_path)
    return [scores_path, statistics_path]
