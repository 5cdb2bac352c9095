"""The encoder: a stack of N identical layers of self-attention and feed-forward (section 3.1)."""

from torch import Tensor, nn

from transformer.model.config import TransformerConfig
from transformer.model.feed_forward import PositionwiseFeedForward
from transformer.model.multihead_attention import MultiHeadAttention
from transformer.model.residual import ResidualConnection


def build_attention(config: TransformerConfig) -> MultiHeadAttention:
    """Create a multi-head attention sub-layer as the config describes.

    Parameters
    ----------
    config : TransformerConfig
        Model hyper-parameters.

    Returns
    -------
    MultiHeadAttention
        With the config's heads, d_k, d_v, attention dropout, scoring and scaling.

    Notes
    -----
    Shared by the encoder and the decoder so both build attention alike.
    """
    return MultiHeadAttention(
        config.d_model,
        config.num_heads,
        d_k=config.d_k,
        d_v=config.d_v,
        dropout=config.attention_dropout,
        scoring=config.attention_scoring,
        implementation=config.attention_implementation,
        scaling=config.attention_scaling,
    )


def build_residual(config: TransformerConfig) -> ResidualConnection:
    """Create the residual wrapper of one sub-layer.

    Parameters
    ----------
    config : TransformerConfig
        Model hyper-parameters.

    Returns
    -------
    ResidualConnection
        Post-norm or pre-norm per ``config.norm_first``.

    Notes
    -----
    One per sub-layer: each owns its LayerNorm.
    """
    return ResidualConnection(
        d_model=config.d_model,
        dropout=config.dropout,
        norm_first=config.norm_first,
        layer_norm_eps=config.layer_norm_eps,
    )


class EncoderLayer(nn.Module):
    """One encoder layer: multi-head self-attention, then a position-wise feed-forward network.

    Parameters
    ----------
    config : TransformerConfig
        Model hyper-parameters.

    Notes
    -----
    Each sub-layer is wrapped in a residual connection with dropout and LayerNorm (section 3.1).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.self_attention = build_attention(config)
        self.self_attention_residual = build_residual(config)
        self.feed_forward = PositionwiseFeedForward(
            d_model=config.d_model, d_ff=config.d_ff, activation=config.activation
        )
        self.feed_forward_residual = build_residual(config)

    def forward(
        self, hidden: Tensor, attend_mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Apply the layer.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, src_len, d_model)
            Input of the layer.
        attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, src_len, src_len)
            True where a source position may attend to another (real tokens, within the window if any).
        need_weights : bool
            Also return the self-attention weights.

        Returns
        -------
        hidden : torch.Tensor, shape (batch, src_len, d_model)
            Output of the layer.
        weights : torch.Tensor or None, shape (batch, num_heads, src_len, src_len)
            Self-attention weights when ``need_weights``.

        Notes
        -----
        Outputs at padding positions are computed but meaningless; nothing downstream attends to them.
        """
        attention_input = self.self_attention_residual.normalize_input(hidden)
        attended, weights = self.self_attention(
            attention_input, attention_input, attention_input, attend_mask, need_weights
        )
        hidden = self.self_attention_residual.add(hidden, attended)
        hidden = self.feed_forward_residual.add(
            hidden, self.feed_forward(self.feed_forward_residual.normalize_input(hidden))
        )
        return hidden, weights


class Encoder(nn.Module):
    """A stack of ``num_encoder_layers`` encoder layers.

    Parameters
    ----------
    config : TransformerConfig
        Model hyper-parameters.

    Notes
    -----
    With ``norm_first`` a final LayerNorm normalises the output, since pre-norm layers leave the residual
    stream unnormalised.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_encoder_layers))
        self.final_norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        )

    def forward(
        self, hidden: Tensor, attend_mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor]]:
        """Encode embedded source tokens.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, src_len, d_model)
            Embedded source tokens plus positional encodings.
        attend_mask : torch.Tensor or None, bool, broadcastable to (batch, num_heads, src_len, src_len)
            True where attention is allowed.
        need_weights : bool
            Collect every layer's self-attention weights.

        Returns
        -------
        memory : torch.Tensor, shape (batch, src_len, d_model)
            The encoder output that the decoder attends to.
        weights : list of torch.Tensor, each shape (batch, num_heads, src_len, src_len)
            One entry per layer when ``need_weights``, else empty.

        Notes
        -----
        Section 3.1: a stack of N identical layers, each feeding the next; the last layer's output is the
        memory that every decoder layer's encoder-decoder attention reads. Positions that are padding still
        get outputs, but the decoder's cross-attention mask keeps them out of every key set.
        """
        all_weights: list[Tensor] = []
        for layer in self.layers:
            hidden, weights = layer(hidden, attend_mask, need_weights)
            if weights is not None:
                all_weights.append(weights)
        if self.final_norm is not None:
            hidden = self.final_norm(hidden)
        return hidden, all_weights
