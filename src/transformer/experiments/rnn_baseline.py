"""``transformer experiment rnn-baseline``: the Transformer against the attentional LSTM it replaced.

The paper's claim (section 6.1 and its training-cost table): better quality "at a fraction of the training
cost" of the recurrent and convolutional models before it. Issue #17 asks for that comparison at a size this
project trains: the shipped Multi30k Transformer (``configs/multi30k.yaml``, 9.9M parameters) against the
recurrent baseline (``configs/multi30k-rnn.yaml``: a bidirectional LSTM encoder, an LSTM decoder with
Luong's "general" attention and input feeding, 9.6M parameters), on the same data, the same joint BPE
vocabulary (the runner learns it once for both), the same 4,096-token batches, the same 28-minute budget and
the same search (beam 4, power length penalty 1).

Variants ``transformer`` and ``rnn`` carry the two configs' values (a test compares them with the files);
only ``train.checkpoint_every`` (100 steps; the configs save every 250) and ``train.keep_checkpoints`` (all of
them) change, so that the run leaves a time-to-quality curve on disk. Per run, besides the worker's dev BLEU
(beam 4, the average of the last :data:`AVERAGE_LAST` checkpoints, as the configs' runs are scored; 100 steps
apart here, 250 there), the measure hook records:

* **the curve**: greedy dev BLEU of every kept checkpoint against the training seconds, step and target
  tokens its ``trainer_state.json`` records (:mod:`transformer.experiments.quality_curve`); greedy, not beam
  4, to keep scoring 30 checkpoints short (greedy scores about 1.7 BLEU under beam 4 for the shipped
  Transformer, BENCHMARKS.md); and, from it, the training time at which each model first reaches dev BLEU
  :data:`BLEU_LEVELS` (or "not reached");
* **training FLOPs**: counted with ``FlopCounterMode`` on the run's first training batches (forward, loss,
  backward; :mod:`transformer.experiments.training_flops`), per target token, times the target tokens the run
  trained on;
* **decoding speed**: sentences and output tokens per second on the whole validation set, greedy and beam 4,
  fp32, the same thread count for both models (:mod:`transformer.experiments.decode_speed`);
* the precision and thread count the trainer chose (``precision: auto``, ``threads: null``), read back from
  the autotuning cache: on a CPU with AMX a model that gains from bf16 trains several times faster.

Scales: ``cpu`` (the configs as shipped; two 28-minute trainings, then scoring), ``gpu`` (the same
configurations: on a GPU both finish their 2,800 steps well inside the budget, so the curves compare the time
each takes over the same schedule), ``tiny`` (the built-in grammar corpus, 8 steps per model, for tests).

Timings are wall-clock: run on a quiet machine with ``--parallel 1`` (the default), so each training has the
machine to itself. A run interrupted and resumed trains for another ``max_minutes`` (the trainer's budget
counts per invocation), which the table flags.
"""

import dataclasses
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from transformer.architectures import SequenceModel
from transformer.autotune.model_tuning import tune_model
from transformer.autotune.thread_probe import usable_cpus
from transformer.config import ExperimentConfig
from transformer.data.text_tokenizer import TextTokenizer
from transformer.decoding.translator import Translator
from transformer.device import resolve_device
from transformer.evaluation.bleu import score_translations
from transformer.experiments.decode_speed import measure_decode_speed
from transformer.experiments.plan import ExperimentPlan, Variant
from transformer.experiments.quality_curve import CurvePoint, checkpoint_curve, first_reaching
from transformer.experiments.results import format_metric
from transformer.experiments.training_flops import FlopCount, count_training_flops, first_training_batches

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
    ``configs/``); ``tests/experiments/test_rnn_baseline.py`` resolves both variants and compares them key by
    key with the files, so an edit to either file shows up there.
    """
    base = {
        "model": {"vocab_size": 10000},
        "data": {"corpus": "multi30k", "source_lang": "en", "target_lang": "de", "max_len": 100},
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
        "decode": {"beam_size": 4, "length_penalty": 1.0, "length_penalty_form": "power"},
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
        "data": {
            "corpus": "synthetic",
            "synthetic_train_pairs": 300,
            "synthetic_valid_pairs": 12,
            "synthetic_test_pairs": 12,
            "max_len": 64,
        },
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
        "decode": {
            "beam_size": 4,
            "length_penalty": 1.0,
            "length_penalty_form": "power",
            "max_length_offset": 5,
        },
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

    Notes
    -----
    Raises ValueError naming ``--scale`` for ``paper`` or an unknown scale: the comparison is the shipped
    Multi30k recipes', which have no paper-sized counterpart here.
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
            f"{AVERAGE_LAST} checkpoints (saved every {train['checkpoint_every']} steps).",
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


# --------------------------------------------------------------------------- measure


def _run_spec(run_dir: Path) -> dict[str, Any]:
    """Read the run's ``run.json`` (written by the runner): experiment, scale, variant, group."""
    from transformer.experiments.worker import RUN_FILE

    spec: dict[str, Any] = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    return spec


def measure(
    *,
    model: SequenceModel,
    tokenizer: TextTokenizer,
    pairs: Sequence[tuple[str, str]],
    config: ExperimentConfig,
    run_dir: Path,
) -> dict[str, Any]:
    """Measure a trained run: its quality curve, training FLOPs and decoding speed.

    Parameters
    ----------
    model : Transformer or RNNEncoderDecoder
        The scored model (the average of the last checkpoints).
    tokenizer : TextTokenizer
        Its tokenizer.
    pairs : sequence of (str, str)
        The validation pairs: the curve's test set and the timed decoding's input.
    config : ExperimentConfig
        The run's configuration.
    run_dir : Path
        The run directory: its checkpoints, ``run.json`` (the scale) and ``split_files.json``.

    Returns
    -------
    dict of str to Any
        ``curve`` (per checkpoint: ``checkpoint``, ``step``, ``elapsed_seconds``, ``tokens_seen``,
        ``train_flops``, ``greedy_bleu``), ``time_to_bleu`` (level -> ``seconds``, ``step``, ``train_flops``
        of the first checkpoint reaching it, or None), ``train_tokens``, ``train_flops``,
        ``train_flops_per_target_token``, ``flop_batches``, ``train_precision``, ``train_threads``, and per
        search (``greedy``, ``beam``) ``decode_SEARCH_sentences_per_second``,
        ``decode_SEARCH_tokens_per_second`` and ``decode_SEARCH_seconds``, with ``decode_beam_size``,
        ``decode_sentences`` and ``decode_threads``.

    Notes
    -----
    Called by the worker after its dev scoring. The curve's scores are cached in the run directory as they
    are computed (``quality_curve.json``), so a scoring interrupted and rerun continues where it stopped.
    """
    settings = MEASURE_SETTINGS[_run_spec(run_dir)["scale"]]
    threads = min(settings.decode_threads, usable_cpus())
    flops = _count_flops(model, tokenizer, config, run_dir, settings.flop_batches)
    sources, references = [source for source, _ in pairs], [target for _, target in pairs]
    greedy = dataclasses.replace(config.decode, beam_size=1, nbest=1)
    device = config.train.device

    def greedy_bleu(checkpoint_model: SequenceModel) -> float:
        translator = Translator(checkpoint_model, tokenizer, greedy, device=device)
        return score_translations(translator.translate(sources), references).bleu

    training = _training_settings(config)  # before setting the threads: the tuning applies its own
    torch.set_num_threads(threads)
    metrics = {
        **training,
        **curve_metrics(checkpoint_curve(run_dir, greedy_bleu), flops.per_target_token),
        "train_flops_per_target_token": flops.per_target_token,
        "flop_batches": flops.batches,
        "decode_sentences": len(sources),
        "decode_threads": threads,
        "decode_beam_size": config.decode.beam_size,
    }
    for name, search in (("greedy", greedy), ("beam", config.decode)):
        speed = measure_decode_speed(Translator(model, tokenizer, search, device=device), sources, threads)
        metrics[f"decode_{name}_sentences_per_second"] = speed.sentences_per_second
        metrics[f"decode_{name}_tokens_per_second"] = speed.tokens_per_second
        metrics[f"decode_{name}_seconds"] = speed.seconds
    return metrics


def _count_flops(
    model: SequenceModel, tokenizer: TextTokenizer, config: ExperimentConfig, run_dir: Path, batches: int
) -> FlopCount:
    """Count the training FLOPs of the run's first batches, rebuilt from its training files."""
    split_files = json.loads((run_dir / "split_files.json").read_text(encoding="utf-8"))
    first_batches = first_training_batches(
        (Path(split_files["train"][0]), Path(split_files["train"][1])),
        tokenizer,
        config.data.max_len,
        config.train.max_tokens,
        config.train.seed,
        batches,
        (model.config.pad_id, model.config.start_id, model.config.eos_id),
    )
    return count_training_flops(model, first_batches, config.train.label_smoothing, model.config.pad_id)


def _training_settings(config: ExperimentConfig) -> dict[str, Any]:
    """Read back the precision and threads the trainer resolved (the autotuning cache answers as it did)."""
    tuning = tune_model(
        config.model,
        resolve_device(config.train.device, option="train.device"),
        config.train.max_tokens,
        config.train.precision,
        config.train.threads,
    )
    return {
        "train_precision": tuning.precision or config.train.precision,
        "train_threads": tuning.threads or config.train.threads,
    }


def curve_metrics(curve: Sequence[CurvePoint], flops_per_token: float) -> dict[str, Any]:
    """Turn a run's scored checkpoints into its results fields.

    Parameters
    ----------
    curve : sequence of CurvePoint
        Greedy dev BLEU per checkpoint, by step.
    flops_per_token : float
        Training FLOPs per target token.

    Returns
    -------
    dict of str to Any
        ``curve`` (one dict per point, with ``greedy_bleu`` and ``train_flops``), ``time_to_bleu`` (each
        level of :data:`BLEU_LEVELS` as a string, e.g. ``"30"``, to the ``seconds``, ``step`` and
        ``train_flops`` of the first point at or above it, or None), and the last point's ``train_tokens`` and
        ``train_flops``.

    Notes
    -----
    The last point is the run's final checkpoint (the trainer always saves at the end), so its tokens are
    all the run trained on.
    """
    points = [
        {
            "checkpoint": point.checkpoint,
            "step": point.step,
            "elapsed_seconds": point.elapsed_seconds,
            "tokens_seen": point.tokens_seen,
            "train_flops": point.tokens_seen * flops_per_token,
            "greedy_bleu": point.score,
        }
        for point in curve
    ]
    time_to_bleu: dict[str, dict[str, float] | None] = {}
    for level in BLEU_LEVELS:
        reached = first_reaching(curve, level)
        time_to_bleu[f"{level:g}"] = (
            None
            if reached is None
            else {
                "seconds": reached.elapsed_seconds,
                "step": reached.step,
                "train_flops": reached.tokens_seen * flops_per_token,
            }
        )
    return {
        "curve": points,
        "time_to_bleu": time_to_bleu,
        "train_tokens": curve[-1].tokens_seen,
        "train_flops": curve[-1].tokens_seen * flops_per_token,
    }


# --------------------------------------------------------------------------- table and plot


def _by_variant(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Group result records by variant name, seeds in order."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in sorted(records, key=lambda record: int(record["seed"])):
        grouped[record["variant"]].append(record)
    return grouped


def _time_to_level(found: Sequence[dict[str, Any]], level: float) -> str:
    """Format the minutes to a BLEU level over seeds: the mean of the seeds that reached it, and how many."""
    reached = [record["time_to_bleu"][f"{level:g}"] for record in found]
    minutes = [item["seconds"] / 60 for item in reached if item is not None]
    if not found:
        return "-"
    if not minutes:
        return "not reached"
    steps = [item["step"] for item in reached if item is not None]
    cell = f"{format_metric(minutes, 1)} (step {round(sum(steps) / len(steps))})"
    return cell if len(minutes) == len(found) else f"{cell}, {len(minutes)} of {len(found)} seeds"


def _over_budget(record: dict[str, Any]) -> bool:
    """Tell whether a run trained longer than its budget (it was interrupted and resumed)."""
    budget = record["config"]["train"]["max_minutes"]
    return budget is not None and record["train_seconds"] > 60 * budget * (1 + BUDGET_TOLERANCE)


def render_table(plan: ExperimentPlan, records: list[dict[str, Any]]) -> str:
    """Print the comparison: quality and cost, time to quality, decoding speed, and the curves' points.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its ``results.jsonl`` records.

    Returns
    -------
    str
        Markdown: one table of parameters, training precision, steps, minutes, tokens, FLOPs and dev BLEU;
        one of the minutes (and step) to each BLEU level; one of decoding speed; the curves as text.

    Notes
    -----
    Means over seeds with their spread; ``-`` marks a model not run yet. A run whose training time exceeds
    its budget (it was interrupted and resumed, and the trainer's budget counts per invocation) is marked
    with ``*`` and explained under the table: its cost and times are not the budget's.
    """
    grouped = _by_variant(records)
    beam = plan.base["decode"]["beam_size"]
    lines = [f"# Transformer against the recurrent baseline at scale {plan.scale}", "", plan.notes, ""]
    lines += [
        "## Quality and training cost",
        "",
        "| model | params x10^6 | precision, threads | steps (stopped by) | train min | "
        "target tokens x10^6 | FLOPs per target token x10^6 | training FLOPs | "
        f"dev BLEU (beam {beam}, last {AVERAGE_LAST} averaged) | dev BLEU greedy, last checkpoint | seeds |",
        "|" + "---|" * 11,
    ]
    flagged = False
    for variant in plan.variants:
        found = grouped.get(variant.name, [])
        over = any(_over_budget(record) for record in found)
        flagged = flagged or over
        settings = sorted({f"{r['train_precision']}, {r['train_threads'] or '-'}" for r in found})
        cells = [
            variant.name + (" *" if over else ""),
            format_metric([record["params"] / 1e6 for record in found], 2),
            "; ".join(settings) or "-",
            format_metric([record["train_steps"] for record in found], 0)
            + (f" ({', '.join(sorted({r['stop_reason'] for r in found}))})" if found else ""),
            format_metric([record["train_seconds"] / 60 for record in found], 1),
            format_metric([record["train_tokens"] / 1e6 for record in found], 2),
            format_metric([record["train_flops_per_target_token"] / 1e6 for record in found], 1),
            _format_flops([record["train_flops"] for record in found]),
            format_metric([record["dev_bleu"] for record in found], 2),
            format_metric([record["curve"][-1]["greedy_bleu"] for record in found], 2),
            len(found),
        ]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    if flagged:
        lines += [
            "",
            f"\\* trained more than {BUDGET_TOLERANCE:.0%} longer than its budget: usually because it was "
            "interrupted and resumed (the trainer's max_minutes counts per invocation), else because its steps "
            "are long against the budget. Its times and cost are not the budget's; rerun it in a fresh "
            "--output-dir.",
        ]
    lines += _time_table(plan, grouped) + _speed_table(plan, grouped, beam) + _curve_lines(plan, grouped)
    return "\n".join(lines) + "\n"


def _format_flops(values: Sequence[float]) -> str:
    """Format FLOPs over seeds in scientific notation (mean, and the spread with several seeds)."""
    if not values:
        return "-"
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.2e}"
    spread = (sum((value - mean) ** 2 for value in values) / (len(values) - 1)) ** 0.5
    return f"{mean:.2e} ± {spread:.1e}"


def _time_table(plan: ExperimentPlan, grouped: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Lines of the time-to-quality table: minutes (and step) to each BLEU level per model."""
    lines = [
        "",
        "## Time to quality: training minutes until greedy dev BLEU first reaches a level (checkpoint step)",
        "",
        "| model | " + " | ".join(f"BLEU {level:g}" for level in BLEU_LEVELS) + " |",
        "|" + "---|" * (len(BLEU_LEVELS) + 1),
    ]
    for variant in plan.variants:
        found = grouped.get(variant.name, [])
        cells = [variant.name, *(_time_to_level(found, level) for level in BLEU_LEVELS)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _speed_table(plan: ExperimentPlan, grouped: dict[str, list[dict[str, Any]]], beam: int) -> list[str]:
    """Lines of the decoding-speed table: sentences and output tokens per second, greedy and beam."""
    sample = next((found[0] for found in grouped.values() if found), None)
    where = (
        f"{sample['decode_sentences']} validation sentences, fp32, {sample['decode_threads']} threads"
        if sample
        else "validation set"
    )
    lines = [
        "",
        f"## Decoding speed ({where}; output tokens exclude EOS)",
        "",
        f"| model | greedy sent/s | greedy tok/s | beam {beam} sent/s | beam {beam} tok/s |",
        "|---|---|---|---|---|",
    ]
    for variant in plan.variants:
        found = grouped.get(variant.name, [])
        cells = [variant.name]
        for search in ("greedy", "beam"):
            for unit in ("sentences", "tokens"):
                cells.append(format_metric([r[f"decode_{search}_{unit}_per_second"] for r in found], 0))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _curve_lines(plan: ExperimentPlan, grouped: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Lines listing each run's curve as ``minutes: BLEU`` pairs (the plot's data, in text)."""
    lines = ["", "## Curves: training minutes: greedy dev BLEU, per checkpoint", ""]
    for variant in plan.variants:
        for record in grouped.get(variant.name, []):
            points = ", ".join(
                f"{point['elapsed_seconds'] / 60:.1f}: {point['greedy_bleu']:.1f}"
                for point in record["curve"]
            )
            lines.append(f"- {variant.name}, seed {record['seed']}: {points}")
    return lines


def plot(plan: ExperimentPlan, records: list[dict[str, Any]], output_dir: Path) -> list[Path]:
    """Plot greedy dev BLEU against training time and against training FLOPs, both models (one PNG).

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    records : list of dict
        Its results.
    output_dir : Path
        Where ``rnn_baseline.png`` goes.

    Returns
    -------
    list of Path
        The written figure.

    Notes
    -----
    Left: the time-to-quality curves of both models on one axis (minutes of training), with the BLEU levels
    of the time table as dotted lines. Right: the same points against cumulative training FLOPs (log scale),
    the paper's measure of cost. One line per run; a model's seeds share its colour.
    """
    from matplotlib.figure import Figure

    from transformer.visualization.attention_plot import save_figure_atomically

    figure = Figure(figsize=(11, 4.5))
    by_time, by_flops = figure.subplots(1, 2, sharey=True)
    grouped = _by_variant(records)
    for index, variant in enumerate(plan.variants):
        color = f"C{index}"
        for number, record in enumerate(grouped.get(variant.name, [])):
            bleu = [point["greedy_bleu"] for point in record["curve"]]
            label = variant.name if number == 0 else None
            minutes = [point["elapsed_seconds"] / 60 for point in record["curve"]]
            by_time.plot(minutes, bleu, marker="o", markersize=3, color=color, label=label)
            flops = [max(point["train_flops"], 1.0) for point in record["curve"]]
            by_flops.plot(flops, bleu, marker="o", markersize=3, color=color, label=label)
    for level in BLEU_LEVELS:
        for axes in (by_time, by_flops):
            axes.axhline(level, color="grey", linewidth=0.6, linestyle=":")
    by_time.set(
        title=f"Time to quality (scale {plan.scale})", xlabel="training minutes", ylabel="dev BLEU (greedy)"
    )
    by_time.set_xlim(left=0)
    by_time.set_ylim(bottom=0)
    by_flops.set(title="Quality against training cost", xlabel="training FLOPs", xscale="log")
    by_time.legend(fontsize=8)
    figure.tight_layout()
    path = output_dir / "rnn_baseline.png"
    save_figure_atomically(figure, path)
    return [path]
