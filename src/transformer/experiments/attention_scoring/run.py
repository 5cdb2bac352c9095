"""The attention-scoring experiment's measure hook: attention statistics of a trained run and of its start."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from transformer.config.experiment import ExperimentConfig
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.experiments.attention_scoring.attention_statistics import measure_pairs
from transformer.experiments.attention_scoring.settings import STATISTICS_MAX_TOKENS, STATISTICS_PAIRS
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer


def measure(
    *,
    model: Transformer,
    tokenizer: TextTokenizer,
    pairs: Sequence[tuple[str, str]],
    config: ExperimentConfig,
    run_dir: Path,
    **_: Any,
) -> dict[str, Any]:
    """Measure the attention statistics of a trained run and of its model at initialisation.

    Parameters
    ----------
    model : Transformer
        The scored (trained) model.
    tokenizer : TextTokenizer
        Its tokenizer.
    pairs : sequence of (str, str)
        The validation pairs.
    config : ExperimentConfig
        The run's configuration.
    run_dir : Path
        The run directory (unused).
    **_ : Any
        Further inputs a newer worker may pass.

    Returns
    -------
    dict of str to Any
        ``trained_STAT`` and ``init_STAT`` for every statistic (averaged over all layers), ``..._STAT_KIND``
        per attention kind, ``trained_attention_layers`` and ``init_attention_layers`` (per layer), and
        ``statistics_pairs``.

    Notes
    -----
    The initial model is rebuilt as the trainer builds it (``torch.manual_seed(train.seed)`` then
    ``Transformer(config.model)``), so it has the very weights the run started from, without the run having
    to keep a checkpoint of step 0; the global random state is restored afterwards. The loss whose gradient is
    measured uses the run's label smoothing.
    """
    smoothing = config.train.label_smoothing
    selected = list(pairs)[:STATISTICS_PAIRS]
    trained = measure_pairs(model, tokenizer, selected, smoothing, max_tokens=STATISTICS_MAX_TOKENS)
    if not isinstance(config.model, TransformerConfig):
        architecture = config.model.architecture
        raise ValueError(f"attention statistics are a Transformer's; model.architecture is {architecture!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.train.seed)
        initial = Transformer(config.model)
    initial.to(next(model.parameters()).device)
    at_init = measure_pairs(initial, tokenizer, selected, smoothing, max_tokens=STATISTICS_MAX_TOKENS)
    return {**at_init.to_dict("init_"), **trained.to_dict("trained_"), "statistics_pairs": len(selected)}
