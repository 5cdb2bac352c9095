"""Training compute of a Table 2 row, counted from its model settings: big against base at equal FLOPs.

The paper's big model trains three times base's steps, so "big is better" mixes size with training length.
Two method rows take it apart: ``big-same-steps`` (base's steps) and ``big-same-flops``, big trained for as
many matrix-product FLOPs as base. Equal FLOPs is the machine-independent form of "the same wall time": a
step count written into the plan cannot depend on the CPU that happens to run it, while the FLOPs of a step
follow from the settings alone (the table's ``min/run`` column shows the wall times each run took).
"""

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

#: Source and target length (BPE tokens) at which the FLOPs of two rows are compared. The ratio between rows
#: hardly depends on it: at the CPU scale, base's FLOPs over big's is 0.3189 at 10 tokens, 0.3200 at 20 and
#: 0.3221 at 40 (the length-squared attention products are a few percent of a step at these lengths).
COMPARISON_LENGTH = 20


def training_flops_per_pair(model: Mapping[str, Any], source_length: int, target_length: int) -> int:
    """Count the matrix-product FLOPs of one training step on one sentence pair.

    Parameters
    ----------
    model : mapping of str to Any
        ``TransformerConfig`` fields as a run configuration's ``model`` section: ``d_model``, ``d_ff``,
        ``num_heads``, ``d_k`` and ``d_v`` (None: ``d_model / num_heads``), ``num_encoder_layers``,
        ``num_decoder_layers``, ``vocab_size`` (and ``target_vocab_size`` when the output vocabulary differs).
    source_length : int
        Source tokens n.
    target_length : int
        Target tokens m (the decoder's input and output length).

    Returns
    -------
    int
        Forward and backward FLOPs (a multiply-add counts 2) of the model's matrix products.

    Notes
    -----
    With a = h * d_k and b = h * d_v, a self-attention over L positions costs 4Lda + 4Ldb for its four
    projections and 2L^2 a + 2L^2 b for the scores and the weighted values; cross-attention puts its queries and
    output on the m target positions and its keys and values on the n source positions; the feed-forward
    network costs 4Ld d_ff; the output projection 2md V. The backward pass costs twice the forward (a gradient
    for each operand of each product), so a step is three forward passes: the convention of
    ``torch.utils.flop_counter`` and of the paper's cost estimates, element-wise work left out. Equal to what
    :func:`transformer.experiments.rnn_baseline.training_flops.count_training_flops` counts on an unpadded
    pair (tested).
    """
    d_model, d_ff, heads = int(model["d_model"]), int(model["d_ff"]), int(model["num_heads"])
    d_k = int(model.get("d_k") or d_model // heads)
    d_v = int(model.get("d_v") or d_model // heads)
    keys, values = heads * d_k, heads * d_v
    n, m = source_length, target_length
    vocabulary = int(model.get("target_vocab_size") or model["vocab_size"])

    def self_attention(length: int) -> int:
        return 4 * length * d_model * (keys + values) + 2 * length * length * (keys + values)

    cross_attention = 2 * d_model * (m * keys + n * keys + n * values + m * values) + 2 * m * n * (
        keys + values
    )
    encoder_layer = self_attention(n) + 4 * n * d_model * d_ff
    decoder_layer = self_attention(m) + cross_attention + 4 * m * d_model * d_ff
    forward = (
        int(model["num_encoder_layers"]) * encoder_layer
        + int(model["num_decoder_layers"]) * decoder_layer
        + 2 * m * d_model * vocabulary
    )
    return 3 * forward


def equal_flops_step_factor(base_model: Mapping[str, Any], model: Mapping[str, Any]) -> Fraction:
    """Give the multiple of base's steps at which a row trains for base's FLOPs.

    Parameters
    ----------
    base_model : mapping of str to Any
        The base row's ``model`` settings (see :func:`training_flops_per_pair`).
    model : mapping of str to Any
        The other row's ``model`` settings.

    Returns
    -------
    Fraction
        Base's FLOPs per step over the row's, at :data:`COMPARISON_LENGTH` tokens on both sides; the runner
        trains ``round(base steps * factor)`` steps.

    Notes
    -----
    Both rows see the same batches (the same tokens per step), so equal FLOPs means steps in the inverse ratio
    of the FLOPs per step. Exact (a fraction of two integer counts), so the planned step count, and with it
    the run's configuration fingerprint, is the same on every machine.
    """
    length = COMPARISON_LENGTH
    return Fraction(
        training_flops_per_pair(base_model, length, length), training_flops_per_pair(model, length, length)
    )
