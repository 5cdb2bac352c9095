"""Hyper-parameters of the attentional LSTM encoder-decoder (:class:`RNNConfig`) and its attention options.

The recurrent model is the baseline the Transformer replaced (the paper's results compare against such
models): a bidirectional LSTM encoder and an LSTM decoder with global attention (Luong et al., 2015), scoring
with a dot product, a bilinear form ("general") or Bahdanau et al.'s (2015) additive network. The config
mirrors :class:`~transformer.model.config.TransformerConfig` where the rest of the package reads it
(vocabulary sizes, special ids, ``start_id``), so token batches, the loss, checkpoints and the searches treat
both alike.
"""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from transformer.model.special_tokens import SpecialTokens
from transformer.typed_fields import (
    NON_NEGATIVE,
    POSITIVE,
    PROBABILITY_BELOW_ONE,
    FieldRange,
    build_dataclass,
    check_choice,
    check_field_types,
    check_ranges,
)

#: The scoring functions of the decoder's attention: Luong's "dot" and "general", Bahdanau's "additive".
RNN_ATTENTIONS = ("dot", "general", "additive")


@dataclass(frozen=True)
class RNNConfig(SpecialTokens):
    """Hyper-parameters of the attentional LSTM encoder-decoder.

    Parameters
    ----------
    architecture : str
        Always "rnn": the key a YAML ``model`` section and a checkpoint's model config use to select this
        class instead of :class:`~transformer.model.config.TransformerConfig`.
    vocab_size : int
        Source vocabulary size, and target vocabulary size unless ``target_vocab_size`` is set. Positive.
    target_vocab_size : int or None
        Target vocabulary size when it differs from the source's (requires ``share_embeddings=False``).
        Positive or None.
    embedding_dim : int
        Width of the source and target token embeddings. Positive.
    hidden_size : int
        Width of the decoder's LSTM states, of the attentional hidden state h~_t and of the encoder output
        (each encoder direction has ``hidden_size // 2`` units and the two are concatenated); positive and
        even.
    num_encoder_layers : int
        Stacked bidirectional LSTM layers of the encoder. Positive.
    num_decoder_layers : int
        Stacked LSTM layers of the decoder. Positive.
    dropout : float
        Dropout on the embeddings, between stacked LSTM layers and on h~_t before the output projection.
        In [0, 1).
    attention : str
        Scoring of the global attention: "dot" (h_t^T h̄_s), "general" (h_t^T W_a h̄_s), both Luong et al.
        (2015), or "additive" (v_a^T tanh(W_a h_t + U_a h̄_s), Bahdanau et al., 2015).
    input_feeding : bool
        Concatenate h~_{t-1} to the embedding of the decoder input at step t (Luong et al., 2015, section
        3.3), so that the decoder knows where it attended before. Without it the decoder's LSTM runs over
        the whole target at once in training.
    share_embeddings : bool
        One embedding matrix for source and target tokens (a joint vocabulary).
    tie_output_projection : bool
        Use the target embedding matrix as the output projection W_s (requires ``embedding_dim ==
        hidden_size``).
    pad_id, bos_id, eos_id, unk_id : int
        Ids of the special tokens, fixed by the tokenizer. Non-negative and inside the vocabulary.
    decoder_start_id : int or None
        First decoder input token; None means ``bos_id``. Non-negative and inside the vocabulary, or None.

    Raises
    ------
    ValueError
        At construction, naming the field, for an invalid value.
    TypeError
        At construction, naming the field, for a wrongly typed value.

    Notes
    -----
    Frozen and validated at construction like ``TransformerConfig``, every numeric field's range
    (``FIELD_RANGES``) first. ``to_dict`` includes ``architecture``, so
    a checkpoint's stored config says which model to build.
    """

    vocab_size: int
    architecture: str = "rnn"
    target_vocab_size: int | None = None
    embedding_dim: int = 512
    hidden_size: int = 512
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    dropout: float = 0.3
    attention: str = "general"
    input_feeding: bool = True
    share_embeddings: bool = True
    tie_output_projection: bool = True
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3
    decoder_start_id: int | None = None

    #: The range of every numeric field (:func:`transformer.typed_fields.check_ranges`), as the docstring says.
    FIELD_RANGES: ClassVar[Mapping[str, FieldRange]] = {
        "vocab_size": POSITIVE,
        "target_vocab_size": POSITIVE,
        "embedding_dim": POSITIVE,
        "hidden_size": POSITIVE,
        "num_encoder_layers": POSITIVE,
        "num_decoder_layers": POSITIVE,
        "dropout": PROBABILITY_BELOW_ONE,
        "pad_id": NON_NEGATIVE,
        "bos_id": NON_NEGATIVE,
        "eos_id": NON_NEGATIVE,
        "unk_id": NON_NEGATIVE,
        "decoder_start_id": NON_NEGATIVE,
    }

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.architecture != "rnn":
            raise ValueError(f"RNNConfig.architecture={self.architecture!r} must be 'rnn'")
        check_ranges(self)
        if self.hidden_size % 2:
            raise ValueError(
                f"RNNConfig.hidden_size={self.hidden_size} must be even: each encoder direction has half"
            )
        check_choice(self, "attention", RNN_ATTENTIONS)
        if self.tie_output_projection and self.embedding_dim != self.hidden_size:
            raise ValueError(
                "RNNConfig.tie_output_projection needs embedding_dim == hidden_size, got "
                f"{self.embedding_dim} and {self.hidden_size}"
            )
        self.check_special_tokens()

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "RNNConfig":
        """Build a config from a mapping (a YAML ``model`` section or a checkpoint's stored config).

        Parameters
        ----------
        values : dict of str to Any
            Field names and values; ``architecture`` may be given ("rnn") or left out.

        Returns
        -------
        RNNConfig
            The validated config.

        Raises
        ------
        ValueError
            Listing the known fields for an unknown key, or naming the field for an invalid value.
        TypeError
            Naming the field for a wrongly typed value.

        Notes
        -----
        An unknown key is an error, so a Transformer setting such as ``d_model`` in an RNN config is refused
        rather than ignored.
        """
        return build_dataclass(cls, values)

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a plain dictionary.

        Returns
        -------
        dict of str to Any
            Every field and its value, ``architecture`` included; round-trips through :meth:`from_dict`.

        Notes
        -----
        Checkpoints store this dict as JSON in the weights file's metadata; its ``architecture`` key is how
        :func:`transformer.architectures.model_config_from_dict` knows to rebuild an ``RNNConfig``.
        """
        return dataclasses.asdict(self)
