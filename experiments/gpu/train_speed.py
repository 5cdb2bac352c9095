"""Training-step throughput of ``Trainer.train_step`` on a CUDA GPU (the records in this folder).

From the repository root (``PYTHONPATH=src`` where the ``transformer`` package is not installed):

    python -m experiments.gpu.train_speed > experiments/gpu/DATE-h100-train-speed.jsonl
    python -m experiments.gpu.train_speed --compile   # eager vs train.compile, bf16 only

One JSON line per (model, batch, precision[, compile]): the benchmark suite's synthetic 32-token sentences and model
shapes (benchmarks/bench_settings.py), 5 warm-up steps, then the median of 20 synchronised steps. Not part of
the benchmark suite (which times the CPU against its peers in one run): no peer is timed here.
"""

import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

import torch

from transformer.config.experiment import ExperimentConfig
from transformer.config.train import TrainConfig
from transformer.data.pipeline.tokenizer import Tokenizer
from transformer.data.prepare import TrainingData
from transformer.training.distributed import init_distributed
from transformer.training.trainer import Trainer

if not __package__:  # run by path, where the package imports below fail: say how to run it instead
    sys.exit(
        f"run from the repository root: python -m experiments.gpu.train_speed {shlex.join(sys.argv[1:])}".rstrip()
    )

from benchmarks.bench_data import fixed_batches, synthetic_corpus, train_synthetic_tokenizer
from benchmarks.bench_flops import ModelShape, training_flops_per_target_token
from benchmarks.bench_settings import model_config

SENTENCE_LENGTH = 32
WARMUP_STEPS = 5
TIMED_STEPS = 20


def cells(compare_compile: bool) -> list[tuple[str, int, str, bool]]:
    """List the (model, target tokens per batch, precision, compile) cells to time.

    Parameters
    ----------
    compare_compile : bool
        Time bf16 eager against bf16 compiled at the launch-bound and the paper's batch, instead of the
        fp32/bf16 grid.

    Returns
    -------
    list of tuple
        In timing order.

    Notes
    -----
    Compiling takes tens of seconds per cell; its warm-up steps include that time.
    """
    if compare_compile:
        return [
            (model, tokens, "bf16", compiled)
            for model, tokens in (("small", 4096), ("base", 25600))
            for compiled in (False, True)
        ]
    return [
        (model, tokens, precision, False)
        for model in ("small", "base")
        for tokens in (4096, 25600)
        for precision in ("fp32", "bf16")
    ]


def main() -> None:
    """Time every cell and print one JSON line each, then the environment.

    Returns
    -------
    None

    Notes
    -----
    ``--compile`` selects the eager-versus-compiled cells (see :func:`cells`).
    """
    context = init_distributed("cuda")
    tokenizers: dict[str, Tokenizer] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for model_name, max_tokens, precision, compiled in cells("--compile" in sys.argv[1:]):
            config = model_config(model_name)
            if model_name not in tokenizers:
                path = Path(scratch) / f"{model_name}.model"
                tokenizers[model_name] = train_synthetic_tokenizer(config.vocab_size, path)
            shape = ModelShape.from_config(config)
            flops_per_token = training_flops_per_target_token(shape, SENTENCE_LENGTH, SENTENCE_LENGTH)
            sentences = max_tokens // SENTENCE_LENGTH
            corpus = synthetic_corpus(sentences * 4, SENTENCE_LENGTH, config.vocab_size)
            batches = [batch.to("cuda") for batch in fixed_batches(corpus, sentences)]
            data = TrainingData(train=corpus, valid=None, tokenizer=tokenizers[model_name], split_files={})
            train = TrainConfig(max_tokens=max_tokens, precision=precision, device="cuda", compile=compiled)
            run_dir = Path(scratch) / f"{model_name}-{max_tokens}-{precision}-{compiled}"
            trainer = Trainer(ExperimentConfig(model=config, train=train), run_dir, data, context)
            started = time.perf_counter()
            for step in range(WARMUP_STEPS):
                trainer.train_step([batches[step % len(batches)]])
            torch.cuda.synchronize()
            warmup_seconds = time.perf_counter() - started
            seconds = []
            for step in range(TIMED_STEPS):
                started = time.perf_counter()
                trainer.train_step([batches[step % len(batches)]])
                torch.cuda.synchronize()
                seconds.append(time.perf_counter() - started)
            median = sorted(seconds)[len(seconds) // 2]
            tokens = batches[0].num_target_tokens
            row = {
                "model": model_name,
                "max_tokens": tokens,
                "precision": precision,
                "compile": compiled,
                "tokens_per_s": round(tokens / median),
                "step_ms": round(median * 1e3, 2),
                "warmup_s": round(warmup_seconds, 1),
                "achieved_tflop_per_s": round(flops_per_token * tokens / median / 1e12, 1),
                "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
            }
            print(json.dumps(row), flush=True)
            del trainer
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    environment = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
    }
    print(json.dumps(environment))


if __name__ == "__main__":
    main()
