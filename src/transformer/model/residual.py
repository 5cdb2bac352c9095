"""The residual connection, dropout and layer normalisation around every sub-layer (section 5.4)."""

from torch import Tensor, nn

from transformer.model.dropout import Dropout


class ResidualConnection(nn.Module):
    """Wrap a sub-layer as ``LayerNorm(x + Dropout(Sublayer(x)))`` (post-norm) or pre-norm.

    Parameters
    ----------
    d_model : int
        Width of the residual stream.
    dropout : float
        P_drop applied to the sub-layer output before the residual addition.
    norm_first : bool
        Pre-norm ``x + Dropout(Sublayer(LayerNorm(x)))`` instead of the paper's post-norm.
    layer_norm_eps : float
        LayerNorm epsilon.

    Notes
    -----
    A layer calls :meth:`normalize_input` on the sub-layer input and :meth:`add` on its output, so the
    sub-layer itself can have any signature (self-attention, cross-attention, feed-forward). Pre-norm needs a
    final LayerNorm after the last layer of the stack, which the stacks add.
    """

    def __init__(self, *, d_model: int, dropout: float, norm_first: bool, layer_norm_eps: float) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = Dropout(dropout)

    def normalize_input(self, hidden: Tensor) -> Tensor:
        """Return what the sub-layer should read.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, seq_len, d_model)
            The residual stream.

        Returns
        -------
        torch.Tensor, shape (batch, seq_len, d_model)
            ``LayerNorm(hidden)`` for pre-norm, ``hidden`` itself for post-norm.

        Notes
        -----
        Post-norm normalises after the addition instead, in :meth:`add`. Pre-norm leaves the residual path
        itself un-normalised, an identity from input to output: what makes it easier to train in deep
        stacks (Xiong et al., 2020), at the cost of the final LayerNorm the stacks add.
        """
        return self.norm(hidden) if self.norm_first else hidden

    def add(self, residual: Tensor, sublayer_output: Tensor) -> Tensor:
        """Add the dropped-out sub-layer output to the residual stream.

        Parameters
        ----------
        residual : torch.Tensor, shape (batch, seq_len, d_model)
            The sub-layer's input (before any pre-norm).
        sublayer_output : torch.Tensor, shape (batch, seq_len, d_model)
            The sub-layer's output.

        Returns
        -------
        torch.Tensor, shape (batch, seq_len, d_model)
            The new residual stream.

        Notes
        -----
        Section 5.4: "We apply dropout to the output of each sub-layer, before it is added to the sub-layer
        input and normalized."
        """
        summed = residual + self.dropout(sublayer_output)
        return summed if self.norm_first else self.norm(summed)
