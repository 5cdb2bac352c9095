"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017): library entry points."""

from transformer.config import TransformerConfig
from transformer.model.multihead_attention import MultiHeadAttention
from transformer.model.scaled_dot_product_attention import scaled_dot_product_attention
from transformer.model.transformer import AttentionWeights, Transformer

__all__ = [
    "AttentionWeights",
    "MultiHeadAttention",
    "Transformer",
    "TransformerConfig",
    "scaled_dot_product_attention",
]
__version__ = "0.1.0"
