"""The baseline: the same model built from ``torch.nn.Transformer``, trained the plain PyTorch way.

This is what a PyTorch user would write without our package: scaled token embeddings shared by both sides,
sinusoidal positions, ``nn.Transformer`` (post-norm, ReLU, batch-first), the output projection tied to the
embedding, ``F.cross_entropy`` with label smoothing 0.1, Adam with the warm-up schedule of Eq. (3), and
``torch.autocast`` for bf16. It is a yardstick for the benchmarks, not product code.
"""

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F


def sinusoidal_table(num_positions: int, d_model: int) -> Tensor:
    """Sinusoidal position encodings, sin in even and cos in odd dimensions (paper section 3.5).

    Parameters
    ----------
    num_positions : int
        Rows of the table.
    d_model : int
        Width (even).

    Returns
    -------
    torch.Tensor, shape (num_positions, d_model), float32
        PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same).

    Notes
    -----
    Written out here rather than imported so the reference depends on nothing of ours.
    """
    positions = torch.arange(num_positions, dtype=torch.float32)[:, None]  # (num_positions, 1)
    inverse_frequencies = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    table = torch.zeros(num_positions, d_model)
    table[:, 0::2] = torch.sin(positions * inverse_frequencies)
    table[:, 1::2] = torch.cos(positions * inverse_frequencies)
    return table


class ReferenceTransformer(nn.Module):
    """Encoder-decoder Transformer on ``torch.nn.Transformer`` with shared, tied embeddings.

    Parameters
    ----------
    vocab_size : int
        Shared vocabulary.
    d_model, num_heads, d_ff : int
        Width, heads, feed-forward width.
    num_encoder_layers, num_decoder_layers : int
        Stack depths.
    dropout : float
        ``nn.Transformer``'s dropout, which it applies everywhere: residual branches, attention weights and
        the feed-forward hidden layer; and the embedding dropout.
    residual_dropout_only : bool
        Keep dropout on the embeddings and residual branches only, as the paper (section 5.4) and our model
        do: sets the attention and feed-forward-hidden dropouts to zero after construction.
    pad_id : int
        Padding token id.

    Notes
    -----
    ``nn.Transformer`` adds a final LayerNorm after each stack; the paper's post-norm layers do not need it,
    but it is what the stock module does.
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        num_encoder_layers: int,
        num_decoder_layers: int,
        dropout: float,
        residual_dropout_only: bool,
        pad_id: int,
        max_positions: int = 1024,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)
        self.register_buffer("positions", sinusoidal_table(max_positions, d_model), persistent=False)
        self.embedding_dropout = nn.Dropout(dropout)
        self.transformer = nn.Transformer(
            d_model=d_model,
            nhead=num_heads,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            dim_feedforward=d_ff,
            dropout=dropout,
            batch_first=True,
        )
        if residual_dropout_only:
            for layer in [*self.transformer.encoder.layers, *self.transformer.decoder.layers]:
                layer.dropout.p = 0.0  # the feed-forward hidden layer
                for attention in (getattr(layer, "self_attn", None), getattr(layer, "multihead_attn", None)):
                    if attention is not None:
                        attention.dropout = 0.0

    def embed(self, tokens: Tensor) -> Tensor:
        """Scaled embeddings plus positions, with dropout: (batch, len) int64 -> (batch, len, d_model)."""
        hidden = self.embedding(tokens) * math.sqrt(self.d_model) + self.positions[: tokens.size(1)]
        return self.embedding_dropout(hidden)

    def forward(self, src_tokens: Tensor, tgt_input: Tensor) -> Tensor:
        """Logits of the next target token: (batch, src_len), (batch, tgt_len) -> (batch, tgt_len, vocab)."""
        target_length = tgt_input.size(1)
        # Bool masks throughout (True = may not attend), since nn.MultiheadAttention warns on mixed types.
        causal_mask = torch.ones(
            target_length, target_length, dtype=torch.bool, device=tgt_input.device
        ).triu(1)
        src_padding_mask = src_tokens.eq(self.pad_id)  # (batch, src_len), True on padding
        hidden = self.transformer(
            self.embed(src_tokens),
            self.embed(tgt_input),
            tgt_mask=causal_mask,
            src_key_padding_mask=src_padding_mask,
            tgt_key_padding_mask=tgt_input.eq(self.pad_id),
            memory_key_padding_mask=src_padding_mask,
            tgt_is_causal=True,
        )  # (batch, tgt_len, d_model)
        return F.linear(hidden, self.embedding.weight)  # tied output projection


def build_reference_step(
    model: ReferenceTransformer,
    batches: list[tuple[Tensor, Tensor, Tensor]],
    precision: str,
    *,
    warmup_steps: int = 4000,
    label_smoothing: float = 0.1,
) -> Callable[[], float]:
    """Return a closure that takes one optimizer step on the next batch (cycling) and returns its loss.

    Parameters
    ----------
    model : ReferenceTransformer
        The model, in training mode.
    batches : list of (src_tokens, tgt_input, tgt_output)
        int64 tensors of shapes (batch, src_len), (batch, tgt_len), (batch, tgt_len).
    precision : str
        "fp32", or "bf16" for ``torch.autocast`` on the forward pass (the loss stays fp32).
    warmup_steps : int
        Warm-up of Eq. (3).
    label_smoothing : float
        Epsilon of the smoothed cross-entropy.

    Returns
    -------
    callable
        ``step() -> float``: forward, backward, Adam and schedule step, like our trainer's ``train_step``.

    Notes
    -----
    The loss is summed over target tokens and divided by their number, as our trainer does.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: model.d_model**-0.5 * min((step + 1) ** -0.5, (step + 1) * warmup_steps**-1.5),
    )
    position = 0

    def step() -> float:
        nonlocal position
        src_tokens, tgt_input, tgt_output = batches[position % len(batches)]
        position += 1
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = model(src_tokens, tgt_input)  # (batch, tgt_len, vocab)
        num_tokens = int(tgt_output.ne(model.pad_id).sum())
        loss = F.cross_entropy(
            logits.float().flatten(0, 1),
            tgt_output.flatten(),
            ignore_index=model.pad_id,
            label_smoothing=label_smoothing,
            reduction="sum",
        )
        (loss / num_tokens).backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    return step
