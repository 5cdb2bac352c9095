"""fairseq as a training peer: its Transformer, criterion and Adam on the suite's batches.

fairseq is not a dependency of this project. Where ``fairseq-fixed`` (0.12.3.1, the maintained fork that
imports on Python 3.11) is installed, the training section times one fairseq step beside ours in the same
interleaved rounds; elsewhere the row is skipped with the reason. Install it into the environment that runs
the suite with ``bash benchmarks/install_peers.sh`` (it builds a C extension: a few minutes).

What is timed is the core of ``fairseq-train`` without its trainer's bookkeeping: ``TransformerModel`` built
by ``build_model`` from ``transformer`` architecture arguments matching our model (post-norm, sinusoidal
positions, all embeddings shared, dropout only where the paper puts it, as fairseq's defaults do),
``get_normalized_probs`` (a float32 log-softmax), ``label_smoothed_nll_loss`` with epsilon 0.1, fairseq's own
``Adam`` implementation (the one ``--optimizer adam`` uses on a CPU) with betas (0.9, 0.98) and epsilon 1e-9,
and an inverse square root schedule.
"""

from argparse import Namespace
from collections.abc import Callable
from typing import Any

from torch import Tensor

from transformer.model.config import TransformerConfig
from transformer.training.schedule import build_scheduler

#: The PyPI distribution timed, and the import name it provides.
FAIRSEQ_DISTRIBUTION = "fairseq-fixed"
FAIRSEQ_MODULE = "fairseq"


def fairseq_arguments(config: TransformerConfig) -> Namespace:
    """Translate our model config into fairseq ``transformer`` architecture arguments.

    Parameters
    ----------
    config : TransformerConfig
        The benchmark's model shape (shared vocabulary, d_model = d_k * heads).

    Returns
    -------
    argparse.Namespace
        Arguments for ``TransformerModel.build_model`` before ``base_architecture`` fills the rest.

    Notes
    -----
    fairseq's defaults already match the paper where we do: post-norm, sinusoidal positions, no dropout on
    attention weights or inside the feed-forward layer, ReLU.
    """
    return Namespace(
        encoder_embed_dim=config.d_model,
        encoder_ffn_embed_dim=config.d_ff,
        encoder_layers=config.num_encoder_layers,
        encoder_attention_heads=config.num_heads,
        decoder_embed_dim=config.d_model,
        decoder_ffn_embed_dim=config.d_ff,
        decoder_layers=config.num_decoder_layers,
        decoder_attention_heads=config.num_heads,
        dropout=config.dropout,
        attention_dropout=0.0,
        activation_dropout=0.0,
        share_all_embeddings=True,
        encoder_normalize_before=config.norm_first,
        decoder_normalize_before=config.norm_first,
        max_source_positions=1024,
        max_target_positions=1024,
    )


def build_fairseq_step(
    config: TransformerConfig, batches: list[tuple[Tensor, Tensor, Tensor]], warmup_steps: int = 4000
) -> Callable[[], float]:
    """Build one fairseq training step over the suite's batches, cycling through them.

    Parameters
    ----------
    config : TransformerConfig
        Model shape; ``vocab_size`` becomes a fairseq dictionary of that many symbols (ids 0-3 special).
    batches : list of tuple of torch.Tensor
        ``(src_tokens, tgt_input, tgt_output)`` per batch, each ``(sentences, length)`` int64 without padding;
        ids must avoid fairseq's pad id 1 (the suite's random ids start at 4).
    warmup_steps : int
        Warm-up of the inverse square root schedule.

    Returns
    -------
    Callable[[], float]
        Runs forward, backward and the optimizer step on the next batch; returns the loss.

    Notes
    -----
    Imports fairseq on call, so this module loads where fairseq is absent. Raises ImportError there.
    """
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
    from fairseq.data import Dictionary
    from fairseq.models.transformer import TransformerModel, base_architecture
    from fairseq.optim.adam import Adam

    dictionary = Dictionary()  # <s>, <pad>, </s>, <unk>
    for index in range(config.vocab_size - len(dictionary)):
        dictionary.add_symbol(f"w{index}")
    task = Namespace(source_dictionary=dictionary, target_dictionary=dictionary)
    arguments = fairseq_arguments(config)
    base_architecture(arguments)
    model: Any = TransformerModel.build_model(arguments, task)
    optimizer = Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = build_scheduler(optimizer, config.d_model, warmup_steps)  # Eq. (3), as ours
    pad = dictionary.pad()
    position = 0

    def step() -> float:
        nonlocal position
        src_tokens, tgt_input, tgt_output = batches[position % len(batches)]
        position += 1
        model.train()
        optimizer.zero_grad(set_to_none=True)
        src_lengths = src_tokens.ne(pad).sum(dim=1)
        net_output = model(src_tokens, src_lengths, tgt_input)
        log_probs = model.get_normalized_probs(net_output, log_probs=True)
        loss, _ = label_smoothed_nll_loss(
            log_probs.view(-1, log_probs.size(-1)), tgt_output.reshape(-1), 0.1, ignore_index=pad
        )
        loss.backward()
        optimizer.step()
        scheduler.step()
        return float(loss.detach())

    return step
