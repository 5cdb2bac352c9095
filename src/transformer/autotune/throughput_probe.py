"""Measure how many target tokens per second a model trains at on this machine: what a time budget buys."""

import dataclasses
from collections.abc import Callable

import torch
from torch.nn import functional as F

from transformer.autotune.cache import ProbeCache
from transformer.autotune.machine import fingerprint_key, machine_fingerprint
from transformer.autotune.timing import time_candidates
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

#: Target length of the probe's synthetic sentences: about a Multi30k sentence in BPE tokens (13-14 + EOS).
PROBE_SENTENCE_LENGTH = 16


def measure_training_tokens_per_second(
    config: TransformerConfig, batch_tokens: int, precision: str, device: torch.device
) -> float:
    """Time whole training steps of a model (forward, loss, backward, Adam) on a synthetic batch.

    Parameters
    ----------
    config : TransformerConfig
        The model (built with random weights; dropout as configured).
    batch_tokens : int
        Target tokens per batch (``train.max_tokens``): ``batch_tokens // 16`` sentences of 16 tokens a side.
    precision : str
        "fp32", "bf16" or "fp16": the autocast the trainer will use.
    device : torch.device
        Where to time.

    Returns
    -------
    float
        Target tokens per second of the fastest step.

    Notes
    -----
    Whole steps, not a product: at Multi30k's sizes the softmax over the vocabulary, layer norms, dropout and
    the optimizer are a third of a CPU step, so a matrix-product probe would overstate the smaller models'
    advantage. A handful of steps (one to warm up) take 1-10 s on a 2-core CPU; the answer is cached.
    """
    model = Transformer(config).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    rows = max(1, batch_tokens // PROBE_SENTENCE_LENGTH)
    generator = torch.Generator().manual_seed(0)
    low = config.pad_id + 1
    shape = (rows, PROBE_SENTENCE_LENGTH)
    src_tokens = torch.randint(low, config.src_vocab_size, shape, generator=generator).to(device)
    tgt_tokens = torch.randint(low, config.tgt_vocab_size, shape, generator=generator).to(device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = model(src_tokens, tgt_tokens)
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt_tokens.flatten())
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()

    seconds = time_candidates({"step": step}, device, rounds=3, budget_seconds=2.0)["step"]
    return rows * PROBE_SENTENCE_LENGTH / seconds


def decide_training_throughput(
    config: TransformerConfig,
    batch_tokens: int,
    precision: str,
    device: torch.device,
    cache: ProbeCache,
    measure: Callable[[TransformerConfig, int, str, torch.device], float] | None = None,
) -> tuple[float, str]:
    """Return this machine's training speed for a model, measured once and cached.

    Parameters
    ----------
    config : TransformerConfig
        The model.
    batch_tokens : int
        Target tokens per batch.
    precision : str
        The resolved training precision ("fp32", "bf16", "fp16").
    device : torch.device
        The training device.
    cache : ProbeCache
        Answers from earlier runs on this machine.
    measure : callable or None
        Replaces :func:`measure_training_tokens_per_second` (tests pass a fake one).

    Returns
    -------
    tokens_per_second : float
        Target tokens per second.
    provenance : str
        " (cached)", "" or the cache's note on a busy machine.

    Notes
    -----
    The cache key holds every field of the model config, the batch and the precision, with the machine's
    fingerprint (CPU model and flags, torch version, threads), so another rung or another thread count is
    measured anew.
    """
    machine = machine_fingerprint(device)
    shape = {"model": dataclasses.asdict(config), "batch_tokens": batch_tokens, "precision": precision}
    key = fingerprint_key(machine, "throughput", shape)
    probe = measure or measure_training_tokens_per_second

    def run() -> dict[str, object]:
        return {"tokens_per_second": float(probe(config, batch_tokens, precision, device))}

    stored, provenance = cache.lookup_or_measure(key, machine, run)
    return float(stored["tokens_per_second"]), provenance
