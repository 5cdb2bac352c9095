"""Training-step throughput of ``Trainer.train_step`` on a CUDA GPU (the records in this folder).

    PYTHONPATH=src python experiments/gpu/train_speed.py > experiments/gpu/DATE-h100-train-speed.jsonl

One JSON line per (model, batch, precision): the benchmark suite's synthetic 32-token sentences and model
shapes (benchmarks/bench_settings.py), 5 warm-up steps, then the median of 20 synchronised steps. Not part of
the benchmark suite (which times the CPU against its peers in one run): no peer is timed here.
"""

import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_data import fixed_batches, synthetic_corpus, train_synthetic_tokenizer
from bench_flops import ModelShape, training_flops_per_target_token
from bench_settings import model_config
from transformer.config import ExperimentConfig, TrainConfig
from transformer.data.prepare import TrainingData
from transformer.training.distributed import init_distributed
from transformer.training.trainer import Trainer

SENTENCE_LENGTH = 32
WARMUP_STEPS = 5
TIMED_STEPS = 20


def main() -> None:
    """Time every (model, batch, precision) cell and print one JSON line each, then the environment.

    Returns
    -------
    None

    Notes
    -----
    Arguments are read from ``sys.argv`` where the module docstring says so.
    """
    context = init_distributed("cuda")
    with tempfile.TemporaryDirectory() as scratch:
        for model_name in ("small", "base"):
            config = model_config(model_name)
            tokenizer = train_synthetic_tokenizer(config.vocab_size, Path(scratch) / f"{model_name}.model")
            shape = ModelShape(
                d_model=config.d_model,
                d_ff=config.d_ff,
                vocab_size=config.vocab_size,
                num_encoder_layers=config.num_encoder_layers,
                num_decoder_layers=config.num_decoder_layers,
            )
            flops_per_token = training_flops_per_target_token(shape, SENTENCE_LENGTH, SENTENCE_LENGTH)
            for max_tokens in (4096, 25600):
                sentences = max_tokens // SENTENCE_LENGTH
                corpus = synthetic_corpus(sentences * 4, SENTENCE_LENGTH, config.vocab_size)
                batches = [batch.to("cuda") for batch in fixed_batches(corpus, sentences)]
                data = TrainingData(train=corpus, valid=None, tokenizer=tokenizer, split_files={})
                for precision in ("fp32", "bf16"):
                    train = TrainConfig(max_tokens=max_tokens, precision=precision, device="cuda")
                    run_dir = Path(scratch) / f"{model_name}-{max_tokens}-{precision}"
                    trainer = Trainer(ExperimentConfig(model=config, train=train), run_dir, data, context)
                    for step in range(WARMUP_STEPS):
                        trainer.train_step([batches[step % len(batches)]])
                    torch.cuda.synchronize()
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
                        "tokens_per_s": round(tokens / median),
                        "step_ms": round(median * 1e3, 2),
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
