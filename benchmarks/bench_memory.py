"""Training memory at the paper's batch size: peak resident memory of whole optimizer steps.

The paper trains base on about 25,000 target tokens per step. On one 24 GiB CPU machine that batch is reached
by accumulating micro-batches (``configs/base.yaml``: 4 x 6,250 tokens). Each cell runs in a fresh process
(so no memory freed by another cell is reused): it builds the trainer exactly as ``transformer train`` does,
takes one untimed optimizer step (which allocates the Adam state), resets the peak resident set size
(``/proc/self/clear_refs``), takes one more step and reads the peak (``VmHWM``). The figure is the whole
process's peak, weights, gradients and Adam state included: what has to fit in the machine's memory.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.bench_common import Section
from benchmarks.bench_data import fixed_batches, synthetic_corpus, train_synthetic_tokenizer
from benchmarks.bench_settings import MODEL_SHAPES, Settings, model_config
from benchmarks.bench_worker import read_status_bytes, reset_peak_rss, run_json_worker
from transformer.config.experiment import ExperimentConfig
from transformer.config.train import TrainConfig
from transformer.data.prepare import TrainingData
from transformer.model.transformer import Transformer
from transformer.training.trainer import Trainer

GIB = 1024**3
WORKER_TIMEOUT_SECONDS = 900
METHOD = (
    "Peak resident memory (VmHWM) of a whole process during one optimizer step of our trainer "
    "(`Trainer.train_step(micro_batches)`, as `transformer train` runs it with `train.accumulate`), "
    "measured after one untimed step so that the Adam state exists; random sentences of {length} tokens per "
    "side, no padding; one fresh process per row. The machine has {machine} of memory."
)


def run_worker(
    model_name: str, precision: str, micro_batch_tokens: int, accumulate: int, sentence_length: int
) -> dict[str, Any]:
    """Measure one cell in this process; see the module docstring for the method.

    Parameters
    ----------
    model_name : str
        A key of ``MODEL_SHAPES``.
    precision : str
        "fp32" or "bf16".
    micro_batch_tokens : int
        Target tokens per micro-batch (a multiple of ``sentence_length``).
    accumulate : int
        Micro-batches per optimizer step.
    sentence_length : int
        Tokens per sentence on each side.

    Returns
    -------
    dict
        ``peak_rss_bytes``, ``rss_before_step_bytes`` and ``step_seconds`` of the measured step.

    Notes
    -----
    Linux only (reads /proc/self). Should run in a fresh process.
    """
    config = model_config(model_name)
    sentences = micro_batch_tokens // sentence_length
    with tempfile.TemporaryDirectory(prefix="transformer-bench-memory-") as scratch:
        tokenizer = train_synthetic_tokenizer(config.vocab_size, Path(scratch) / "tokenizer.model")
        corpus = synthetic_corpus(sentences * accumulate, sentence_length, config.vocab_size)
        micro_batches = fixed_batches(corpus, sentences)
        experiment = ExperimentConfig(
            model=config,
            train=TrainConfig(
                max_tokens=micro_batch_tokens, accumulate=accumulate, precision=precision, device="cpu"
            ),
        )
        data = TrainingData(train=corpus, valid=None, tokenizer=tokenizer, split_files={})
        trainer = Trainer(experiment, Path(scratch) / "run", data)
        trainer.train_step(micro_batches)  # allocates gradients and the Adam state
        before = read_status_bytes("VmRSS")
        reset_peak_rss()
        started = time.perf_counter()
        trainer.train_step(micro_batches)
        seconds = time.perf_counter() - started
        peak = read_status_bytes("VmHWM")
    return {"peak_rss_bytes": peak, "rss_before_step_bytes": before, "step_seconds": seconds}


def measure_memory(section: Section, settings: Settings, threads: int, machine_gib: float | None) -> None:
    """Measure the peak memory of every configured (model, precision, micro-batch, accumulation) cell.

    Parameters
    ----------
    section : Section
        Receives one row per cell.
    settings : Settings
        ``memory_cells`` and ``memory_sentence_length``.
    threads : int
        PyTorch intra-op threads of the worker processes.
    machine_gib : float or None
        Physical memory of the machine, for the report (None: unknown).

    Returns
    -------
    None

    Notes
    -----
    A mode without cells records a note and no rows.
    """
    machine = "an unknown amount" if machine_gib is None else f"{machine_gib:.0f} GiB"
    section.method = METHOD.format(length=settings.memory_sentence_length, machine=machine)
    if not settings.memory_cells:
        section.notes.append(f"Not measured in {settings.mode} mode (full mode measures it).")
        return
    for model_name, precision, micro_batch_tokens, accumulate in settings.memory_cells:
        result = _run_in_subprocess(
            model_name, precision, micro_batch_tokens, accumulate, settings.memory_sentence_length, threads
        )
        total_tokens = micro_batch_tokens * accumulate
        section.rows.append(
            {
                "model": model_name,
                "parameters": _num_parameters(model_name),
                "precision": precision,
                "micro_batch_tokens": micro_batch_tokens,
                "accumulate": accumulate,
                "tokens_per_step": total_tokens,
                "peak_rss_gib": result["peak_rss_bytes"] / GIB,
                "rss_before_step_gib": result["rss_before_step_bytes"] / GIB,
                "step_seconds": result["step_seconds"],
                "tokens_per_s": total_tokens / result["step_seconds"],
                "fits_machine": None if machine_gib is None else result["peak_rss_bytes"] / GIB < machine_gib,
            }
        )


def _num_parameters(model_name: str) -> int:
    with torch.device("meta"):
        return Transformer(model_config(model_name)).num_parameters()


def _run_in_subprocess(
    model_name: str,
    precision: str,
    micro_batch_tokens: int,
    accumulate: int,
    sentence_length: int,
    threads: int,
) -> dict[str, Any]:
    arguments: dict[str, object] = {
        "worker": model_name,
        "precision": precision,
        "micro-batch-tokens": micro_batch_tokens,
        "accumulate": accumulate,
        "sentence-length": sentence_length,
        "threads": threads,
    }
    description = f"memory {model_name} {precision} {accumulate} x {micro_batch_tokens}"
    result: dict[str, Any] = run_json_worker(__name__, arguments, WORKER_TIMEOUT_SECONDS, description)
    return result


def main() -> None:
    """Worker entry point: measure one cell and print the result as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", required=True, choices=sorted(MODEL_SHAPES))
    parser.add_argument("--precision", required=True, choices=["fp32", "bf16"])
    parser.add_argument("--micro-batch-tokens", type=int, required=True)
    parser.add_argument("--accumulate", type=int, required=True)
    parser.add_argument("--sentence-length", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    result = run_worker(
        args.worker, args.precision, args.micro_batch_tokens, args.accumulate, args.sentence_length
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
