"""Typed configuration of the model. YAML files in ``configs/`` hold values for these dataclasses."""

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any

from transformer.model.feed_forward import ACTIVATIONS
from transformer.model.multihead_attention import ATTENTION_SCORINGS
from transformer.model.presets import BASE_SETTINGS, BIG_SETTINGS, find_table2_variant, varied_settings

POSITIONAL_ENCODINGS = ("sinusoidal", "learned")


@dataclass(frozen=True)
class TransformerConfig:
    """Hyper-parameters of the encoder-decoder Transformer; defaults are the paper's base model.

    Parameters
    ----------
    vocab_size : int
        Source vocabulary size, and target vocabulary size unless ``target_vocab_size`` is set.
    target_vocab_size : int or None
        Target vocabulary size when it differs from the source's (requires ``share_embeddings=False``).
    d_model : int
        Width of embeddings and of every sub-layer output (512 base, 1024 big).
    d_ff : int
        Inner width of the feed-forward networks (2048 base, 4096 big).
    num_heads : int
        Attention heads h (8 base, 16 big).
    d_k : int or None
        Query/key width per head; None means ``d_model // num_heads`` (Table 2 rows A, B, C vary it).
    d_v : int or None
        Value width per head; None means ``d_model // num_heads``.
    num_encoder_layers : int
        Encoder layers N (6).
    num_decoder_layers : int
        Decoder layers N (6).
    dropout : float
        P_drop on every sub-layer output and on the embedding sums (0.1 base, 0.3 big EN-DE).
    attention_dropout : float
        Dropout on attention weights; the paper uses none.
    activation : str
        Feed-forward non-linearity: "relu" (paper), "silu" or "gelu" (other toolkits' checkpoints).
    positional_encoding : str
        "sinusoidal" (paper) or "learned" (Table 2 row E).
    max_positions : int
        Positions of the learned embedding table; sinusoidal encodings have no limit.
    share_embeddings : bool
        One embedding matrix for source and target tokens (paper section 3.4, with a shared BPE vocabulary).
    tie_output_projection : bool
        Use the target embedding matrix as the pre-softmax projection (section 3.4).
    scale_embeddings : bool
        Multiply embeddings by sqrt(d_model) (section 3.4).
    norm_first : bool
        Pre-norm ``x + Sublayer(LayerNorm(x))`` instead of the paper's post-norm ``LayerNorm(x + Sublayer(x))``.
    layer_norm_eps : float
        Epsilon of every LayerNorm.
    attention_scoring : str
        "dot_product" (Eq. 1) or "additive" (Bahdanau), section 3.2.1.
    attention_window : int or None
        Restrict self-attention to r neighbours on each side (Table 1, last row); None is full attention.
    pad_id, bos_id, eos_id, unk_id : int
        Ids of the special tokens, fixed by the tokenizer.

    Notes
    -----
    Frozen and validated at construction: an invalid combination raises ValueError naming the field.
    """

    vocab_size: int
    target_vocab_size: int | None = None
    d_model: int = 512
    d_ff: int = 2048
    num_heads: int = 8
    d_k: int | None = None
    d_v: int | None = None
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation: str = "relu"
    positional_encoding: str = "sinusoidal"
    max_positions: int = 1024
    share_embeddings: bool = True
    tie_output_projection: bool = True
    scale_embeddings: bool = True
    norm_first: bool = False
    layer_norm_eps: float = 1e-5
    attention_scoring: str = "dot_product"
    attention_window: int | None = None
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3

    def __post_init__(self) -> None:
        check_field_types(self)
        positive = ["vocab_size", "d_model", "d_ff", "num_heads", "num_encoder_layers", "num_decoder_layers"]
        positive += ["max_positions"]
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"TransformerConfig.{name}={getattr(self, name)} must be positive")
        for name in ("target_vocab_size", "d_k", "d_v", "attention_window"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"TransformerConfig.{name}={value} must be positive or None")
        if (self.d_k is None or self.d_v is None) and self.d_model % self.num_heads:
            raise ValueError(
                f"TransformerConfig: d_model={self.d_model} is not divisible by num_heads={self.num_heads}; "
                "set d_k and d_v explicitly"
            )
        self._check_choices()
        self._check_vocabulary()

    def _check_choices(self) -> None:
        for name, value, choices in (
            ("activation", self.activation, ACTIVATIONS),
            ("positional_encoding", self.positional_encoding, POSITIONAL_ENCODINGS),
            ("attention_scoring", self.attention_scoring, ATTENTION_SCORINGS),
        ):
            if value not in choices:
                raise ValueError(f"TransformerConfig.{name}={value!r} is not one of {choices}")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"TransformerConfig.{name}={getattr(self, name)} must be in [0, 1)")
        if self.positional_encoding == "sinusoidal" and self.d_model % 2:
            raise ValueError(
                f"TransformerConfig.d_model={self.d_model} must be even for sinusoidal encodings"
            )

    def _check_vocabulary(self) -> None:
        special = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id, "unk_id": self.unk_id}
        if len(set(special.values())) != len(special):
            raise ValueError(f"TransformerConfig special token ids must be distinct, got {special}")
        smallest = min(self.vocab_size, self.tgt_vocab_size)
        for name, value in special.items():
            if not 0 <= value < smallest:
                raise ValueError(
                    f"TransformerConfig.{name}={value} is outside the vocabulary [0, {smallest})"
                )
        if self.share_embeddings and self.tgt_vocab_size != self.vocab_size:
            raise ValueError(
                f"TransformerConfig.share_embeddings needs equal vocabularies, got vocab_size={self.vocab_size} "
                f"and target_vocab_size={self.target_vocab_size}"
            )

    @property
    def src_vocab_size(self) -> int:
        """Source vocabulary size."""
        return self.vocab_size

    @property
    def tgt_vocab_size(self) -> int:
        """Target vocabulary size (``target_vocab_size`` or else ``vocab_size``)."""
        return self.target_vocab_size if self.target_vocab_size is not None else self.vocab_size

    @property
    def head_dims(self) -> tuple[int, int]:
        """The per-head widths ``(d_k, d_v)`` with defaults resolved."""
        default = self.d_model // self.num_heads
        return (self.d_k or default, self.d_v or default)

    @classmethod
    def base(cls, vocab_size: int = 37000, **overrides: Any) -> "TransformerConfig":
        """Build the paper's base model configuration.

        Parameters
        ----------
        vocab_size : int
            Shared vocabulary size (the paper's EN-DE BPE vocabulary has about 37,000 tokens).
        **overrides : Any
            Any other ``TransformerConfig`` field.

        Returns
        -------
        TransformerConfig
            N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1.

        Notes
        -----
        About 63.1M parameters with a 37,000-token shared and tied vocabulary (the paper reports 65M).
        """
        return cls.from_dict({**BASE_SETTINGS, "vocab_size": vocab_size, **overrides})

    @classmethod
    def big(cls, vocab_size: int = 37000, **overrides: Any) -> "TransformerConfig":
        """Build the paper's big model configuration.

        Parameters
        ----------
        vocab_size : int
            Shared vocabulary size.
        **overrides : Any
            Any other ``TransformerConfig`` field.

        Returns
        -------
        TransformerConfig
            N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3.

        Notes
        -----
        About 214.2M parameters with a 37,000-token shared and tied vocabulary (the paper reports 213M).
        """
        return cls.from_dict({**BIG_SETTINGS, "vocab_size": vocab_size, **overrides})

    @classmethod
    def table2(cls, row: str, vocab_size: int = 37000, **settings: Any) -> "TransformerConfig":
        """Build the model of a Table 2 variant.

        Parameters
        ----------
        row : str
            A variant name such as ``"C4"``, or a row letter ``"A"`` .. ``"E"``.
        vocab_size : int
            Shared vocabulary size.
        **settings : Any
            With a row letter, the settings the row varies pick the variant (``table2("C", d_model=256)``);
            any other field is a plain override.

        Returns
        -------
        TransformerConfig
            The base model with the variant's changes and the overrides applied.

        Notes
        -----
        Rows D3/D4 change only label smoothing, a training setting: they return the base model, and
        ``transformer.model.presets.find_table2_variant`` gives their epsilon.
        """
        varied = varied_settings(row[0]) if row else set()
        selectors = {key: value for key, value in settings.items() if key in varied}
        variant = find_table2_variant(row, selectors)
        overrides = {key: value for key, value in settings.items() if key not in varied}
        values = {**BASE_SETTINGS, "vocab_size": vocab_size, **variant.model_settings, **overrides}
        return cls.from_dict(values)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "TransformerConfig":
        """Build a config from a mapping (for example a YAML file's ``model`` section).

        Parameters
        ----------
        values : dict of str to Any
            Field names and values.

        Returns
        -------
        TransformerConfig
            The validated config.

        Notes
        -----
        An unknown key raises ValueError listing the known fields.
        """
        return build_dataclass(cls, values)

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a plain dictionary.

        Returns
        -------
        dict of str to Any
            Every field and its value; round-trips through :meth:`from_dict`.

        Notes
        -----
        Stored inside checkpoints as JSON.
        """
        return dataclasses.asdict(self)


T = typing.TypeVar("T")


def build_dataclass(cls: type[T], values: dict[str, Any]) -> T:
    """Construct a config dataclass from a mapping, refusing unknown keys.

    Parameters
    ----------
    cls : type
        A dataclass type.
    values : dict of str to Any
        Field names and values.

    Returns
    -------
    object
        An instance of ``cls``.

    Notes
    -----
    The error for an unknown key names the key and the class, and lists the known fields.
    """
    known = {item.name for item in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for {cls.__name__}; known: {sorted(known)}")
    return cls(**values)


def check_field_types(instance: Any) -> None:
    """Check that every field of a dataclass instance holds a value of its annotated type.

    Parameters
    ----------
    instance : Any
        A dataclass instance whose annotations are ``int``, ``float``, ``bool``, ``str``, ``X | None``,
        ``tuple[...]`` or ``list[...]``.

    Returns
    -------
    None

    Notes
    -----
    An int is accepted for a float field; a bool is never accepted for an int field (YAML's ``yes`` would
    otherwise become 1). Raises TypeError naming the class, field, value and expected type.
    """
    hints = typing.get_type_hints(type(instance))
    for item in dataclasses.fields(instance):
        value = getattr(instance, item.name)
        if not _has_type(value, hints[item.name]):
            raise TypeError(
                f"{type(instance).__name__}.{item.name}={value!r} has type {type(value).__name__}, "
                f"expected {hints[item.name]}"
            )


def _has_type(value: Any, expected: Any) -> bool:
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return any(_has_type(value, option) for option in typing.get_args(expected))
    if expected is type(None):
        return value is None
    if origin in (tuple, list):
        return isinstance(value, origin)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is Any:
        return True
    return isinstance(value, expected)


LENGTH_PENALTY_FORMS = ("gnmt", "power")


@dataclass(frozen=True)
class DecodeConfig:
    """How to search for translations; defaults are the paper's (section 6.1).

    Parameters
    ----------
    beam_size : int
        Hypotheses kept per sentence (4); 1 is greedy search.
    length_penalty : float
        alpha of the length penalty (0.6); 0 disables it.
    length_penalty_form : str
        "gnmt": scores are divided by ((5 + |Y|) / 6)^alpha (Wu et al., 2016; the paper's choice).
        "power": divided by |Y|^alpha (HuggingFace ``generate()``'s form, for parity tests).
    max_length_offset : int
        Longest output = source length + this (50, section 6.1).
    max_length : int or None
        Absolute cap on output tokens (EOS excluded); None means no cap beyond the offset rule.
    min_length : int
        EOS is forbidden before this many tokens; with ``max_length`` equal to it, forces the output length.
    nbest : int
        Hypotheses returned per sentence (at most ``beam_size``).
    use_cache : bool
        Reuse self-attention keys/values and the projected encoder output between steps (incremental
        decoding); False recomputes the whole prefix every step (same tokens, slower).

    Notes
    -----
    Raises ValueError at construction for a non-positive beam, nbest > beam, negative lengths or an unknown
    penalty form.
    """

    beam_size: int = 4
    length_penalty: float = 0.6
    length_penalty_form: str = "gnmt"
    max_length_offset: int = 50
    max_length: int | None = None
    min_length: int = 0
    nbest: int = 1
    use_cache: bool = True

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.beam_size < 1:
            raise ValueError(f"DecodeConfig.beam_size={self.beam_size} must be at least 1")
        if not 1 <= self.nbest <= self.beam_size:
            raise ValueError(
                f"DecodeConfig.nbest={self.nbest} must be between 1 and beam_size={self.beam_size}"
            )
        if self.length_penalty_form not in LENGTH_PENALTY_FORMS:
            raise ValueError(
                f"DecodeConfig.length_penalty_form={self.length_penalty_form!r} is not one of {LENGTH_PENALTY_FORMS}"
            )
        if self.max_length_offset < 0 or self.min_length < 0:
            raise ValueError("DecodeConfig.max_length_offset and min_length must be non-negative")
        if self.max_length is not None and self.max_length < max(1, self.min_length):
            raise ValueError(
                f"DecodeConfig.max_length={self.max_length} must be at least max(1, min_length={self.min_length})"
            )
