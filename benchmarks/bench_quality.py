"""Time to quality: validation BLEU of every checkpoint of a training run, against minutes and tokens.

Given a run directory (``transformer train --output-dir DIR``), each ``DIR/checkpoints/step-*`` is loaded with
``Translator.from_checkpoint`` and translates the validation sources; ``score_translations`` gives sacreBLEU
(cased, 13a) against the references. ``trainer_state.json`` of each checkpoint says how many training minutes
and target tokens it took to get there.
"""

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_common import Section
from benchmarks.bench_settings import Settings
from transformer.checkpoint.layout import STATE_FILE
from transformer.config.decode import DecodeConfig
from transformer.config.experiment import experiment_from_dict
from transformer.data.pipeline.text_files import read_parallel_files
from transformer.data.prepare import corpus_files
from transformer.decoding.translator import Translator
from transformer.evaluation.bleu import score_translations

#: BLEU levels reported as "first reached after".
BLEU_THRESHOLDS = (10.0, 20.0, 25.0, 30.0, 35.0)


def find_checkpoints(run_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """List the run's checkpoints with their trainer state, in training order.

    Parameters
    ----------
    run_dir : Path
        A training run directory.

    Returns
    -------
    list of (Path, dict)
        Checkpoint directory and its parsed ``trainer_state.json``, by step.

    Notes
    -----
    Directories without a trainer state (weights-only averages) are left out. Raises ValueError when none
    is found, naming the directory.
    """
    found = []
    for directory in sorted((run_dir / "checkpoints").glob("step-*")):
        state_file = directory / STATE_FILE
        if directory.is_dir() and state_file.exists():
            found.append((directory, json.loads(state_file.read_text(encoding="utf-8"))))
    if not found:
        raise ValueError(f"{run_dir}: no checkpoints/step-*/{STATE_FILE} found")
    return sorted(found, key=lambda item: int(item[1]["step"]))


def validation_pairs(
    run_dir: Path, state: dict[str, Any], source: Path | None, reference: Path | None
) -> tuple[list[str], list[str], str]:
    """Validation sources and references: the given files, or the run's own validation split.

    Parameters
    ----------
    run_dir : Path
        The run directory (the built-in synthetic corpus lives in it).
    state : dict
        A trainer state; its ``experiment`` names the corpus.
    source, reference : Path or None
        Explicit validation files (both or neither).

    Returns
    -------
    sources, references : list of str
        Line-aligned sentences.
    origin : str
        Where they came from, for the report.

    Notes
    -----
    The run's corpus is located as training located it (``corpus_files``): cache, mirror or download.
    """
    if source is not None and reference is not None:
        files = (source, reference)
    else:
        experiment = experiment_from_dict(state["experiment"], source=f"{run_dir} trainer state")
        splits = corpus_files(experiment.data, run_dir)
        if "valid" not in splits:
            raise ValueError(
                f"{run_dir}: the run's corpus has no validation split; pass --valid-source/--valid-reference"
            )
        files = splits["valid"]
    pairs = read_parallel_files(*files)
    return [pair[0] for pair in pairs], [pair[1] for pair in pairs], f"{files[0]} -> {files[1]}"


def measure_time_to_quality(
    section: Section,
    settings: Settings,
    run_dir: Path | None,
    valid_source: Path | None = None,
    valid_reference: Path | None = None,
) -> None:
    """Score every checkpoint of a run on validation data; add one row per checkpoint and threshold notes.

    Parameters
    ----------
    section : Section
        Receives rows (step, minutes, tokens, BLEU, chrF) and the "first reached" summary.
    settings : Settings
        ``quality_sentences`` (a prefix of the validation set) and ``quality_beam_size``.
    run_dir : Path or None
        The run; None marks the section skipped.
    valid_source, valid_reference : Path or None
        Explicit validation files instead of the run's own split.

    Returns
    -------
    None

    Notes
    -----
    Decoding uses the run's own ``decode`` settings (the paper's beam 4, alpha 0.6 by default) unless
    ``quality_beam_size`` overrides the beam size (quick mode: greedy).
    """
    if run_dir is None:
        section.status = "skipped"
        section.notes.append(
            "No `--run DIR` given: pass a training run directory to measure time to quality."
        )
        return
    checkpoints = find_checkpoints(run_dir)
    sources, references, origin = validation_pairs(run_dir, checkpoints[-1][1], valid_source, valid_reference)
    if settings.quality_sentences is not None:
        sources, references = sources[: settings.quality_sentences], references[: settings.quality_sentences]
    decode = experiment_from_dict(checkpoints[-1][1]["experiment"]).decode
    if settings.quality_beam_size is not None:
        decode = dataclasses.replace(decode, beam_size=settings.quality_beam_size, nbest=1)
    section.method = (
        f"Each checkpoint of `{run_dir}` translates {len(sources)} validation sentences ({origin}) with "
        f"`Translator.from_checkpoint(path, DecodeConfig(beam_size={decode.beam_size}, "
        f"length_penalty={decode.length_penalty})).translate(...)`, fp32; BLEU and chrF from "
        "`transformer.evaluation.bleu.score_translations` (sacreBLEU; cased, and lowercased as the Multi30k "
        "literature reports it; thresholds use cased BLEU). Minutes and tokens are the "
        "checkpoint's `elapsed_seconds` and `tokens_seen` from `trainer_state.json`."
    )
    for directory, state in checkpoints:
        section.rows.append(_score_checkpoint(directory, state, decode, sources, references))
    section.summary["first_reached"] = _first_reached(section.rows)
    not_reached = []
    for threshold, row in section.summary["first_reached"].items():
        if row is None:
            not_reached.append(threshold)
        else:
            section.notes.append(
                f"BLEU {threshold}: first reached at step {row['step']} after {row['minutes']:.1f} min and "
                f"{row['tokens_seen']:,} target tokens."
            )
    if not_reached:
        section.notes.append(f"Not reached by the last checkpoint: BLEU {', '.join(not_reached)}.")
    section.summary["bleu_signature"] = section.rows[-1]["bleu_signature"]


def _score_checkpoint(
    directory: Path, state: dict[str, Any], decode: DecodeConfig, sources: list[str], references: list[str]
) -> dict[str, Any]:
    started = time.perf_counter()
    translator = Translator.from_checkpoint(directory, decode, device="cpu")
    hypotheses = translator.translate(sources)
    scores = score_translations(hypotheses, references)
    return {
        "checkpoint": directory.name,
        "step": int(state["step"]),
        "minutes": float(state["elapsed_seconds"]) / 60,
        "tokens_seen": int(state["tokens_seen"]),
        "bleu": scores.bleu,
        "bleu_lowercase": score_translations(hypotheses, references, lowercase=True).bleu,
        "chrf": scores.chrf,
        "bleu_signature": scores.bleu_signature,
        "evaluation_seconds": time.perf_counter() - started,
    }


def _first_reached(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    return {
        f"{threshold:g}": next((row for row in rows if row["bleu"] >= threshold), None)
        for threshold in BLEU_THRESHOLDS
    }
