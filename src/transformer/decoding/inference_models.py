"""Prepare a translator's models for inference: precision checks, placement, bf16 or int8, fp32 kernels.

:class:`~transformer.decoding.translator.Translator` calls these as it is built: :func:`check_precision`
refuses a precision the device or an architecture cannot run, :func:`prepare_for_inference` places, casts or
quantises each model and picks its fp32 kernels, :func:`input_token_limit` sets the source-length cap, and
:func:`checkpoint_shortlist` reads the shortlist ``Translator.from_checkpoint`` is asked for. Start reading at
:func:`prepare_for_inference`.
"""

from collections.abc import Sequence
from pathlib import Path

import torch

from transformer.architectures import SequenceModel, architecture_of
from transformer.autotune.int8_engine_probe import decide_int8_engine
from transformer.autotune.linear_probe import prepare_fp32_kernels
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.data.shortlist import Shortlist
from transformer.decoding.checkpoint_shortlist import shortlist_for_tokenizer
from transformer.device import bf16_unsupported_reason
from transformer.model.config import TransformerConfig
from transformer.model.quantization import quantize_for_inference
from transformer.model.transformer import Transformer

#: The source-token cap of models without a learned position table (sinusoidal encodings, the baseline).
DEFAULT_MAX_INPUT_TOKENS = 1024

#: The ``precision`` values of :class:`~transformer.decoding.translator.Translator` (and of
#: ``transformer translate --precision``).
TRANSLATION_PRECISIONS = ("fp32", "bf16", "int8")


def check_precision(precision: str, device: torch.device, models: Sequence[SequenceModel]) -> None:
    """Refuse a precision that the device or one of the models cannot run.

    Parameters
    ----------
    precision : {"fp32", "bf16", "int8"}
        The translator's precision (already one of :data:`TRANSLATION_PRECISIONS`).
    device : torch.device
        The resolved device the models will run on.
    models : sequence of model
        Every model to be decoded (an ensemble's members included).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For "int8" on a device other than the CPU or for a model other than a Transformer, or for "bf16"
        where the device has no native bf16.

    Notes
    -----
    The checks run in this order (device, then each model, then bf16 support), so the first fault found is
    the one reported. PyTorch's int8 linear kernels (FBGEMM, oneDNN) are CPU-only, and the recurrent
    baseline's LSTMs have no int8 kernels here.
    """
    if precision == "int8" and device.type != "cpu":
        raise ValueError(
            f"precision='int8' runs on the CPU only (PyTorch's int8 linear kernels, FBGEMM and oneDNN, have "
            f"no {device.type} implementation); on {device} use precision='bf16'"
        )
    for member in models:
        if precision == "int8" and not isinstance(member, Transformer):
            raise ValueError(
                f"precision='int8' quantizes Transformer models only; this model's architecture is "
                f"{architecture_of(member.config)!r} (use precision='fp32' or 'bf16')"
            )
    if precision == "bf16":
        reason = bf16_unsupported_reason(device)
        if reason is not None:
            raise ValueError(f"precision='bf16': {reason}; use precision='fp32' or 'int8'")


def prepare_for_inference(
    model: SequenceModel, device: torch.device, precision: str, fp32_kernels: str
) -> tuple[SequenceModel, list[str]]:
    """Move a model to the device, cast or quantise it for ``precision``, and put it in eval mode.

    Parameters
    ----------
    model : SequenceModel
        A model (changed in place: cast, or its linear layers replaced).
    device : torch.device
        Where it runs.
    precision : {"fp32", "bf16", "int8"}
        "bf16" casts the weights, "int8" quantises a Transformer's linear layers, "fp32" keeps float32.
    fp32_kernels : {"auto", "mkl", "onednn"}
        At fp32 on the CPU, the kernel of each Transformer linear layer
        (:func:`~transformer.autotune.linear_probe.prepare_fp32_kernels`).

    Returns
    -------
    tuple of (SequenceModel, list of str)
        The prepared model, and what was measured for it: at fp32 what ``fp32_kernels`` chose, one line per
        product shape; at int8 the engine that packs the weights
        (:func:`~transformer.autotune.int8_engine_probe.decide_int8_engine`); empty otherwise.

    Notes
    -----
    The fp32 kernel choice applies to Transformers at fp32 on the CPU only; a recurrent model is only placed
    and cast. Like the cast, the fp32 kernel swap converts ``model`` in place for inference (its swapped layers
    have no autograd and no ``state_dict`` entries): pass a copy to go on training or saving it. A second
    translator over the same model finds it swapped and leaves it so.
    """
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    prepared: SequenceModel = model.to(device=device, dtype=dtype).eval()
    notes: list[str] = []
    if isinstance(prepared, Transformer) and precision == "int8":
        decision = decide_int8_engine(prepared)
        prepared = quantize_for_inference(prepared, decision.value)
        notes = [f"auto int8 engine: {decision.reason}"]
    elif isinstance(prepared, Transformer) and precision == "fp32" and device.type == "cpu":
        notes = prepare_fp32_kernels(prepared, fp32_kernels)
    # The int8 and oneDNN layers are new modules, created in training mode: without this every search would
    # switch them to eval mode and back (inference_context), about 2 ms a one-sentence translation.
    return prepared.eval(), notes


def input_token_limit(models: Sequence[SequenceModel], max_input_tokens: int | None) -> int:
    """Return the source-token cap of a translator: the one asked for, else the smallest learned table.

    Parameters
    ----------
    models : sequence of model
        Every model decoded (each encodes the source).
    max_input_tokens : int or None
        The cap asked for; None (or 0) picks the default.

    Returns
    -------
    int
        ``max_input_tokens``, else the smallest ``max_positions`` among Transformers with learned positional
        encodings, else :data:`DEFAULT_MAX_INPUT_TOKENS`.

    Notes
    -----
    Every member of an ensemble encodes the same source, so the smallest learned table bounds it; sinusoidal
    encodings have no table and take the default.
    """
    learned_limits = [
        member.config.max_positions
        for member in models
        if isinstance(member.config, TransformerConfig) and member.config.positional_encoding == "learned"
    ]
    learned_limit = min(learned_limits) if learned_limits else None
    return max_input_tokens or learned_limit or DEFAULT_MAX_INPUT_TOKENS


def checkpoint_shortlist(
    checkpoint_dir: Path, tokenizer: TextTokenizer, src_vocab_size: int, shortlist: bool | str | Path
) -> Shortlist | None:
    """Read the shortlist ``Translator.from_checkpoint``'s ``shortlist`` argument names.

    Parameters
    ----------
    checkpoint_dir : Path
        The checkpoint directory.
    tokenizer : TextTokenizer
        Its tokenizer (the shortlist must be built for its vocabulary).
    src_vocab_size : int
        The model's source vocabulary size.
    shortlist : bool, str or Path
        True: the checkpoint's own shortlist; a path: that file; False: none.

    Returns
    -------
    Shortlist or None
        The shortlist, or None for False.

    Notes
    -----
    Reading and checking the file is :func:`~transformer.decoding.checkpoint_shortlist.shortlist_for_tokenizer`'s
    job; this only maps the argument's three forms onto it.
    """
    if shortlist is False:
        return None
    file = None if shortlist is True else Path(shortlist)
    return shortlist_for_tokenizer(checkpoint_dir, tokenizer, src_vocab_size, file)
