"""Global attention of an LSTM decoder over the encoder outputs (Luong et al., 2015; Bahdanau et al., 2015).

At decoder step t the top LSTM state h_t scores every encoder output h̄_s, the scores are normalised over
the source (padding masked), the context c_t is the weighted sum of the encoder outputs, and the attentional
hidden state h~_t = tanh(W_c [c_t; h_t]) (Luong et al., eq. 5) is what the output projection reads and what
input feeding passes to the next step.
"""

import torch
from torch import Tensor, nn

from transformer.baselines.rnn_config import RNN_ATTENTIONS


class GlobalAttention(nn.Module):
    """Score, normalise and combine: one attention head over all encoder outputs.

    Parameters
    ----------
    hidden_size : int
        Width H of the decoder states and of the encoder outputs.
    scoring : {"dot", "general", "additive"}
        score(h_t, h̄_s) = h_t^T h̄_s ("dot"), h_t^T W_a h̄_s ("general"), both Luong et al. (2015) eq. 8, or
        v_a^T tanh(W_a h_t + U_a h̄_s) ("additive": Bahdanau et al. (2015) appendix A.1.2's network).

    Notes
    -----
    Weights: ``key_projection.weight`` is W_a of "general" and U_a of "additive" (both without a bias, as in
    the equations); ``query_projection.weight`` is the additive W_a and ``score_vector`` its v_a;
    ``output_projection.weight`` is W_c of eq. 5, shape (H, 2H), read as [context; state]. The additive
    network is Bahdanau's scoring function applied to the current state h_t, Luong's "concat" variant:
    Bahdanau's own decoder scores with the previous state s_{i-1} and feeds the context into the recurrence,
    which input feeding approximates here. The key side of every scoring depends on the source only, so
    :meth:`prepare_keys` computes it once per sentence and each decoder step reuses it.
    """

    def __init__(self, hidden_size: int, scoring: str) -> None:
        super().__init__()
        if scoring not in RNN_ATTENTIONS:
            raise ValueError(f"attention scoring {scoring!r} is not one of {RNN_ATTENTIONS}")
        self.scoring = scoring
        self.key_projection = nn.Linear(hidden_size, hidden_size, bias=False) if scoring != "dot" else None
        self.query_projection: nn.Linear | None = None
        self.score_vector: nn.Parameter | None = None
        if scoring == "additive":
            self.query_projection = nn.Linear(hidden_size, hidden_size, bias=False)
            self.score_vector = nn.Parameter(torch.empty(hidden_size))
            nn.init.uniform_(self.score_vector, -0.1, 0.1)
        self.output_projection = nn.Linear(2 * hidden_size, hidden_size, bias=False)

    def prepare_keys(self, memory: Tensor) -> Tensor:
        """Compute the source side of the scores once per sentence.

        Parameters
        ----------
        memory : torch.Tensor, shape (batch, src_len, hidden_size)
            Encoder outputs h̄_s.

        Returns
        -------
        torch.Tensor, shape (batch, src_len, hidden_size)
            h̄_s itself ("dot"), W_a h̄_s ("general") or U_a h̄_s ("additive").

        Notes
        -----
        Doing this in the encoder pass instead of at every decoder step saves one (src_len x H x H) product
        per step and layer of the search; the keys travel with the encoder outputs when beams are reordered.
        """
        return memory if self.key_projection is None else self.key_projection(memory)

    def scores(self, query: Tensor, keys: Tensor) -> Tensor:
        """Score every query against every source position.

        Parameters
        ----------
        query : torch.Tensor, shape (batch, query_len, hidden_size)
            Decoder states h_t (the top LSTM layer's output).
        keys : torch.Tensor, shape (batch, src_len, hidden_size)
            Output of :meth:`prepare_keys`.

        Returns
        -------
        torch.Tensor, shape (batch, query_len, src_len)
            Unnormalised scores.

        Notes
        -----
        The additive network forms a (batch, query_len, src_len, H) tensor before reducing it with v_a: in
        training without input feeding (every target position at once) it is the largest activation, so
        prefer "dot" or "general" for long sentences there.
        """
        if self.query_projection is None or self.score_vector is None:
            return query @ keys.transpose(1, 2)
        hidden = torch.tanh(self.query_projection(query)[:, :, None, :] + keys[:, None, :, :])
        return hidden @ self.score_vector.to(hidden.dtype)

    def forward(
        self, query: Tensor, keys: Tensor, memory: Tensor, src_padding_mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Attend from decoder states to the encoder outputs and form the attentional hidden states.

        Parameters
        ----------
        query : torch.Tensor, shape (batch, query_len, hidden_size)
            Decoder states h_t.
        keys : torch.Tensor, shape (batch, src_len, hidden_size)
            Output of :meth:`prepare_keys` for ``memory``.
        memory : torch.Tensor, shape (batch, src_len, hidden_size)
            Encoder outputs h̄_s, the values averaged into the context.
        src_padding_mask : torch.Tensor, shape (batch, src_len), bool
            True on source padding, which gets weight zero.

        Returns
        -------
        attentional : torch.Tensor, shape (batch, query_len, hidden_size)
            h~_t = tanh(W_c [c_t; h_t]).
        weights : torch.Tensor, shape (batch, query_len, src_len)
            a_t(s) = softmax over s of score(h_t, h̄_s); each row sums to one over the unpadded positions.

        Notes
        -----
        Luong et al. (2015) eqs. 5, 7 and 8. The softmax runs in float32 whatever the autocast precision, as
        the Transformer's attention does, so a bf16 run does not lose the small weights to rounding.
        """
        scores = self.scores(query, keys).float()
        scores = scores.masked_fill(src_padding_mask[:, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        context = weights.to(memory.dtype) @ memory  # (batch, query_len, hidden_size)
        attentional = torch.tanh(
            self.output_projection(torch.cat([context, query.to(context.dtype)], dim=-1))
        )
        return attentional, weights
