"""Evaluate a finished training run: BLEU before and after checkpoint averaging, and translation speed.

    python -m benchmarks.evaluate_run --run runs/multi30k --source VALID.en --reference VALID.de \
        --average-last 5 --output experiments/multi30k/evaluation.json

(from the repository root: a module of the ``benchmarks`` package).

Writes JSON and prints a Markdown report, labelled with the CPU model and its flags:
- validation BLEU (sacreBLEU 13a, cased and lowercased) and chrF of the best checkpoint (by validation loss),
  the latest one and the average of the last N, with beam 4 (the paper's search: GNMT length penalty 0.6),
  with the run's own decode settings where they differ from that, and greedy;
- translation speed of the averaged model on the validation sources: greedy and beam 4, key/value cache on
  and off (off on the first --uncached-sentences sentences: it is slow), fp32, bf16 and int8, with the BLEU
  change of bf16 and int8; and CTranslate2 int8 on the same weights when it is installed (its only length penalty is the power
  form: it runs with the run's alpha where the run uses that form, else with 0.6).
"""

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from transformer.averaging import average_checkpoints, write_weights_checkpoint
from transformer.checkpoint.layout import read_index
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_files import read_parallel_files
from transformer.decoding.inference_models import TRANSLATION_PRECISIONS
from transformer.decoding.translator import Translator
from transformer.device import bf16_unsupported_reason, describe_cpu
from transformer.evaluation.bleu import score_translations
from transformer.training.checkpoint import load_training_checkpoint

#: How this script runs, for the command its report records.
MODULE = "benchmarks.evaluate_run"


def describe_search(config: DecodeConfig) -> str:
    """Name a search for the report, with its length penalty.

    Parameters
    ----------
    config : DecodeConfig
        The search settings.

    Returns
    -------
    str
        ``"greedy"``, or e.g. ``"beam 4, GNMT 0.6"`` / ``"beam 4, power 1"``.

    Notes
    -----
    Two settings with the same description score alike, so the report compares descriptions to decide whether
    the run's own search needs rows of its own.
    """
    if config.beam_size == 1:
        return "greedy"
    form = "GNMT" if config.length_penalty_form == "gnmt" else config.length_penalty_form
    return f"beam {config.beam_size}, {form} {config.length_penalty:g}"


def bleu_row(
    name: str,
    checkpoint: Path,
    config: DecodeConfig,
    sources: list[str],
    references: list[str],
    precision: str = "fp32",
) -> dict[str, Any]:
    """Translate the sources with one checkpoint and search, and score the output.

    Parameters
    ----------
    name : str
        The row's checkpoint label.
    checkpoint : Path
        The checkpoint directory.
    config : DecodeConfig
        The search.
    sources, references : list of str
        The validation set.
    precision : str
        The weights' precision: ``"fp32"``, ``"bf16"`` or ``"int8"``.

    Returns
    -------
    dict
        ``checkpoint``, ``search``, ``precision``, ``bleu``, ``bleu_lowercased``, ``chrf`` (cased),
        ``signature`` (sacreBLEU's) and ``seconds`` (one pass, loading excluded).

    Notes
    -----
    The seconds are one pass without a warm-up; speed is compared with :func:`speed_row`'s figures.
    """
    translator = Translator.from_checkpoint(checkpoint, config, "cpu", precision)
    started = time.perf_counter()
    hypotheses = translator.translate(sources)
    seconds = time.perf_counter() - started
    cased = score_translations(hypotheses, references)
    lowercased = score_translations(hypotheses, references, lowercase=True)
    return {
        "checkpoint": name,
        "search": describe_search(config),
        "precision": precision,
        "bleu": round(cased.bleu, 2),
        "bleu_lowercased": round(lowercased.bleu, 2),
        "chrf": round(cased.chrf, 2),
        "signature": cased.bleu_signature,
        "seconds": round(seconds, 2),
    }


def speed_row(
    checkpoint: Path, config: DecodeConfig, sources: list[str], precision: str, repeats: int
) -> dict[str, Any]:
    """Time one checkpoint, search and precision on the sources: the median of ``repeats`` passes.

    Parameters
    ----------
    checkpoint : Path
        The checkpoint directory.
    config : DecodeConfig
        The search (and whether the key/value cache is on).
    sources : list of str
        The sentences translated.
    precision : str
        The weights' precision.
    repeats : int
        Timed passes, after a warm-up on 16 sentences.

    Returns
    -------
    dict
        ``search``, ``cache``, ``precision``, ``sentences``, ``sentences_per_second``, ``tokens_per_second``
        (output tokens with EOS) and ``median_seconds``.

    Notes
    -----
    The median, not the mean, so one pass disturbed by another process does not move the figure.
    """
    translator = Translator.from_checkpoint(checkpoint, config, "cpu", precision)
    translator.translate(sources[:16])  # warm-up
    timings, tokens = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        candidates = translator.translate_nbest(sources)
        timings.append(time.perf_counter() - started)
        tokens = sum(len(items[0].tokens) + 1 for items in candidates if items)  # + EOS
    seconds = sorted(timings)[len(timings) // 2]
    return {
        "search": "greedy" if config.beam_size == 1 else f"beam {config.beam_size}",
        "cache": "on" if config.use_cache else "off",
        "precision": precision,
        "sentences": len(sources),
        "sentences_per_second": round(len(sources) / seconds, 1),
        "tokens_per_second": round(tokens / seconds, 1),
        "median_seconds": round(seconds, 3),
    }


def ctranslate2_rows(
    checkpoint: Path, sources: list[str], references: list[str], repeats: int, length_penalty: float
) -> list[dict[str, Any]]:
    """Export the checkpoint to CTranslate2 (float32 and int8) and time and score it, greedy and beam 4.

    Parameters
    ----------
    checkpoint : Path
        The checkpoint directory.
    sources, references : list of str
        The validation set.
    repeats : int
        Timed passes per row (the median is reported).
    length_penalty : float
        The power length penalty's alpha for beam search.

    Returns
    -------
    list of dict
        One row per compute type and search (``engine``, ``compute_type``, ``search``, ``sentences_per_second``,
        ``bleu``, ``bleu_lowercased``), or a ``skipped`` row with the reason; empty when CTranslate2 is not
        installed.

    Notes
    -----
    CTranslate2 has only the power length penalty, so its beam rows compare with ours only where the run's own
    search uses that form.
    """
    try:
        from transformer.interop.ctranslate2 import CTranslate2Translator, export_ctranslate2
    except ImportError:
        return []
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as directory:
        for quantization in ("float32", "int8"):
            target = Path(directory) / quantization
            try:
                export_ctranslate2(checkpoint, target, None if quantization == "float32" else quantization)
            except (ImportError, ValueError) as error:
                rows.append({"engine": "ctranslate2", "compute_type": quantization, "skipped": str(error)})
                continue
            translator = CTranslate2Translator.from_directory(target, threads=torch.get_num_threads())
            for beam in (1, 4):
                # CTranslate2 has only the power length penalty.
                translator.translate(sources[:16], beam_size=beam)
                timings = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    hypotheses = translator.translate(sources, beam_size=beam, length_penalty=length_penalty)
                    timings.append(time.perf_counter() - started)
                seconds = sorted(timings)[len(timings) // 2]
                scores = score_translations(hypotheses, references)
                rows.append(
                    {
                        "engine": "ctranslate2",
                        "compute_type": quantization,
                        "search": "greedy" if beam == 1 else f"beam {beam}, power {length_penalty:g}",
                        "sentences_per_second": round(len(sources) / seconds, 1),
                        "bleu": round(scores.bleu, 2),
                        "bleu_lowercased": round(
                            score_translations(hypotheses, references, lowercase=True).bleu, 2
                        ),
                    }
                )
    return rows


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    """Read the command line of this script.

    Parameters
    ----------
    argv : list of str or None
        The arguments (the module docstring lists them); None reads ``sys.argv``.

    Returns
    -------
    argparse.Namespace
        ``run``, ``source``, ``reference``, ``output`` (paths), ``average_last``, ``uncached_sentences``,
        ``repeats`` and ``threads`` (ints).

    Notes
    -----
    ``--uncached-sentences`` bounds the rows without the key/value cache: they are quadratic in the length and
    would dominate the run on the full validation set.
    """
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, type=Path)
    parser.add_argument("--source", required=True, type=Path)
    parser.add_argument("--reference", required=True, type=Path)
    parser.add_argument("--average-last", type=int, default=5)
    parser.add_argument("--uncached-sentences", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", type=Path, required=True)
    return parser.parse_args(argv)


def quality_rows(
    candidates: dict[str, Path],
    averaged_dir: Path,
    own: DecodeConfig,
    sources: list[str],
    references: list[str],
    bf16_skipped: str | None,
) -> list[dict[str, Any]]:
    """Score each candidate checkpoint with the paper's search, the run's own and greedy; then bf16 and int8.

    Parameters
    ----------
    candidates : dict of str to Path
        Row name (e.g. ``"best (step-2500)"``) to checkpoint directory.
    averaged_dir : Path
        The averaged checkpoint, the one translated in bf16 and int8 too.
    own : DecodeConfig
        The run's own decode settings: their rows are added only where they differ from the paper's search.
    sources, references : list of str
        The validation set.
    bf16_skipped : str or None
        Why bf16 cannot run on this CPU, or None where it can.

    Returns
    -------
    list of dict
        One :func:`bleu_row` per candidate and search, then the averaged model's lower-precision rows.

    Notes
    -----
    bf16 is scored only where the CPU runs it natively: elsewhere the Translator refuses it (emulated, about 40x
    slower).
    """
    paper, greedy = DecodeConfig(), DecodeConfig(beam_size=1)
    rows = [bleu_row(name, path, paper, sources, references) for name, path in candidates.items()]
    if describe_search(own) != describe_search(paper):
        rows += [bleu_row(name, path, own, sources, references) for name, path in candidates.items()]
    rows += [bleu_row(name, path, greedy, sources, references) for name, path in candidates.items()]
    precisions = ["int8"] if bf16_skipped else ["bf16", "int8"]
    for precision in precisions:
        for config in (paper, greedy):
            name = f"average, {precision} weights"
            rows.append(bleu_row(name, averaged_dir, config, sources, references, precision))
    return rows


def speed_rows(
    averaged_dir: Path, sources: list[str], precisions: list[str], uncached_sentences: int, repeats: int
) -> list[dict[str, Any]]:
    """Time the averaged model: greedy and beam 4 in each precision, then with the key/value cache off and on.

    Parameters
    ----------
    averaged_dir : Path
        The averaged checkpoint.
    sources : list of str
        The validation sources.
    precisions : list of str
        The weight precisions this CPU runs (``"fp32"``, ``"bf16"``, ``"int8"``).
    uncached_sentences : int
        How many sources the cache-off rows (and their cache-on twins) translate.
    repeats : int
        Timed passes per row (the median is reported).

    Returns
    -------
    list of dict
        One :func:`speed_row` per search, precision and cache setting.

    Notes
    -----
    The cache-off rows are paired with cache-on rows on the same subset, so their ratio is the cache's speed-up.
    """
    paper, greedy = DecodeConfig(), DecodeConfig(beam_size=1)
    rows = [
        speed_row(averaged_dir, config, sources, precision, repeats)
        for precision in precisions
        for config in (greedy, paper)
    ]
    subset = sources[:uncached_sentences]
    for config in (DecodeConfig(beam_size=1, use_cache=False), DecodeConfig(use_cache=False)):
        rows.append(speed_row(averaged_dir, config, subset, "fp32", 1))
        rows.append(speed_row(averaged_dir, DecodeConfig(beam_size=config.beam_size), subset, "fp32", 1))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Evaluate the run named on the command line, write the JSON report and print the Markdown one.

    Parameters
    ----------
    argv : list of str or None
        The arguments (the module docstring lists them); None reads ``sys.argv``.

    Returns
    -------
    int
        The exit status: 0.

    Notes
    -----
    The report records its command as ``python -m benchmarks.evaluate_run`` with these arguments, the way to run
    it again.
    """
    args = parse_arguments(argv)
    torch.set_num_threads(args.threads)
    pairs = read_parallel_files(args.source, args.reference)
    sources, references = [source for source, _ in pairs], [target for _, target in pairs]
    checkpoint_dir = args.run / "checkpoints"
    index = read_index(checkpoint_dir)
    names = sorted(index["checkpoints"])
    averaged_dir = args.run / f"averaged-last{args.average_last}"
    last = [checkpoint_dir / name for name in names[-args.average_last :]]
    write_weights_checkpoint(average_checkpoints(last), averaged_dir, last)
    candidates = {
        f"best ({index['best']})": checkpoint_dir / index["best"],
        f"latest ({index['latest']})": checkpoint_dir / index["latest"],
        f"average of last {len(last)} ({', '.join(path.name for path in last)})": averaged_dir,
    }
    latest = load_training_checkpoint(checkpoint_dir / index["latest"])
    own = (
        latest.decode_config or DecodeConfig()
    )  # a checkpoint without decode settings translates with the paper's
    bf16_skipped = bf16_unsupported_reason(torch.device("cpu"))
    precisions = [
        precision for precision in TRANSLATION_PRECISIONS if precision != "bf16" or not bf16_skipped
    ]
    power_alpha = own.length_penalty if own.length_penalty_form == "power" else 0.6
    state = latest.state
    report: dict[str, Any] = {
        "command": shlex.join(["python", "-m", MODULE, *(sys.argv[1:] if argv is None else argv)]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "threads": args.threads,
        "cpu": describe_cpu(),
        "bf16_skipped": bf16_skipped,
        "training": {
            "steps": state.step if state else None,
            "minutes": round(state.elapsed_seconds / 60, 1) if state else None,
            "target_tokens": state.tokens_seen if state else None,
            "best_valid_loss": state.best_valid_loss if state else None,
        },
        "quality": quality_rows(candidates, averaged_dir, own, sources, references, bf16_skipped),
        "speed": speed_rows(averaged_dir, sources, precisions, args.uncached_sentences, args.repeats),
        "ctranslate2": ctranslate2_rows(averaged_dir, sources, references, args.repeats, power_alpha),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(render_markdown(report))
    return 0


def render_markdown(report: dict[str, Any]) -> str:
    """Render a report as Markdown: a command line, then the quality, speed and CTranslate2 tables.

    Parameters
    ----------
    report : dict
        What :func:`main` wrote as JSON.

    Returns
    -------
    str
        The Markdown text.

    Notes
    -----
    Records written before the CPU was recorded lack ``cpu``; they render with "CPU not recorded".
    """
    cpu = report.get("cpu", "CPU not recorded")  # records written before the CPU was recorded lack it
    lines = [f"Command: `{report['command']}` ({report['date']}, {report['threads']} threads, {cpu})", ""]
    lines += [
        "| checkpoint | search | precision | BLEU | BLEU (lowercased) | chrF2 | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["quality"]:
        lines.append(
            f"| {row['checkpoint']} | {row['search']} | {row['precision']} | {row['bleu']} | "
            f"{row['bleu_lowercased']} | {row['chrf']} | {row['seconds']} |"
        )
    lines += ["", f"BLEU signature: `{report['quality'][0]['signature']}`", ""]
    lines += [
        "| search | cache | precision | sentences | sentences/s | tokens/s |",
        "|---|---|---|---|---|---|",
    ]
    for row in report["speed"]:
        lines.append(
            f"| {row['search']} | {row['cache']} | {row['precision']} | {row['sentences']} | "
            f"{row['sentences_per_second']} | {row['tokens_per_second']} |"
        )
    if report["ctranslate2"]:
        lines += [
            "",
            "| engine | compute type | search | sentences/s | BLEU | BLEU (lowercased) |",
            "|---|---|---|---|---|---|",
        ]
        for row in report["ctranslate2"]:
            if "skipped" in row:
                lines.append(f"| {row['engine']} | {row['compute_type']} | skipped: {row['skipped']} | | | |")
            else:
                lines.append(
                    f"| {row['engine']} | {row['compute_type']} | {row['search']} | {row['sentences_per_second']} | "
                    f"{row['bleu']} | {row['bleu_lowercased']} |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
