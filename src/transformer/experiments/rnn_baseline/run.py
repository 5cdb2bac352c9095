"""The rnn-baseline measure hook: a trained run's quality curve, training FLOPs and decoding speed."""

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from transformer.architectures import SequenceModel
from transformer.autotune.model_tuning import tune_model
from transformer.autotune.thread_probe import usable_cpus
from transformer.config.experiment import ExperimentConfig
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.translator import Translator
from transformer.device import resolve_device
from transformer.evaluation.bleu import score_translations
from transformer.experiments.common.worker import read_run_spec
from transformer.experiments.rnn_baseline.decode_speed import measure_decode_speed
from transformer.experiments.rnn_baseline.quality_curve import CurvePoint, checkpoint_curve, first_reaching
from transformer.experiments.rnn_baseline.settings import BLEU_LEVELS, MEASURE_SETTINGS
from transformer.experiments.rnn_baseline.training_flops import (
    FlopCount,
    count_training_flops,
    first_training_batches,
)


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
    settings = MEASURE_SETTINGS[read_run_spec(run_dir)["scale"]]
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
