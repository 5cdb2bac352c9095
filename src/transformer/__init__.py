"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017): library entry points.

The model and its building blocks (section 3), the configs, the recurrent baseline the paper compares with
(:class:`RNNEncoderDecoder`, :class:`RNNConfig`) and :class:`Translator` (checkpoint to text) are importable
from here, e.g. ``from transformer import Transformer, TransformerConfig, Translator``.
"""

from typing import TYPE_CHECKING, Any

from transformer.baselines.rnn import RNNEncoderDecoder
from transformer.baselines.rnn_config import RNNConfig
from transformer.config import (
    DataConfig,
    DecodeConfig,
    ExperimentConfig,
    TrainConfig,
    load_config,
)
from transformer.model.additive_attention import AdditiveScore, additive_attention
from transformer.model.config import TransformerConfig
from transformer.model.decoder import Decoder
from transformer.model.encoder import Encoder
from transformer.model.multihead_attention import MultiHeadAttention
from transformer.model.scaled_dot_product_attention import scaled_dot_product_attention
from transformer.model.transformer import AttentionWeights, Transformer

if TYPE_CHECKING:  # for type checkers; at run time __getattr__ imports it on first use
    from transformer.decoding.translator import Translator

__all__ = [
    "AdditiveScore",
    "AttentionWeights",
    "DataConfig",
    "DecodeConfig",
    "Decoder",
    "Encoder",
    "ExperimentConfig",
    "MultiHeadAttention",
    "RNNConfig",
    "RNNEncoderDecoder",
    "TrainConfig",
    "Transformer",
    "TransformerConfig",
    "Translator",
    "additive_attention",
    "load_config",
    "scaled_dot_product_attention",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Import :class:`Translator` when it is first asked for.

    Parameters
    ----------
    name : str
        An attribute of the package that is not defined yet.

    Returns
    -------
    Any
        ``transformer.decoding.translator.Translator`` for ``"Translator"``.

    Notes
    -----
    PEP 562 lazy export: the translator brings in SentencePiece, safetensors and the search code, which
    ``import transformer`` for the model alone need not load. Any other name raises AttributeError (and so
    ``from transformer import Name`` raises ImportError), as for a plain module.
    """
    if name == "Translator":
        from transformer.decoding.translator import Translator

        return Translator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """List the module's names, the lazily imported :class:`Translator` included.

    Returns
    -------
    list of str
        The names ``dir(transformer)`` shows.

    Notes
    -----
    Without it ``dir()`` and tab completion would miss ``Translator`` until its first use.
    """
    return sorted({*globals(), *__all__})
