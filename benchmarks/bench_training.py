"""Training-step throughput: our trainer's ``train_step`` against a plain ``nn.Transformer`` step.

One step is forward + backward + Adam + schedule on a batch of ``max_tokens`` target tokens (128 sentences of
32 tokens, no padding). Ours is timed through :meth:`transformer.training.trainer.Trainer.train_step`, the
very call the training loop makes, with the trainer built from an ``ExperimentConfig`` as ``transformer
train`` builds it. The systems of one (model, precision) cell are timed in interleaved rounds, so their ratio
is measured under the same machine conditions.
"""

import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.bench_common import Section, describe_import_failure, time_interleaved
from benchmarks.bench_data import fixed_batches, synthetic_corpus, train_synthetic_tokenizer
from benchmarks.bench_fairseq import FAIRSEQ_MODULE, build_fairseq_step
from benchmarks.bench_flops import ModelShape, training_flops_per_target_token
from benchmarks.bench_reference import ReferenceTransformer, build_reference_step
from benchmarks.bench_settings import MODEL_SHAPES, Settings, model_config
from transformer.config.experiment import ExperimentConfig
from transformer.config.train import TrainConfig
from transformer.data.pipeline.tokenizer import Tokenizer
from transformer.data.prepare import TrainingData
from transformer.training.trainer import Trainer

METHOD = (
    "Target tokens per second of one optimizer step (forward, backward, Adam, learning-rate schedule) on "
    "{max_tokens}-token batches of {sentences} random sentences x {length} tokens per side (no padding), "
    "cycling through {num_batches} batches. Ours: `Trainer(ExperimentConfig(...), run_dir, "
    "TrainingData(...)).train_step([batch])`, exactly what `transformer train` runs. Reference: "
    "`nn.Transformer(d_model, nhead, layers, dim_feedforward, dropout=0.1, batch_first=True)` with scaled "
    "shared embeddings, sinusoidal positions, tied output projection, `F.cross_entropy(label_smoothing=0.1)`, "
    "Adam and Eq. (3) (benchmarks/bench_reference.py). bf16 is `torch.autocast` with fp32 weights in both. "
    "Systems of a cell are timed in interleaved rounds after {warmup} warm-up step(s); tokens/s is "
    "tokens / median step time over {repeats} steps. MFU = tokens/s x analytic matmul FLOPs per target token "
    "(benchmarks/bench_flops.py: 3 x forward matmul FLOPs, attention included) / peak matmul FLOP/s of the "
    "step's dtype measured above."
)
NUM_BATCHES = 4
FAIRSEQ_SYSTEM = "fairseq (fairseq-fixed 0.12.3.1: model, criterion, Adam)"
FAIRSEQ_METHOD = (
    " fairseq: `TransformerModel.build_model` with `transformer` architecture arguments matching ours "
    "(post-norm, sinusoidal positions, shared embeddings, dropout on residuals and embeddings), "
    "`label_smoothed_nll_loss` (0.1), fairseq's own `Adam` and an inverse square root schedule, in fp32 "
    "(fairseq has no CPU bf16 path); benchmarks/bench_fairseq.py. Without its trainer's bookkeeping."
)


def measure_training(section: Section, settings: Settings, peaks: dict[str, float]) -> None:
    """Time training steps of every model shape and precision; add rows, ratios and MFU to ``section``.

    Parameters
    ----------
    section : Section
        Receives one row per (model, precision, system).
    settings : Settings
        Shapes, precisions, batch size and step counts.
    peaks : dict of str to float
        Peak matmul GFLOP/s per precision, for MFU; a missing precision gives no MFU.

    Returns
    -------
    None

    Notes
    -----
    fairseq is timed in the fp32 cells where it imports (``benchmarks/install_peers.sh``), else
    reported as skipped with the reason. OpenNMT-py is only reported as skipped: its releases pin
    ``torch<2.3``, which cannot share an environment with this project's torch.
    """
    sentences = settings.training_max_tokens // settings.training_sentence_length
    section.method = METHOD.format(
        max_tokens=settings.training_max_tokens,
        sentences=sentences,
        length=settings.training_sentence_length,
        num_batches=NUM_BATCHES,
        warmup=settings.training_warmup,
        repeats=settings.training_repeats,
    )
    left_out = [
        cell for cell in Settings.for_mode("full").training_cells if cell not in settings.training_cells
    ]
    if left_out and settings.mode != "smoke":
        described = ", ".join(f"{model} {precision}" for model, precision in left_out)
        section.notes.append(f"Not measured in {settings.mode} mode (full mode measures it): {described}.")
    fairseq_failure = describe_import_failure(FAIRSEQ_MODULE)
    if fairseq_failure:
        section.skip(
            "fairseq",
            f"{fairseq_failure}; `bash benchmarks/install_peers.sh` adds it",
        )
    else:
        section.method += FAIRSEQ_METHOD
    onmt_failure = describe_import_failure("onmt")
    section.skip(
        "OpenNMT-py",
        (onmt_failure or "OpenNMT-py is installed, but this suite has no harness for it")
        + "; its releases require torch<2.3",
    )
    with tempfile.TemporaryDirectory(prefix="transformer-bench-train-") as scratch:
        tokenizers: dict[str, Tokenizer] = {}
        for model_name, precision in settings.training_cells:
            if model_name not in tokenizers:
                tokenizers[model_name] = train_synthetic_tokenizer(
                    MODEL_SHAPES[model_name]["vocab_size"], Path(scratch) / f"{model_name}.model"
                )
            tokenizer = tokenizers[model_name]
            section.rows.extend(
                _measure_cell(
                    model_name, precision, settings, tokenizer, Path(scratch), peaks, fairseq_failure is None
                )
            )


def _measure_cell(
    model_name: str,
    precision: str,
    settings: Settings,
    tokenizer: Tokenizer,
    scratch: Path,
    peaks: dict[str, float],
    with_fairseq: bool,
) -> list[dict[str, object]]:
    """Time every system on one (model, precision) cell; return the rows, ours first."""
    config = model_config(model_name)
    sentences = settings.training_max_tokens // settings.training_sentence_length
    corpus = synthetic_corpus(sentences * NUM_BATCHES, settings.training_sentence_length, config.vocab_size)
    batches = fixed_batches(corpus, sentences)
    experiment = ExperimentConfig(
        model=config,
        train=TrainConfig(max_tokens=settings.training_max_tokens, precision=precision, device="cpu"),
    )
    data = TrainingData(train=corpus, valid=None, tokenizer=tokenizer, split_files={})
    trainer = Trainer(experiment, scratch / f"run-{model_name}-{precision}", data)
    position = 0

    def ours() -> None:
        nonlocal position
        trainer.train_step([batches[position % len(batches)]])
        position += 1

    tensors = [(batch.src_tokens, batch.tgt_input, batch.tgt_output) for batch in batches]
    systems: dict[str, Callable[[], object]] = {"ours": ours}
    references = {"nn.Transformer reference (dropout 0.1 everywhere)": False}
    if settings.training_paper_dropout_reference:
        references["nn.Transformer reference (dropout on residuals + embeddings, as ours)"] = True
    for name, residual_only in references.items():
        torch.manual_seed(1)
        reference = ReferenceTransformer(
            vocab_size=config.vocab_size,
            d_model=config.d_model,
            num_heads=config.num_heads,
            d_ff=config.d_ff,
            num_encoder_layers=config.num_encoder_layers,
            num_decoder_layers=config.num_decoder_layers,
            dropout=config.dropout,
            residual_dropout_only=residual_only,
            pad_id=config.pad_id,
        )
        systems[name] = build_reference_step(reference, tensors, precision)
    if with_fairseq and precision == "fp32":
        torch.manual_seed(1)
        systems[FAIRSEQ_SYSTEM] = build_fairseq_step(config, tensors)
    timings = time_interleaved(systems, settings.training_warmup, settings.training_repeats)
    shape = ModelShape.from_config(config)
    length = settings.training_sentence_length
    flops_per_token = training_flops_per_target_token(shape, length, length)
    tokens = batches[0].num_target_tokens
    ours_rate = tokens / timings["ours"].median
    rows: list[dict[str, object]] = []
    for name, timing in timings.items():
        rate = tokens / timing.median
        peak = peaks.get(precision)
        rows.append(
            {
                "model": model_name,
                "precision": precision,
                "system": name,
                "target_tokens_per_step": tokens,
                "tokens_per_s": rate,
                "flops_per_target_token": flops_per_token,
                "achieved_gflop_per_s": rate * flops_per_token / 1e9,
                "mfu": rate * flops_per_token / (peak * 1e9) if peak else None,
                "ours_over_this": None if name == "ours" else ours_rate / rate,
                **timing.to_dict(),
            }
        )
    return rows
