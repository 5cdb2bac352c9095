"""HuggingFace ``MarianConfig`` fields to :class:`~transformer.model.config.TransformerConfig` and back.

MarianMT is the paper's Transformer: post-norm layers, sinusoidal positions, embeddings scaled by
sqrt(d_model) and tied with the output projection. The differences our config represents are the column
order of the sinusoids (``sinusoidal_layout="concatenated"``), the logits bias (``output_bias``), the
feed-forward activation (OPUS-MT uses swish, our ``"silu"``), decoding from the pad token
(``decoder_start_id``) and separate source/target vocabularies. Anything else is refused with a ValueError
naming the field.
"""

from typing import Any

from transformer.interop.export_checks import attention_requirements, refuse_unsupported
from transformer.model.config import TransformerConfig

MARIAN_TO_OUR_ACTIVATION = {"relu": "relu", "swish": "silu", "silu": "silu", "gelu": "gelu"}
OUR_TO_MARIAN_ACTIVATION = {"relu": "relu", "silu": "swish", "gelu": "gelu"}
# HuggingFace's MarianMT modules use nn.LayerNorm's default epsilon.
MARIAN_LAYER_NORM_EPS = 1e-5
# Longest input of an exported model: HuggingFace precomputes this many sinusoidal positions.
EXPORT_MAX_POSITIONS = 1024

# Fields of older Marian/BART configs (still in many OPUS-MT config.json files) that switch on features our
# model lacks, with the only value we can represent.
REPRESENTABLE_VALUES: dict[str, Any] = {
    "normalize_before": False,
    "normalize_embedding": False,
    "layernorm_embedding": False,
    "add_final_layer_norm": False,
    "static_position_embeddings": True,
    "add_bias_logits": False,
    "do_blenderbot_90_layernorm": False,
    "is_encoder_decoder": True,
}
# Pairs of fields our model has one value for: encoder and decoder must agree.
SHARED_FIELDS = (
    ("encoder_ffn_dim", "decoder_ffn_dim"),
    ("encoder_attention_heads", "decoder_attention_heads"),
)


def _required(values: dict[str, Any], key: str, source: str) -> Any:
    if values.get(key) is None:
        raise ValueError(f"{source}: field '{key}' is missing")
    return values[key]


def check_representable(values: dict[str, Any], source: str) -> None:
    """Refuse a Marian config that uses a feature our Transformer cannot represent.

    Parameters
    ----------
    values : dict of str to Any
        The parsed ``config.json``.
    source : str
        Its path, for error messages.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the field, such as "config.json: normalize_before=True cannot be represented (our model
        supports only False)".

    Notes
    -----
    An unsupported feature is refused rather than dropped, so an imported model never silently computes
    something other than the Marian one.
    """
    model_type = values.get("model_type")
    if model_type != "marian":
        raise ValueError(f"{source}: model_type={model_type!r} is not 'marian'")
    for key, supported in REPRESENTABLE_VALUES.items():
        if key in values and values[key] != supported:
            raise ValueError(
                f"{source}: {key}={values[key]!r} cannot be represented (our model supports only {supported!r})"
            )
    for encoder_key, decoder_key in SHARED_FIELDS:
        encoder_value, decoder_value = (
            _required(values, encoder_key, source),
            _required(values, decoder_key, source),
        )
        if encoder_value != decoder_value:
            raise ValueError(
                f"{source}: {decoder_key}={decoder_value} differs from {encoder_key}={encoder_value}; "
                "our model uses one value for encoder and decoder"
            )
    activation = values.get("activation_function", "gelu")
    if activation not in MARIAN_TO_OUR_ACTIVATION:
        raise ValueError(
            f"{source}: activation_function={activation!r} cannot be represented; "
            f"supported: {sorted(MARIAN_TO_OUR_ACTIVATION)}"
        )
    eos = values.get("eos_token_id", 0)
    if not isinstance(eos, int):
        raise ValueError(f"{source}: eos_token_id={eos!r} must be a single id")


def marian_to_config(
    values: dict[str, Any], source: str, *, unk_id: int, share_embeddings: bool, output_bias: bool
) -> TransformerConfig:
    """Build our config from a Marian ``config.json``.

    Parameters
    ----------
    values : dict of str to Any
        The parsed ``config.json``.
    source : str
        Its path, for error messages.
    unk_id : int
        Id of ``<unk>`` in ``vocab.json`` (Marian's config does not record it).
    share_embeddings : bool
        Whether the encoder and decoder embedding tensors are one matrix (decided from the weights).
    output_bias : bool
        Whether the checkpoint has a non-zero ``final_logits_bias``.

    Returns
    -------
    TransformerConfig
        Post-norm, sinusoidal with the concatenated layout, decoding from ``decoder_start_token_id``.

    Raises
    ------
    ValueError
        Naming the field that cannot be represented.

    Notes
    -----
    Training-only settings without an equivalent (``activation_dropout``, layer drop) are dropped. Marian has
    no BOS: ``bos_id`` is ``bos_token_id`` when set, else the EOS id.
    """
    check_representable(values, source)
    vocab_size = _required(values, "vocab_size", source)
    decoder_vocab_size = values.get("decoder_vocab_size") or vocab_size
    eos_id = values.get("eos_token_id", 0)
    pad_id = _required(values, "pad_token_id", source)
    settings = {
        "vocab_size": vocab_size,
        "target_vocab_size": None if decoder_vocab_size == vocab_size else decoder_vocab_size,
        "d_model": _required(values, "d_model", source),
        "d_ff": values["encoder_ffn_dim"],
        "num_heads": values["encoder_attention_heads"],
        "num_encoder_layers": _required(values, "encoder_layers", source),
        "num_decoder_layers": _required(values, "decoder_layers", source),
        "dropout": float(values.get("dropout", 0.1)),
        "attention_dropout": float(values.get("attention_dropout", 0.0)),
        "activation": MARIAN_TO_OUR_ACTIVATION[values.get("activation_function", "gelu")],
        "share_embeddings": share_embeddings,
        "tie_output_projection": bool(values.get("tie_word_embeddings", True)),
        "scale_embeddings": bool(values.get("scale_embedding", False)),
        "layer_norm_eps": MARIAN_LAYER_NORM_EPS,
        "pad_id": pad_id,
        "bos_id": values["bos_token_id"] if isinstance(values.get("bos_token_id"), int) else eos_id,
        "eos_id": eos_id,
        "unk_id": unk_id,
        "decoder_start_id": values.get("decoder_start_token_id", pad_id),
        "sinusoidal_layout": "concatenated",
        "output_bias": output_bias,
    }
    try:
        return TransformerConfig.from_dict(settings)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{source}: {error}") from None


def check_exportable(config: TransformerConfig, source: str) -> None:
    """Refuse a model that HuggingFace's MarianMT cannot represent.

    Parameters
    ----------
    config : TransformerConfig
        Our model's config.
    source : str
        The checkpoint, for error messages.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming our config field for any other choice.

    Notes
    -----
    MarianMT is post-norm with sinusoidal positions, dot-product attention scaled by 1/sqrt(d_k) over the full
    sequence, head widths ``d_model / num_heads`` and LayerNorm epsilon 1e-5; each other choice is refused.
    Both sinusoidal layouts are exportable (the interleaved one by a change of basis).
    """
    requirements = [
        ("norm_first", config.norm_first, False),
        ("positional_encoding", config.positional_encoding, "sinusoidal"),
        *attention_requirements(config),
        ("layer_norm_eps", config.layer_norm_eps, MARIAN_LAYER_NORM_EPS),
    ]
    refuse_unsupported(requirements, source, "MarianMT")


def config_to_marian(config: TransformerConfig) -> dict[str, Any]:
    """Write our config as the fields of a HuggingFace ``MarianConfig``.

    Parameters
    ----------
    config : TransformerConfig
        A config that passed :func:`check_exportable`.

    Returns
    -------
    dict of str to Any
        The contents of ``config.json``.

    Notes
    -----
    ``decoder_start_token_id`` is our start id (BOS for this project's models). ``forced_eos_token_id`` is
    written as null, unlike OPUS-MT configs (which force EOS): forcing EOS at the length limit replaces the
    last token of an output the limit stops, where our search keeps it (issue #28 item 7). Leaving the key out
    would not do: ``MarianConfig`` then defaults it to 0, which is our PAD.
    """
    return {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "vocab_size": config.src_vocab_size,
        "decoder_vocab_size": config.tgt_vocab_size,
        "d_model": config.d_model,
        "encoder_layers": config.num_encoder_layers,
        "decoder_layers": config.num_decoder_layers,
        "encoder_attention_heads": config.num_heads,
        "decoder_attention_heads": config.num_heads,
        "encoder_ffn_dim": config.d_ff,
        "decoder_ffn_dim": config.d_ff,
        "activation_function": OUR_TO_MARIAN_ACTIVATION[config.activation],
        "dropout": config.dropout,
        "attention_dropout": config.attention_dropout,
        "activation_dropout": 0.0,
        "max_position_embeddings": EXPORT_MAX_POSITIONS,
        "scale_embedding": config.scale_embeddings,
        "share_encoder_decoder_embeddings": config.share_embeddings,
        "tie_word_embeddings": config.tie_output_projection,
        "pad_token_id": config.pad_id,
        "bos_token_id": config.bos_id,
        "eos_token_id": config.eos_id,
        "forced_eos_token_id": None,
        "decoder_start_token_id": config.start_id,
        "is_encoder_decoder": True,
    }


def generation_settings(config: TransformerConfig) -> dict[str, Any]:
    """Write the ``generation_config.json`` that makes ``generate()`` search like our decoder.

    Parameters
    ----------
    config : TransformerConfig
        Our model's config.

    Returns
    -------
    dict of str to Any
        Special ids, and ``bad_words_ids`` forbidding PAD (and BOS when it is not EOS) as our search does.

    Notes
    -----
    ``num_beams`` is our default 4. HuggingFace's length penalty is our "power" form with alpha 1 by
    default; our translator's default is the "gnmt" form with alpha 0.6, which ``generate()`` cannot express.
    ``early_stopping`` is true: a sentence is done once ``num_beams`` hypotheses have finished, our stopping
    rule (``generate()``'s default keeps searching while a live beam could still win). No EOS is forced at
    the length limit (``forced_eos_token_id`` null), as our search forces none: with the same beam size,
    penalty and ``max_new_tokens``, ``generate()`` returns our outputs (tested against ``transformers``).
    """
    forbidden = [[config.pad_id]]
    if config.bos_id not in (config.eos_id, config.pad_id):
        forbidden.append([config.bos_id])
    return {
        "bad_words_ids": forbidden,
        "bos_token_id": config.bos_id,
        "decoder_start_token_id": config.start_id,
        "eos_token_id": config.eos_id,
        "forced_eos_token_id": None,
        "early_stopping": True,
        "pad_token_id": config.pad_id,
        "num_beams": 4,
        "max_length": EXPORT_MAX_POSITIONS,
    }
