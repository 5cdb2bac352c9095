"""Resolve every automatic default of a model on a device: precision, thread count, attention threshold.

The probes time products at the model's widths: a Transformer's feed-forward block (d_model x d_ff), or for
the recurrent baseline its LSTM gate product (hidden_size x 4 hidden_size), the largest product of a step.
"""

from dataclasses import dataclass, field

import torch

from transformer.autotune.attention_probe import decide_explicit_max_length
from transformer.autotune.cache import CACHE_FILE, ProbeCache
from transformer.autotune.decision import TuningDecision
from transformer.autotune.machine import default_cache_dir
from transformer.autotune.precision_probe import decide_precision
from transformer.autotune.thread_probe import decide_threads
from transformer.autotune.workload import ProbeShape
from transformer.baselines.rnn_config import RNNConfig
from transformer.model.config import TransformerConfig


@dataclass
class ModelTuning:
    """The automatic defaults a run resolved, with one log line each.

    Parameters
    ----------
    precision : str or None
        The precision ``auto`` resolved to; None if it was not asked for.
    explicit_max_length : int or None
        The ``attention_implementation: auto`` threshold; None if the model does not use "auto".
    threads : int or None
        The thread count ``threads: null`` resolved to; None if it was not asked for (or on a GPU).
    notes : list of str
        One line per decision, naming what was measured (or read from the cache).

    Notes
    -----
    Built by :func:`tune_model`; the trainer and the translator apply it and log ``notes``.
    """

    precision: str | None = None
    explicit_max_length: int | None = None
    threads: int | None = None
    notes: list[str] = field(default_factory=list)


def default_probe_cache() -> ProbeCache:
    """Open the probe cache in the user's cache directory.

    Returns
    -------
    ProbeCache
        ``<cache dir>/autotune.json`` (see :func:`transformer.autotune.machine.default_cache_dir`).

    Notes
    -----
    Answers are kept across runs because a probe costs seconds at every start while the answer depends only
    on the machine, the PyTorch version and the model shape, all in the key. Delete the file to measure
    again, e.g. after a probe ran on a busy machine.
    """
    return ProbeCache(default_cache_dir() / CACHE_FILE)


def head_dim_of(config: TransformerConfig) -> int:
    """Return the per-head query/key width of a model.

    Parameters
    ----------
    config : TransformerConfig
        The model.

    Returns
    -------
    int
        ``d_k`` if set, else ``d_model // num_heads``.

    Notes
    -----
    Table 2 rows (A) and (B) set ``d_k`` apart from ``d_model / h``.
    """
    return config.d_k if config.d_k is not None else config.d_model // config.num_heads


def probe_widths(config: TransformerConfig | RNNConfig) -> tuple[int, int]:
    """Return the widths of the product the precision and thread probes time for a model.

    Parameters
    ----------
    config : TransformerConfig or RNNConfig
        The model.

    Returns
    -------
    tuple[int, int]
        ``(d_model, d_ff)`` for a Transformer; ``(hidden_size, 4 * hidden_size)`` for the recurrent model.

    Notes
    -----
    An LSTM step multiplies its input and its state by weights of ``4 * hidden_size`` rows (the input,
    forget and output gates and the cell candidate): the same (width x 4 width) shape as a feed-forward
    block, so the feed-forward probe measures it without a probe of its own. The cache key holds the
    widths, so the two architectures share an answer only where their products have the same shape.
    """
    if isinstance(config, RNNConfig):
        return config.hidden_size, 4 * config.hidden_size
    return config.d_model, config.d_ff


def tune_model(
    config: TransformerConfig | RNNConfig,
    device: torch.device,
    batch_tokens: int,
    precision: str,
    threads: int | None,
    cache: ProbeCache | None = None,
) -> ModelTuning:
    """Measure (or read from the cache) every automatic default of a model trained on a device.

    Parameters
    ----------
    config : TransformerConfig or RNNConfig
        The model.
    device : torch.device
        Where it runs.
    batch_tokens : int
        Tokens per batch (``train.max_tokens``), which sets the probe's product size.
    precision : str
        The requested precision; only "auto" is measured, any other value is kept.
    threads : int or None
        The requested thread count; None on the CPU is measured, a number is applied as given.
    cache : ProbeCache or None
        Where answers are kept (default: the user's cache directory).

    Returns
    -------
    ModelTuning
        The resolved values and their log lines. The thread count is already applied to PyTorch.

    Notes
    -----
    Order matters: threads first (the other probes run with them), then precision, then the attention
    threshold in that precision. Translation keeps the default threshold (256): its decoder attends one new
    query to the cached keys, a shape where the explicit products stayed faster even on the CPU where the
    fused kernel won every training shape (base model, fp32, batch 32: greedy 3.03 s against 3.54 s, beam 4
    8.08 s against 8.43 s), so a square-shape probe would mislead it. The recurrent model has no
    ``attention_implementation`` and gets no attention probe (``explicit_max_length`` stays None).
    """
    cache = cache or default_probe_cache()
    shape = ProbeShape.for_model(*probe_widths(config), batch_tokens)
    tuning = ModelTuning()
    if threads is not None:
        torch.set_num_threads(threads)
    elif device.type == "cpu":
        tuning.threads = int(_noted(tuning, decide_threads(shape, cache), "threads").value)
        torch.set_num_threads(tuning.threads)
    resolved = precision
    if precision == "auto":
        resolved = tuning.precision = _noted(
            tuning, decide_precision(shape, device, cache), "precision"
        ).value
    if (
        isinstance(config, TransformerConfig)
        and config.attention_implementation == "auto"
        and config.attention_scoring == "dot_product"
    ):
        decision = decide_explicit_max_length(
            config.num_heads, head_dim_of(config), resolved, device, cache, backward=True
        )
        tuning.explicit_max_length = int(_noted(tuning, decision, "attention").value)
    return tuning


def _noted(tuning: ModelTuning, decision: TuningDecision, what: str) -> TuningDecision:
    tuning.notes.append(f"auto {what}: {decision.reason}")
    return decision
