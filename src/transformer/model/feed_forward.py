"""Position-wise feed-forward network, Eq. (2): FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

from torch import Tensor, nn
from torch.nn import functional as F

ACTIVATIONS = ("relu", "gelu", "silu")


class PositionwiseFeedForward(nn.Module):
    """Two linear maps with a non-linearity between them, applied to each position alike.

    Parameters
    ----------
    d_model : int
        Input and output width.
    d_ff : int
        Inner width (2048 in the base model).
    activation : {"relu", "gelu", "silu"}
        The paper uses ReLU; SiLU (swish) and GELU serve checkpoints from other toolkits (OPUS-MT uses swish).

    Notes
    -----
    Section 3.3: "two convolutions with kernel size 1". No dropout inside: the paper applies dropout to the
    sub-layer output before the residual addition, which the layer around this module does.
    """

    def __init__(self, *, d_model: int, d_ff: int, activation: str = "relu") -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r} is not one of {ACTIVATIONS}")
        self.activation = activation
        self.linear_in = nn.Linear(d_model, d_ff)
        self.linear_out = nn.Linear(d_ff, d_model)

    def forward(self, hidden: Tensor) -> Tensor:
        """Transform each position independently.

        Parameters
        ----------
        hidden : torch.Tensor, shape (batch, seq_len, d_model)
            Input.

        Returns
        -------
        torch.Tensor, shape (batch, seq_len, d_model)
            Output.

        Notes
        -----
        Eq. (2) of the paper when ``activation == "relu"``: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same
        weights at every position (but different ones in each layer). Positions never mix here, so padding
        positions cannot leak into real ones.
        """
        inner = self.linear_in(hidden)  # (batch, seq_len, d_ff)
        if self.activation == "relu":
            inner = F.relu(inner)
        elif self.activation == "gelu":
            inner = F.gelu(inner)
        else:
            inner = F.silu(inner)
        return self.linear_out(inner)
