"""Training FLOPs counted with ``FlopCounterMode``, against hand counts of a small Transformer and LSTM model."""

import copy

import pytest
import torch

from transformer.baselines.rnn import RNNEncoderDecoder
from transformer.baselines.rnn_config import RNNConfig
from transformer.data.pipeline.batch import Batch
from transformer.experiments.rnn_baseline.training_flops import count_training_flops
from transformer.experiments.table2.compute import training_flops_per_pair
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer


def _batch(src_tokens: torch.Tensor, tgt_input: torch.Tensor, tgt_output: torch.Tensor) -> Batch:
    real = int(tgt_output.ne(0).sum())
    return Batch(src_tokens, tgt_input, tgt_output, int(src_tokens.ne(0).sum()), real, 0.0, [])


def test_transformer_flops_equal_a_hand_count() -> None:
    batch_size, src_len, tgt_len = 3, 7, 5
    d, d_ff, vocab, enc_layers, dec_layers = 32, 64, 50, 2, 1
    config = TransformerConfig(
        vocab_size=vocab, d_model=d, d_ff=d_ff, num_heads=4, num_encoder_layers=enc_layers,
        num_decoder_layers=dec_layers, dropout=0.1, attention_implementation="fused",
    )  # fmt: skip
    model = Transformer(config)
    batch = _batch(
        torch.randint(4, vocab, (batch_size, src_len)),
        torch.randint(4, vocab, (batch_size, tgt_len)),
        torch.randint(4, vocab, (batch_size, tgt_len)),
    )
    # Forward matrix products (a multiply-add counts 2) per sentence: four d x d projections and the two
    # attention products per self-attention, cross-attention's queries and output on the target and keys and
    # values on the source, two feed-forward products, the (tied) output projection.
    n, m = src_len, tgt_len
    encoder = 8 * n * d * d + 4 * n * n * d + 4 * n * d * d_ff
    decoder = 8 * m * d * d + 4 * m * m * d + 4 * m * d * d + 4 * n * d * d + 4 * m * n * d + 4 * m * d * d_ff
    forward = batch_size * (enc_layers * encoder + dec_layers * decoder + 2 * m * d * vocab)
    counted = count_training_flops(model, [batch], label_smoothing=0.1, pad_id=0)
    # Backward: two products (input and weight gradients) per forward product; the token ids need none.
    assert counted.flops == 3 * forward
    assert counted.target_tokens == batch_size * tgt_len and counted.batches == 1
    assert counted.per_target_token == 3 * forward / (batch_size * tgt_len)
    # The counted copy is a float32 CPU copy: the model itself is left as it was.
    assert all(parameter.grad is None for parameter in model.parameters())


def test_table2s_formula_equals_the_counter_with_wide_heads_and_unequal_lengths() -> None:
    # The formula that sets big-same-flops' steps, against the counter, where h * d_k and h * d_v differ
    # from d_model and from each other, the stacks differ in depth and the source outlasts the target.
    batch_size, src_len, tgt_len = 2, 9, 4
    settings = {
        "vocab_size": 40, "d_model": 24, "d_ff": 40, "num_heads": 3, "d_k": 16, "d_v": 4,
        "num_encoder_layers": 1, "num_decoder_layers": 2,
    }  # fmt: skip
    model = Transformer(TransformerConfig(**settings, dropout=0.1, attention_implementation="explicit"))
    batch = _batch(
        torch.randint(4, 40, (batch_size, src_len)),
        torch.randint(4, 40, (batch_size, tgt_len)),
        torch.randint(4, 40, (batch_size, tgt_len)),
    )
    counted = count_training_flops(model, [batch], label_smoothing=0.1, pad_id=0)
    assert counted.flops == batch_size * training_flops_per_pair(settings, src_len, tgt_len)
    # d_k and d_v left out mean d_model / num_heads, as in TransformerConfig.
    implicit = {**settings, "d_k": None, "d_v": None, "num_heads": 4}
    explicit = {**settings, "d_k": 6, "d_v": 6, "num_heads": 4}
    assert training_flops_per_pair(implicit, 7, 5) == training_flops_per_pair(explicit, 7, 5)


def test_rnn_flops_equal_a_hand_count_and_see_inside_the_lstm() -> None:
    batch_size, src_len, tgt_len = 3, 6, 5
    hidden, vocab = 32, 50
    config = RNNConfig(
        vocab_size=vocab, embedding_dim=hidden, hidden_size=hidden, num_encoder_layers=2,
        num_decoder_layers=2, dropout=0.1, attention="general",
    )  # fmt: skip
    model = RNNEncoderDecoder(config)
    batch = _batch(
        torch.randint(4, vocab, (batch_size, src_len)),
        torch.randint(4, vocab, (batch_size, tgt_len)),
        torch.randint(4, vocab, (batch_size, tgt_len)),
    )
    units = hidden // 2  # per encoder direction
    gates = 4
    # Encoder: two layers, two directions, input and recurrent products of the four gates per position.
    encoder = sum(
        2 * (2 * src_len * gates * units * inputs + 2 * src_len * gates * units * units)
        for inputs in (hidden, hidden)
    )
    bridge = 2 * 2 * hidden * 2 * hidden  # h_0 and c_0 of both decoder layers from [->h_n; <-h_1]
    keys = 2 * src_len * hidden * hidden  # W_a h_s, once per sentence
    # Decoder per position: layer 1 reads [embedding; h~_{t-1}], layer 2 the layer below; both their state.
    lstm = 2 * gates * hidden * (2 * hidden) + 2 * gates * hidden * hidden + 2 * 2 * gates * hidden * hidden
    attention = 2 * 2 * src_len * hidden + 2 * 2 * hidden * hidden  # scores, context, W_c [c; h]
    decoder = tgt_len * (lstm + attention + 2 * hidden * vocab)
    forward = batch_size * (encoder + bridge + keys + decoder)
    # The encoder's initial states are zeros that need no gradient: one recurrent product per direction and
    # layer has no backward product for its input.
    skipped = batch_size * 2 * 2 * (2 * gates * units * units)
    counted = count_training_flops(model, [batch], label_smoothing=0.1, pad_id=0)
    assert counted.flops == 3 * forward - skipped
    if torch.backends.mkldnn.is_available():
        # With oneDNN on (PyTorch's CPU default) the LSTM kernels are opaque to the counter: it would see a
        # fraction of the products (the attention and output layers).
        assert counted.flops > 5 * _count_with_onednn(model, batch)


def _count_with_onednn(model: RNNEncoderDecoder, batch: Batch) -> int:
    """What ``FlopCounterMode`` sees of a training step without the countable-kernel switches."""
    from torch.utils.flop_counter import FlopCounterMode

    counted = copy.deepcopy(model).train()
    with FlopCounterMode(display=False) as counter:
        counted(batch.src_tokens, batch.tgt_input).sum().backward()
    return int(counter.get_total_flops())


def test_count_training_flops_refuses_no_batches() -> None:
    model = Transformer(TransformerConfig(vocab_size=20, d_model=8, d_ff=16, num_heads=2))
    with pytest.raises(ValueError, match="no batches"):
        count_training_flops(model, [], 0.1, 0)
