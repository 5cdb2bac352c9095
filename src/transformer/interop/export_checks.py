"""What every export to another toolkit checks first: a Transformer checkpoint, and config fields it can store.

CTranslate2 (:mod:`transformer.interop.ctranslate2`) and HuggingFace MarianMT (:mod:`transformer.interop.marian`)
both hold Transformer models only, and both compute attention as the paper does: dot-product scores scaled by
1/sqrt(d_k) over the whole sequence, with heads of width ``d_model / num_heads``. The loading, the refusal of
other architectures and those shared requirements are written once here, each error naming the target.
"""

from pathlib import Path
from typing import Any

from transformer.checkpoint.model_checkpoint import Checkpoint, load_checkpoint
from transformer.model.config import TransformerConfig

#: One requirement of an export target: our config field, the model's value and the only value it can store.
Requirement = tuple[str, Any, Any]


def load_transformer_checkpoint(
    checkpoint_dir: Path, target: str, because: str
) -> tuple[Checkpoint, TransformerConfig]:
    """Load a checkpoint to export, refusing one whose model is not a Transformer.

    Parameters
    ----------
    checkpoint_dir : Path
        A checkpoint (or run) directory.
    target : str
        The toolkit exported to, as the message names it (``"CTranslate2"``, ``"HuggingFace Marian"``).
    because : str
        The end of the refusal, after a comma: why the target cannot hold another architecture.

    Returns
    -------
    checkpoint : Checkpoint
        The loaded checkpoint.
    config : TransformerConfig
        Its model config, the same object as ``checkpoint.model_config``, typed as a Transformer's.

    Raises
    ------
    ValueError
        ``"<checkpoint>: model.architecture=<name> cannot be exported to <target>, <because>"`` for the
        recurrent baseline (or any other non-Transformer model).

    Notes
    -----
    The architecture is refused before any field check, so a recurrent model gets one message about what it
    is, not a complaint about the first Transformer field it lacks.
    """
    checkpoint = load_checkpoint(Path(checkpoint_dir))
    config = checkpoint.model_config
    if not isinstance(config, TransformerConfig):
        raise ValueError(
            f"{checkpoint.path}: model.architecture={config.architecture!r} cannot be exported to {target}, "
            f"{because}"
        )
    return checkpoint, config


def attention_requirements(config: TransformerConfig) -> list[Requirement]:
    """List the attention settings both export targets need, with the model's values.

    Parameters
    ----------
    config : TransformerConfig
        Our model's config.

    Returns
    -------
    list of (str, Any, Any)
        ``(field, value, supported)`` for ``attention_scoring`` ("dot_product"), ``attention_scaling``
        ("sqrt"), ``attention_window`` (None), ``d_k`` and ``d_v`` (both ``d_model // num_heads``).

    Notes
    -----
    ``d_k`` and ``d_v`` are read from ``config.head_dims``, so an unset (None) width counts as its default
    and is not refused; only an explicit width other than ``d_model / num_heads`` is.
    """
    default_head_dim = config.d_model // config.num_heads
    return [
        ("attention_scoring", config.attention_scoring, "dot_product"),
        ("attention_scaling", config.attention_scaling, "sqrt"),
        ("attention_window", config.attention_window, None),
        ("d_k", config.head_dims[0], default_head_dim),
        ("d_v", config.head_dims[1], default_head_dim),
    ]


def refuse_unsupported(requirements: list[Requirement], source: str, target: str) -> None:
    """Raise for the first requirement the model does not meet.

    Parameters
    ----------
    requirements : list of (str, Any, Any)
        ``(field, value, supported)`` rows, in the order their errors should be reported.
    source : str
        The checkpoint, for error messages.
    target : str
        The toolkit exported to, as the message names it (``"CTranslate2"``, ``"MarianMT"``).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        ``"<source>: TransformerConfig.<field>=<value!r> cannot be exported to <target> (it supports only
        <supported!r>)"``.

    Notes
    -----
    Values are compared with ``!=``, so a float requirement (MarianMT's LayerNorm epsilon) must be met
    exactly: the exported model would otherwise compute something slightly different with no error.
    """
    for field, value, supported in requirements:
        if value != supported:
            raise ValueError(
                f"{source}: TransformerConfig.{field}={value!r} cannot be exported to {target} "
                f"(it supports only {supported!r})"
            )
