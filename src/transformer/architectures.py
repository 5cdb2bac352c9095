"""Which network a model config describes: the Transformer, or the recurrent baseline it replaced.

A YAML ``model`` section and a checkpoint's stored model config both name the architecture with an
``architecture`` key ("transformer" when absent, so every config and checkpoint written before the key existed
still reads as a Transformer). This module maps that key to the config class and the config to the model, so
the run configuration, checkpoints, the trainer and the translator build either without knowing which.
"""

from typing import Any, TypeAlias

from transformer.baselines.rnn import RNNEncoderDecoder
from transformer.baselines.rnn_config import RNNConfig
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

#: The values of ``model.architecture``; the first is the default.
ARCHITECTURES = ("transformer", "rnn")
#: A model config of any architecture.
ModelConfig: TypeAlias = TransformerConfig | RNNConfig
#: A model of any architecture: ``forward(src_tokens, tgt_input)`` gives logits, ``config`` a ``ModelConfig``.
SequenceModel: TypeAlias = Transformer | RNNEncoderDecoder


def architecture_of(config: ModelConfig) -> str:
    """Name the architecture of a model config.

    Parameters
    ----------
    config : TransformerConfig or RNNConfig
        A model config.

    Returns
    -------
    str
        "transformer" or "rnn" (one of :data:`ARCHITECTURES`).

    Notes
    -----
    ``TransformerConfig`` has no ``architecture`` field: adding one would change its ``to_dict`` and so every
    stored experiment configuration, and an experiment runner refuses a run whose recorded configuration
    differs. The class itself says it is a Transformer.
    """
    return config.architecture if isinstance(config, RNNConfig) else "transformer"


def model_config_from_dict(values: dict[str, Any]) -> ModelConfig:
    """Build the config of the architecture a mapping names.

    Parameters
    ----------
    values : dict of str to Any
        Config fields, optionally with ``architecture`` ("transformer" when absent).

    Returns
    -------
    TransformerConfig or RNNConfig
        The validated config.

    Raises
    ------
    ValueError
        Naming ``model.architecture`` for an unknown architecture, or from the config class for an unknown or
        invalid field.
    TypeError
        From the config class, for a wrongly typed field.

    Notes
    -----
    The config class's own ``from_dict`` builds the result, so a field of the other architecture (a
    ``d_model`` in an RNN config) is refused, not ignored.
    """
    values = dict(values)
    architecture = values.get("architecture", ARCHITECTURES[0])
    if architecture == "rnn":
        return RNNConfig.from_dict(values)
    if architecture == "transformer":
        values.pop("architecture", None)
        return TransformerConfig.from_dict(values)
    raise ValueError(f"model.architecture={architecture!r} is not one of {ARCHITECTURES}")


def build_model(config: ModelConfig) -> SequenceModel:
    """Instantiate the model a config describes, with freshly initialised weights.

    Parameters
    ----------
    config : TransformerConfig or RNNConfig
        The model config.

    Returns
    -------
    Transformer or RNNEncoderDecoder
        The model, in training mode, on the CPU.

    Notes
    -----
    The one place that maps a config to its model: the trainer and checkpoint loading call it, so a new
    architecture is added here and in :func:`model_config_from_dict`, not at every call site.
    """
    if isinstance(config, RNNConfig):
        return RNNEncoderDecoder(config)
    return Transformer(config)


def model_width(config: ModelConfig) -> int:
    """Return the width the learning-rate schedule of Eq. (3) scales with.

    Parameters
    ----------
    config : TransformerConfig or RNNConfig
        The model config.

    Returns
    -------
    int
        ``d_model`` for a Transformer, ``hidden_size`` for the recurrent model.

    Notes
    -----
    Eq. (3) multiplies the rate by d_model^-0.5. With ``train.peak_learning_rate`` set, the width cancels
    out (the scale is solved for the peak), which is how the shipped RNN config sets its rate.
    """
    return config.hidden_size if isinstance(config, RNNConfig) else config.d_model
