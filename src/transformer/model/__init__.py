"""The model of section 3, one building block per module, in the paper's order.

Masks (``masks.py``), Eq. (1) (``scaled_dot_product_attention.py``; the additive scorer of section 3.2.1 beside it),
multi-head attention (3.2.2), the position-wise feed-forward network (3.3), embeddings scaled by sqrt(d_model)
(3.4), the sinusoidal and learned positional encodings (3.5), residual sublayers with dropout (5.4), the encoder
and decoder stacks (3.1) and :class:`~transformer.model.transformer.Transformer`, configured by
:class:`~transformer.model.config.TransformerConfig` (named sizes in ``presets.py``). ``fp32_kernels.py`` and
``quantization.py`` prepare a trained model for fast inference; docs/architecture.md maps equations to functions.
"""
