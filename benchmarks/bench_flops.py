"""Analytic FLOPs of one training step of the encoder-decoder Transformer, per target token.

The count is the matrix products only (the convention behind MFU, Chowdhery et al. 2022, appendix B):
layer norms, softmax, dropout, embeddings lookups and the optimizer are left out. A product of an (m, k) and
a (k, n) matrix is 2 m k n FLOPs. For source length S and target length T per sentence, d = d_model,
f = d_ff, V = vocabulary, N_e and N_d layers, the forward pass of one sentence does

* encoder layer: 2 S (4 d^2 + 2 d f) for the Q, K, V, O projections and the feed-forward network, plus
  4 S^2 d for Q K^T and the weighted sum of V;
* decoder layer: 2 T (4 d^2 + 2 d f) for self-attention projections and feed-forward, 2 T 2 d^2 + 2 S 2 d^2
  for the cross-attention Q, O (on target positions) and K, V (on source positions), 4 T^2 d for causal
  self-attention (counted in full: the kernels compute the masked half too) and 4 T S d for cross-attention;
* output projection: 2 T d V.

Backward costs twice the forward (gradients with respect to inputs and to weights), so a training step is
3 x forward. Per target token: divide by T. With S = T this is about 6 x (matmul parameters) + attention.
"""

from dataclasses import dataclass

from transformer.model.config import TransformerConfig


@dataclass(frozen=True)
class ModelShape:
    """The sizes the FLOP count depends on.

    Parameters
    ----------
    d_model, d_ff, vocab_size, num_encoder_layers, num_decoder_layers : int
        As in ``TransformerConfig``.

    Notes
    -----
    The number of heads does not change the FLOPs (it only splits d_model).
    """

    d_model: int
    d_ff: int
    vocab_size: int
    num_encoder_layers: int
    num_decoder_layers: int

    @classmethod
    def from_config(cls, config: TransformerConfig) -> "ModelShape":
        """Take the sizes of a model config.

        Parameters
        ----------
        config : TransformerConfig
            The model whose step is counted.

        Returns
        -------
        ModelShape
            Its width, feed-forward size, vocabulary and layer counts.

        Notes
        -----
        The vocabulary is the target one (the output projection's size).
        """
        return cls(
            d_model=config.d_model,
            d_ff=config.d_ff,
            vocab_size=config.tgt_vocab_size,
            num_encoder_layers=config.num_encoder_layers,
            num_decoder_layers=config.num_decoder_layers,
        )


def forward_flops_per_sentence(shape: ModelShape, source_length: int, target_length: int) -> float:
    """Matmul FLOPs of one forward pass over one sentence pair (formula in the module docstring).

    Parameters
    ----------
    shape : ModelShape
        Model sizes.
    source_length, target_length : int
        S (encoder positions, EOS included) and T (decoder positions: BOS + target).

    Returns
    -------
    float
        FLOPs.

    Notes
    -----
    Padding is counted as real work; the suite's batches have none.
    """
    d, f = shape.d_model, shape.d_ff
    source, target = source_length, target_length
    encoder_layer = 2 * source * (4 * d * d + 2 * d * f) + 4 * source * source * d
    decoder_layer = (
        2 * target * (4 * d * d + 2 * d * f)
        + 2 * target * 2 * d * d
        + 2 * source * 2 * d * d
        + 4 * target * target * d
        + 4 * target * source * d
    )
    output_projection = 2 * target * d * shape.vocab_size
    return float(
        shape.num_encoder_layers * encoder_layer
        + shape.num_decoder_layers * decoder_layer
        + output_projection
    )


def training_flops_per_target_token(shape: ModelShape, source_length: int, target_length: int) -> float:
    """Matmul FLOPs of a training step (forward + backward) per target token.

    Parameters
    ----------
    shape : ModelShape
        Model sizes.
    source_length, target_length : int
        Positions per sentence on each side.

    Returns
    -------
    float
        3 x forward FLOPs of a sentence / target_length.

    Notes
    -----
    MFU = tokens/s x this / peak FLOP/s.
    """
    return 3.0 * forward_flops_per_sentence(shape, source_length, target_length) / target_length


def decoding_flops_per_sentence(
    shape: ModelShape, source_length: int, output_length: int, beam_size: int
) -> float:
    """Matmul FLOPs of translating one sentence with the key/value cache, forced to ``output_length`` steps.

    Parameters
    ----------
    shape : ModelShape
        Model sizes.
    source_length : int
        S, encoder positions (EOS included).
    output_length : int
        T, decoder steps.
    beam_size : int
        Hypotheses kept per sentence (1: greedy); each step runs the decoder once per hypothesis.

    Returns
    -------
    float
        FLOPs: the encoder once; the cross-attention keys and values once per sentence (cached, shared by
        the beams); per hypothesis and step t (1-based) the self-attention projections and feed-forward
        2 (4 d^2 + 2 d f), the cross-attention query and output 2 (2 d^2), attention over the t cached
        positions 4 t d and over the source 4 S d per layer, and the output projection 2 d V.

    Notes
    -----
    The count is what an incremental decoder must do, so two systems doing the same search on the same
    model get the same figure and their ratio of achieved FLOP/s equals their ratio of speed. The search's
    own work (top-k, reordering the cache) is not a matrix product and is left out, as for training.
    """
    d, f, source = shape.d_model, shape.d_ff, source_length
    encoder_layer = 2 * source * (4 * d * d + 2 * d * f) + 4 * source * source * d
    cross_keys_values = shape.num_decoder_layers * 2 * source * 2 * d * d
    attended_positions = output_length * (output_length + 1) // 2  # step t attends to t positions
    per_hypothesis = (
        shape.num_decoder_layers
        * (
            output_length * (2 * (4 * d * d + 2 * d * f) + 2 * 2 * d * d + 4 * source * d)
            + 4 * attended_positions * d
        )
        + output_length * 2 * d * shape.vocab_size
    )
    return float(shape.num_encoder_layers * encoder_layer + cross_keys_values + beam_size * per_hypothesis)
