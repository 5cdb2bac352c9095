"""What the attention softmax sees: score variance, entropy, saturation and the gradient reaching the logits.

Section 3.2.1 of the paper argues for the 1/sqrt(d_k) factor without measuring anything: for large d_k "the
dot products grow large in magnitude, pushing the softmax function into regions where it has extremely small
gradients". This module measures exactly those quantities on a model and a few batches, per attention layer
of each kind (encoder self-attention, masked decoder self-attention, encoder-decoder attention):

* ``qk_variance``: the variance of the raw dot products q . k, before any scaling;
* ``entropy``: the mean entropy (nats) of the attention rows, the softmax of the logits;
* ``saturated_share``: the share of rows whose largest probability exceeds 0.99;
* ``logit_grad_norm``: the L2 norm of the gradient of the training loss with respect to the logits (the
  scaled scores the softmax normalises), over every head, position and batch.

The logits are the model's own: :class:`~transformer.model.multihead_attention.MultiHeadAttention` hands them
to a ``logits_hook`` while it attends, so nothing of the model is re-implemented here. Masks are respected:
keys a query may not see (padding, the future) are left out of the variance and of the softmax, queries that
are padding are left out altogether.
"""

import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from transformer.data.pipeline.batch import Batch, collate
from transformer.data.pipeline.dataset import encode_corpus
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.data.pipeline.token_batch_sampler import TokenBatchSampler
from transformer.model.multihead_attention import LogitsHook, MultiHeadAttention
from transformer.model.transformer import Transformer

#: The three uses of attention in the model, in the order of the layers' statistics.
ATTENTION_KINDS = ("encoder_self", "decoder_self", "cross")
#: The statistics measured per layer; also the keys of :meth:`AttentionStatistics.averages`.
STATISTICS = ("qk_variance", "entropy", "saturated_share", "logit_grad_norm")
#: A row is saturated when its largest attention probability exceeds this.
SATURATION_THRESHOLD = 0.99


@dataclass(frozen=True)
class LayerStatistics:
    """The attention statistics of one layer of one kind, pooled over heads, positions and batches.

    Parameters
    ----------
    kind : str
        ``encoder_self``, ``decoder_self`` or ``cross``.
    layer : int
        Layer index within its stack, from 0.
    qk_variance : float
        Population variance of the raw dot products q . k over every allowed (query, key) pair of every head.
    entropy : float
        Mean entropy in nats of the attention rows that have at least two allowed keys.
    saturated_share : float
        Share of those rows whose largest probability exceeds the saturation threshold.
    logit_grad_norm : float
        L2 norm of d(loss)/d(logits) over all heads, rows and batches of the layer.
    scores : int
        Allowed (query, key) pairs counted in ``qk_variance``, heads included.
    rows : int
        Rows counted in ``entropy`` and ``saturated_share``, heads included.

    Notes
    -----
    A row with a single allowed key (the first target position in decoder self-attention) has probability
    1 on that key whatever the scores: it is left out of entropy and saturation, which would otherwise
    count it as saturated by construction. Statistics of a layer with no such row are NaN.
    """

    kind: str
    layer: int
    qk_variance: float
    entropy: float
    saturated_share: float
    logit_grad_norm: float
    scores: int
    rows: int


@dataclass(frozen=True)
class AttentionStatistics:
    """The attention statistics of every layer of a model, with averages per kind and overall.

    Parameters
    ----------
    layers : list of LayerStatistics
        Encoder self-attention layers, then decoder self-attention, then cross-attention, each by index.

    Notes
    -----
    The averages are unweighted means over layers (each layer counts once, whatever its number of rows), so
    a two-layer stack whose first layer saturates and whose second does not averages to a share of one half.
    """

    layers: list[LayerStatistics] = field(default_factory=list)

    def averages(self) -> dict[str, float]:
        """Average every statistic over the layers of each kind and over all layers.

        Returns
        -------
        dict of str to float
            ``STAT`` (all layers) and ``STAT_KIND`` (e.g. ``entropy_cross``) for every statistic in
            :data:`STATISTICS` and kind in :data:`ATTENTION_KINDS`.

        Notes
        -----
        NaN layers (no row to measure) are left out of the means; a mean over no layer is NaN.
        """
        averages: dict[str, float] = {}
        for name in STATISTICS:
            averages[name] = _mean([getattr(layer, name) for layer in self.layers])
            for kind in ATTENTION_KINDS:
                values = [getattr(layer, name) for layer in self.layers if layer.kind == kind]
                averages[f"{name}_{kind}"] = _mean(values)
        return averages

    def to_dict(self, prefix: str = "") -> dict[str, Any]:
        """Flatten into a results record: the averages as keys, the layers as a list.

        Parameters
        ----------
        prefix : str
            Put before every key, e.g. ``"init_"`` or ``"trained_"``.

        Returns
        -------
        dict of str to Any
            ``{prefix + key: value}`` for :meth:`averages`, plus ``prefix + "attention_layers"``: one dict per
            layer (its :class:`LayerStatistics` fields).

        Notes
        -----
        JSON-serialisable (NaN is written as ``NaN``, which ``results.jsonl`` allows).
        """
        record: dict[str, Any] = {f"{prefix}{key}": value for key, value in self.averages().items()}
        record[f"{prefix}attention_layers"] = [asdict(layer) for layer in self.layers]
        return record


def _mean(values: Sequence[float]) -> float:
    """Average the finite values, NaN without any."""
    finite = [value for value in values if not math.isnan(value)]
    return sum(finite) / len(finite) if finite else math.nan


@dataclass
class _Sums:
    """Hold running sums of one layer's statistics (float64 Python numbers)."""

    scores: int = 0
    score_sum: float = 0.0
    score_square_sum: float = 0.0
    rows: int = 0
    entropy_sum: float = 0.0
    saturated: int = 0
    gradient_square_sum: float = 0.0

    def result(self, kind: str, layer: int) -> LayerStatistics:
        """Turn the sums into the layer's statistics."""
        mean = self.score_sum / self.scores if self.scores else math.nan
        variance = self.score_square_sum / self.scores - mean * mean if self.scores else math.nan
        return LayerStatistics(
            kind=kind,
            layer=layer,
            qk_variance=max(variance, 0.0) if self.scores else math.nan,
            entropy=self.entropy_sum / self.rows if self.rows else math.nan,
            saturated_share=self.saturated / self.rows if self.rows else math.nan,
            logit_grad_norm=math.sqrt(self.gradient_square_sum),
            scores=self.scores,
            rows=self.rows,
        )


def attention_modules(model: Transformer) -> list[tuple[str, int, MultiHeadAttention]]:
    """List a model's attention sub-layers with their kind and layer index.

    Parameters
    ----------
    model : Transformer
        The model.

    Returns
    -------
    list of (str, int, MultiHeadAttention)
        ``("encoder_self", i, ...)`` for every encoder layer, then ``("decoder_self", i, ...)`` and
        ``("cross", i, ...)`` for every decoder layer.

    Notes
    -----
    Reads the stacks' ``self_attention`` and ``cross_attention`` attributes, the names the model's layers
    use; the order is that of :data:`ATTENTION_KINDS`.
    """
    stacks = (
        ("encoder_self", model.encoder.layers, "self_attention"),
        ("decoder_self", model.decoder.layers, "self_attention"),
        ("cross", model.decoder.layers, "cross_attention"),
    )
    modules: list[tuple[str, int, MultiHeadAttention]] = []
    for kind, layers, name in stacks:
        for index, layer in enumerate(layers):
            module = getattr(layer, name)
            if not isinstance(module, MultiHeadAttention):
                raise TypeError(
                    f"{kind} layer {index}: {name} is a {type(module).__name__}, not MultiHeadAttention"
                )
            modules.append((kind, index, module))
    return modules


def allowed_pairs(logits_shape: torch.Size, attend_mask: Tensor | None, query_valid: Tensor) -> Tensor:
    """Mark the (query, key) pairs that count: the key is visible to the query and the query is real.

    Parameters
    ----------
    logits_shape : torch.Size
        ``(batch, num_heads, query_len, key_len)``.
    attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, query_len, key_len)
        The mask the attention received (True where attention is allowed); None allows every pair.
    query_valid : torch.Tensor, shape (batch, query_len), bool
        True on the queries that are real tokens (not padding).

    Returns
    -------
    torch.Tensor, shape ``logits_shape``, bool
        True where both hold.

    Notes
    -----
    Padding queries do attend in the model (their outputs are computed and ignored), but nothing they
    compute reaches the loss, so their rows would only add noise to the statistics.
    """
    allowed = query_valid[:, None, :, None].expand(logits_shape)
    if attend_mask is not None:
        allowed = allowed & attend_mask.expand(logits_shape)
    return allowed


def row_statistics(
    logits: Tensor, allowed: Tensor, saturation: float = SATURATION_THRESHOLD
) -> tuple[Tensor, Tensor, Tensor]:
    """Entropy and saturation of the masked softmax of every row.

    Parameters
    ----------
    logits : torch.Tensor, shape (..., key_len)
        Attention logits (the scores the softmax normalises).
    allowed : torch.Tensor, bool, same shape
        True on the keys each row may attend to.
    saturation : float
        Threshold on a row's largest probability.

    Returns
    -------
    counted : torch.Tensor, shape (...), bool
        Rows with at least two allowed keys, the rows that count.
    entropy : torch.Tensor, shape (...), float64
        ``-sum p log p`` over the allowed keys (0 for rows not counted).
    saturated : torch.Tensor, shape (...), bool
        Counted rows whose largest probability exceeds ``saturation``.

    Notes
    -----
    Computed in float64 from the logits, with masked keys at -inf, so the probabilities are those of the
    model's masked softmax; 0 log 0 is taken as 0.
    """
    probabilities = torch.softmax(logits.double().masked_fill(~allowed, -math.inf), dim=-1)
    probabilities = torch.nan_to_num(probabilities, nan=0.0)  # rows without any allowed key
    plogp = torch.where(
        probabilities > 0, probabilities * probabilities.log(), torch.zeros_like(probabilities)
    )
    counted = allowed.sum(dim=-1) >= 2
    entropy = torch.where(counted, -plogp.sum(dim=-1), torch.zeros_like(plogp[..., 0]))
    saturated = counted & (probabilities.amax(dim=-1) > saturation)
    return counted, entropy, saturated


def _observer(
    sums: _Sums, query_valid: Tensor, saturation: float, observed: list[tuple[_Sums, Tensor]]
) -> LogitsHook:
    """Build the logits hook of one attention module for one batch."""

    def observe(query: Tensor, key: Tensor, logits: Tensor, attend_mask: Tensor | None) -> Tensor:
        with torch.no_grad():
            allowed = allowed_pairs(logits.shape, attend_mask, query_valid)
            raw = torch.matmul(query.double(), key.double().transpose(-2, -1))  # q . k, unscaled
            scores = raw[allowed]
            sums.scores += scores.numel()
            sums.score_sum += float(scores.sum())
            sums.score_square_sum += float(scores.square().sum())
            counted, entropy, saturated = row_statistics(logits, allowed, saturation)
            sums.rows += int(counted.sum())
            sums.entropy_sum += float(entropy.sum())
            sums.saturated += int(saturated.sum())
        if logits.requires_grad:
            observed.append((sums, logits))
        return logits

    return observe


@contextmanager
def _observed_modules(modules: Sequence[tuple[str, int, MultiHeadAttention]]) -> Iterator[None]:
    """Clear every module's logits hook on the way out, whatever happened."""
    try:
        yield
    finally:
        for _, _, module in modules:
            module.logits_hook = None


def measure_attention(
    model: Transformer,
    batches: Iterable[Batch],
    label_smoothing: float = 0.0,
    saturation: float = SATURATION_THRESHOLD,
) -> AttentionStatistics:
    """Measure the attention statistics of a model on some batches.

    Parameters
    ----------
    model : Transformer
        The model; its parameters' ``requires_grad`` and its train/eval mode are restored afterwards.
    batches : iterable of Batch
        Padded batches (moved to the model's device here).
    label_smoothing : float
        Smoothing of the loss whose gradient is measured (the run's ``train.label_smoothing``).
    saturation : float
        Threshold on a row's largest probability.

    Returns
    -------
    AttentionStatistics
        One :class:`LayerStatistics` per attention sub-layer.

    Raises
    ------
    ValueError
        Without batches.

    Notes
    -----
    The model runs in eval mode (no dropout), so the statistics of a model do not depend on a random draw, and
    with autograd on. The loss is the training objective of one step over all the batches: the label-smoothed
    cross-entropy summed over target tokens and divided by their number. Its gradient with respect to each
    layer's logits is taken with ``torch.autograd.grad``, so no parameter's ``.grad`` is touched. Padding and
    masked keys get zero gradient in the model, so the norm is over real entries only.
    """
    batches = list(batches)
    if not batches:
        raise ValueError("measure_attention needs at least one batch")
    modules = attention_modules(model)
    sums = {(kind, index): _Sums() for kind, index, _ in modules}
    total_tokens = sum(batch.num_target_tokens for batch in batches)
    device = next(model.parameters()).device
    parameters = list(model.parameters())
    requires_grad = [parameter.requires_grad for parameter in parameters]
    was_training = model.training
    model.eval()
    try:
        with _observed_modules(modules), torch.enable_grad():
            for parameter in parameters:
                parameter.requires_grad_(True)
            for batch in batches:
                _observe_batch(
                    model, batch.to(device), modules, sums, saturation, label_smoothing, total_tokens
                )
    finally:
        for parameter, flag in zip(parameters, requires_grad, strict=True):
            parameter.requires_grad_(flag)
        model.train(was_training)
    return AttentionStatistics([sums[(kind, index)].result(kind, index) for kind, index, _ in modules])


def _observe_batch(
    model: Transformer,
    batch: Batch,
    modules: list[tuple[str, int, MultiHeadAttention]],
    sums: dict[tuple[str, int], _Sums],
    saturation: float,
    label_smoothing: float,
    total_tokens: int,
) -> None:
    """Add one batch's logit statistics and the gradient of its share of the loss to ``sums``."""
    pad_id = model.config.pad_id
    source_valid = batch.src_tokens.ne(pad_id)  # (batch, src_len)
    target_valid = batch.tgt_input.ne(pad_id)  # (batch, tgt_len)
    observed: list[tuple[_Sums, Tensor]] = []
    for kind, index, module in modules:
        valid = source_valid if kind == "encoder_self" else target_valid
        module.logits_hook = _observer(sums[(kind, index)], valid, saturation, observed)
    logits = model(batch.src_tokens, batch.tgt_input)  # (batch, tgt_len, vocab_size)
    # The trainer's label_smoothed_nll_loss, which equals this sum (tested there).
    loss = F.cross_entropy(
        logits.flatten(0, 1).float(),
        batch.tgt_output.flatten(),
        ignore_index=pad_id,
        reduction="sum",
        label_smoothing=label_smoothing,
    )
    gradients = torch.autograd.grad(
        loss / total_tokens, [tensor for _, tensor in observed], allow_unused=True
    )
    for (layer_sums, _), gradient in zip(observed, gradients, strict=True):
        if gradient is not None:
            layer_sums.gradient_square_sum += float(gradient.double().square().sum())


def pair_batches(
    pairs: Sequence[tuple[str, str]],
    tokenizer: TextTokenizer,
    model: Transformer,
    max_tokens: int = 1024,
    max_pairs: int | None = None,
) -> list[Batch]:
    """Batch sentence pairs for :func:`measure_attention`, as the validation does.

    Parameters
    ----------
    pairs : sequence of (str, str)
        Source sentence and reference translation.
    tokenizer : TextTokenizer
        The model's tokenizer.
    model : Transformer
        The model (for its special ids).
    max_tokens : int
        Token budget per batch.
    max_pairs : int or None
        Use only the first pairs (None: all).

    Returns
    -------
    list of Batch
        Length-sorted batches on the CPU.

    Notes
    -----
    Built like :func:`transformer.evaluation.perplexity.corpus_perplexity`'s batches: empty pairs and
    pairs longer than ``max_tokens`` are dropped, the order is fixed (no shuffling), so two models measured
    on the same pairs see the very same batches.
    """
    config = model.config
    selected = list(pairs[:max_pairs] if max_pairs is not None else pairs)
    corpus = encode_corpus(selected, tokenizer, max_len=max_tokens, eos_id=config.eos_id)
    sampler = TokenBatchSampler(corpus.source_lengths, corpus.target_lengths, max_tokens, shuffle=False)
    return [
        collate(indices, corpus, config.pad_id, config.start_id, config.eos_id)
        for indices in sampler.batches(0)
    ]


def measure_pairs(
    model: Transformer,
    tokenizer: TextTokenizer,
    pairs: Sequence[tuple[str, str]],
    label_smoothing: float = 0.0,
    max_tokens: int = 1024,
    max_pairs: int | None = None,
) -> AttentionStatistics:
    """Measure the attention statistics of a model on sentence pairs.

    Parameters
    ----------
    model : Transformer
        The model.
    tokenizer : TextTokenizer
        Its tokenizer.
    pairs : sequence of (str, str)
        Source sentence and reference translation.
    label_smoothing : float
        Smoothing of the loss whose gradient is measured.
    max_tokens : int
        Token budget per batch.
    max_pairs : int or None
        Use only the first pairs (None: all).

    Returns
    -------
    AttentionStatistics
        As :func:`measure_attention`.

    Notes
    -----
    :func:`pair_batches` then :func:`measure_attention`; the batch size changes nothing but memory and the
    float rounding of the sums (the gradient is of the loss over all the pairs at once).
    """
    return measure_attention(
        model, pair_batches(pairs, tokenizer, model, max_tokens, max_pairs), label_smoothing=label_smoothing
    )
