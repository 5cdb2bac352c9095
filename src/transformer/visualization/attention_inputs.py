"""The attention maps of one sentence pair, with the token labels of both axes, ready to plot.

``transformer attention`` translates a sentence (or takes a given target), then runs the model once with
teacher forcing to collect every attention map. The decoder input must be built exactly as in training and
decoding: the model's decoder start token (``TransformerConfig.start_id``: BOS for this project's models, the
pad id for imported Marian models) followed by the target encoded with the *target* vocabulary.
"""

from dataclasses import dataclass

import torch

from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.model.transformer import AttentionWeights, Transformer


@dataclass(frozen=True)
class SentenceAttention:
    """Every attention map of one sentence pair and the labels of their axes.

    Parameters
    ----------
    attention : AttentionWeights
        Encoder self-, decoder self- and cross-attention weights, each per layer of shape
        (1, num_heads, query_len, key_len).
    source_tokens : list of str
        Source pieces, EOS included: the encoder axis (length src_len).
    target_tokens : list of str
        Decoder input pieces, the start token first: the decoder axis (length tgt_len).

    Notes
    -----
    Row ``i`` of a decoder map belongs to decoder input ``i``, which predicts target token ``i``: the first
    row is the start token's, so it shows what the model attends to before emitting the first word.
    """

    attention: AttentionWeights
    source_tokens: list[str]
    target_tokens: list[str]


def sentence_attention(
    model: Transformer, tokenizer: TextTokenizer, source: str, target: str
) -> SentenceAttention:
    """Run one sentence pair through the model with teacher forcing and collect its attention maps.

    Parameters
    ----------
    model : Transformer
        The model, in eval mode (dropout would perturb the maps).
    tokenizer : TextTokenizer
        Its tokenizer: source text is encoded with :meth:`TextTokenizer.encode`, the target with
        :meth:`TextTokenizer.encode_target`.
    source : str
        Raw source sentence.
    target : str
        Raw target sentence (typically the model's own translation).

    Returns
    -------
    SentenceAttention
        The maps (on the CPU, float32) and the token labels.

    Notes
    -----
    Uses :meth:`Transformer.forward_with_attention` (the explicit formula, quadratic memory): meant for one
    sentence at a time. The source ends with EOS as in training; the target does not, because the decoder
    input stops before the last prediction.
    """
    config = model.config
    source_ids = [*tokenizer.encode(source), config.eos_id]
    target_ids = [config.start_id, *tokenizer.encode_target(target)]
    device = next(model.parameters()).device
    with torch.inference_mode():
        _, attention = model.forward_with_attention(
            torch.tensor([source_ids], device=device), torch.tensor([target_ids], device=device)
        )
    attention = AttentionWeights(
        *(
            [weights.float().cpu() for weights in maps]
            for maps in (attention.encoder_self, attention.decoder_self, attention.cross)
        )
    )
    return SentenceAttention(
        attention,
        [tokenizer.source_id_to_piece(token) for token in source_ids],
        [tokenizer.id_to_piece(token) for token in target_ids],
    )
