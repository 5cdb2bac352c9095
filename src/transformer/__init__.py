"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017): library entry points.

The model and its building blocks (section 3), the configs, the recurrent baseline the paper compares with
(:class:`RNNEncoderDecoder`, :class:`RNNConfig`), :class:`Translator` (checkpoint to text) and its
:class:`Glossary` are importable
from here, e.g. ``from transformer import Transformer, TransformerConfig, Translator``.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers; at run time __getattr__ imports each name on first use
    from transformer.baselines.rnn import RNNEncoderDecoder
    from transformer.baselines.rnn_config import RNNConfig
    from transformer.config.data import DataConfig
    from transformer.config.decode import DecodeConfig
    from transformer.config.experiment import ExperimentConfig
    from transformer.config.files import load_config
    from transformer.config.train import TrainConfig
    from transformer.decoding.glossary import Glossary
    from transformer.decoding.translator import Translator
    from transformer.model.additive_attention import AdditiveScore, additive_attention
    from transformer.model.config import TransformerConfig
    from transformer.model.decoder import Decoder
    from transformer.model.encoder import Encoder
    from transformer.model.multihead_attention import MultiHeadAttention
    from transformer.model.scaled_dot_product_attention import scaled_dot_product_attention
    from transformer.model.transformer import AttentionWeights, Transformer

#: Each public name and the module that defines it, imported when the name is first used.
_DEFINED_IN = {
    "AdditiveScore": "transformer.model.additive_attention",
    "AttentionWeights": "transformer.model.transformer",
    "DataConfig": "transformer.config.data",
    "DecodeConfig": "transformer.config.decode",
    "Decoder": "transformer.model.decoder",
    "Encoder": "transformer.model.encoder",
    "ExperimentConfig": "transformer.config.experiment",
    "Glossary": "transformer.decoding.glossary",
    "MultiHeadAttention": "transformer.model.multihead_attention",
    "RNNConfig": "transformer.baselines.rnn_config",
    "RNNEncoderDecoder": "transformer.baselines.rnn",
    "TrainConfig": "transformer.config.train",
    "Transformer": "transformer.model.transformer",
    "TransformerConfig": "transformer.model.config",
    "Translator": "transformer.decoding.translator",
    "additive_attention": "transformer.model.additive_attention",
    "load_config": "transformer.config.files",
    "scaled_dot_product_attention": "transformer.model.scaled_dot_product_attention",
}

__all__ = [
    "AdditiveScore",
    "AttentionWeights",
    "DataConfig",
    "DecodeConfig",
    "Decoder",
    "Encoder",
    "ExperimentConfig",
    "Glossary",
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
    """Import a public name from the module that defines it when it is first asked for.

    Parameters
    ----------
    name : str
        An attribute of the package that is not defined yet.

    Returns
    -------
    Any
        The class or function, e.g. ``transformer.model.transformer.Transformer`` for ``"Transformer"``.

    Notes
    -----
    PEP 562 lazy exports: ``import transformer`` loads no PyTorch, so the ``transformer`` command can put
    tcmalloc under the process (:mod:`transformer.launcher`, which must run before torch is loaded) and
    ``import transformer`` for the model alone does not load SentencePiece, safetensors or the search code.
    The name is cached in the package's namespace after its first use. Any other name raises
    AttributeError (and so ``from transformer import Name`` raises ImportError), as for a plain module.
    """
    module_name = _DEFINED_IN.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """List the module's names, the lazily imported public names included.

    Returns
    -------
    list of str
        The names ``dir(transformer)`` shows.

    Notes
    -----
    Without it ``dir()`` and tab completion would miss the public names until their first use.
    """
    return sorted({*globals(), *__all__})
