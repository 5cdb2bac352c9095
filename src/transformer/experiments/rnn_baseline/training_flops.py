"""Training FLOPs, counted: one forward and backward pass per sampled batch under ``FlopCounterMode``.

The paper's Table 2 (the published Table 2, "training cost") compares models by the floating-point operations
their training took. Here they are counted, not estimated from a formula: the first training batches of a run
go through the model's forward pass, the label-smoothed loss and the backward pass exactly as the trainer runs
them, under :class:`torch.utils.flop_counter.FlopCounterMode`, and the count per target token times the target
tokens the run trained on gives its total.

Two kernels are invisible to the counter (PyTorch 2.13) and would count as zero: the CPU's fused attention
(``_scaled_dot_product_flash_attention_for_cpu``) and the oneDNN LSTM that ``nn.LSTM`` runs on the CPU. The
count therefore runs on the CPU with oneDNN switched off and PyTorch's math attention forced, where both are
made of matrix products the counter sees; the arithmetic is the same (tested against hand counts).
"""

import copy
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from transformer.data.pipeline.batch import Batch, collate
from transformer.data.pipeline.dataset import encode_corpus
from transformer.data.pipeline.text_files import read_parallel_files
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.data.pipeline.token_batch_sampler import TokenBatchSampler
from transformer.loss import label_smoothed_nll_loss


@dataclass(frozen=True)
class FlopCount:
    """The FLOPs of some training steps and the target tokens they trained on.

    Parameters
    ----------
    flops : int
        Forward and backward FLOPs of the counted batches (a multiply-add counts 2).
    target_tokens : int
        Target tokens of those batches, EOS included, padding excluded (the trainer's ``tokens_seen`` unit).
    batches : int
        Batches counted.

    Notes
    -----
    :attr:`per_target_token` is what scales to a whole run: padding and the source side are paid for in
    ``flops`` but counted in neither token figure, so the ratio carries the run's own padding and
    source/target length ratio with it.
    """

    flops: int
    target_tokens: int
    batches: int

    @property
    def per_target_token(self) -> float:
        """FLOPs per target token.

        Returns
        -------
        float
            ``flops / target_tokens``.

        Notes
        -----
        Multiplied by a run's ``tokens_seen`` it gives the run's training FLOPs.
        """
        return self.flops / max(self.target_tokens, 1)


@contextmanager
def countable_kernels() -> Iterator[None]:
    """Run the block with kernels ``FlopCounterMode`` can see: no oneDNN, math attention.

    Returns
    -------
    Iterator[None]
        A context manager.

    Notes
    -----
    With oneDNN enabled, ``nn.LSTM`` on the CPU is one opaque ``mkldnn_rnn_layer`` call per layer, counted as
    zero (a 2-layer attentional LSTM then counts about 15% of its FLOPs, the attention and output layers
    only); without it the LSTM is made of ``mm``/``addmm`` calls. The math backend of
    ``F.scaled_dot_product_attention`` is two batched products, where the fused CPU kernel counts zero.
    Toggling oneDNN warns about TF32 on Intel GPUs, which do not exist here; the warning is silenced.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*TF32 acceleration on top of oneDNN.*")
        with torch.backends.mkldnn.flags(enabled=False), sdpa_kernel(SDPBackend.MATH):
            yield


def count_training_flops(
    model: nn.Module, batches: Sequence[Batch], label_smoothing: float, pad_id: int
) -> FlopCount:
    """Count the FLOPs of training steps (forward, loss, backward) on some batches.

    Parameters
    ----------
    model : torch.nn.Module
        A Transformer or the recurrent baseline: ``model(src_tokens, tgt_input)`` gives logits of shape
        (batch, tgt_len, vocab_size). Not changed: a float32 copy on the CPU is counted.
    batches : sequence of Batch
        Training batches (``src_tokens`` (batch, src_len), ``tgt_input`` and ``tgt_output`` (batch,
        tgt_len), int64).
    label_smoothing : float
        The run's eps_ls (does not change the count; the loss is the trainer's).
    pad_id : int
        Padding id, ignored by the loss.

    Returns
    -------
    FlopCount
        FLOPs and target tokens summed over the batches.

    Notes
    -----
    In training mode, as the trainer runs it (dropout adds no products). Matrix products only, the
    convention of ``FlopCounterMode`` and of the paper's estimates: element-wise work (activations, softmax,
    the loss, Adam's update) is left out. The gradient of a product costs two products of its size (for the
    input and the weight), so a backward pass is about twice the forward, less where an input needs no
    gradient (the LSTM's zero initial state, the token ids).
    """
    if not batches:
        raise ValueError("count_training_flops: no batches to count")
    counted = copy.deepcopy(model).to(device="cpu", dtype=torch.float32).train()
    flops = tokens = 0
    with countable_kernels():
        for batch in batches:
            batch = batch.to("cpu")
            with FlopCounterMode(display=False) as counter:
                logits = counted(batch.src_tokens, batch.tgt_input)  # (batch, tgt_len, vocab_size)
                loss, _ = label_smoothed_nll_loss(logits, batch.tgt_output, label_smoothing, pad_id)
                loss.backward()  # type: ignore[no-untyped-call]
            counted.zero_grad(set_to_none=True)
            flops += int(counter.get_total_flops())
            tokens += batch.num_target_tokens
    return FlopCount(flops, tokens, len(batches))


def first_training_batches(
    train_files: tuple[Path, Path],
    tokenizer: TextTokenizer,
    max_len: int,
    max_tokens: int,
    seed: int,
    count: int,
    special_ids: tuple[int, int, int],
) -> list[Batch]:
    """Rebuild the first batches a run trained on, from its training files.

    Parameters
    ----------
    train_files : tuple of (Path, Path)
        The run's training source and target files (``split_files.json``'s ``train``).
    tokenizer : TextTokenizer
        The run's tokenizer.
    max_len : int
        ``data.max_len``: longer pairs are dropped, as in training.
    max_tokens : int
        ``train.max_tokens``.
    seed : int
        ``train.seed``, which orders the batches.
    count : int
        Batches wanted (fewer if the epoch has fewer).
    special_ids : tuple of (int, int, int)
        The model's pad, start and EOS ids.

    Returns
    -------
    list of Batch
        The first ``count`` batches of epoch 0, in training order.

    Notes
    -----
    The same encoding, length filter and :class:`TokenBatchSampler` (same seed) as the trainer, so these are
    the batches its first steps took: a sample of the length-bucketed, shuffled batches of the whole run.
    """
    pairs = read_parallel_files(*train_files)
    corpus = encode_corpus(pairs, tokenizer, max_len)
    sampler = TokenBatchSampler(corpus.source_lengths, corpus.target_lengths, max_tokens, seed=seed)
    pad_id, start_id, eos_id = special_ids
    return [collate(indices, corpus, pad_id, start_id, eos_id) for indices in sampler.batches(0)[:count]]
