"""The model's hyper-parameters (:class:`TransformerConfig`) and the option lists they are checked against.

Defaults are the paper's base model (section 3, Table 3); :meth:`TransformerConfig.base`, :meth:`~TransformerConfig.big`
and :meth:`~TransformerConfig.table2` build the named models of Tables 2 and 3 from :mod:`transformer.model.presets`.
The run configuration (:mod:`transformer.config`) composes this config with the data, training and decoding
settings; the model package depends on this module only, never on the run configuration.
"""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from transformer.model.feed_forward import ACTIVATIONS
from transformer.model.multihead_attention import ATTENTION_SCORINGS
from transformer.model.presets import BASE_SETTINGS, BIG_SETTINGS, find_table2_variant, varied_settings
from transformer.model.scaled_dot_product_attention import ATTENTION_IMPLEMENTATIONS
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

POSITIONAL_ENCODINGS = ("sinusoidal", "learned", "none")
#: How dot-product scores are scaled: 1/sqrt(d_k) (the paper), not at all, or 1/d_k (section 3.2.1's question).
ATTENTION_SCALINGS = ("sqrt", "none", "linear")
SINUSOIDAL_LAYOUTS = ("interleaved", "concatenated")


@dataclass(frozen=True)
class TransformerConfig(SpecialTokens):
    """Hyper-parameters of the encoder-decoder Transformer; defaults are the paper's base model.

    Parameters
    ----------
    vocab_size : int
        Source vocabulary size, and target vocabulary size unless ``target_vocab_size`` is set. Positive.
    target_vocab_size : int or None
        Target vocabulary size when it differs from the source's (requires ``share_embeddings=False``).
        Positive or None.
    d_model : int
        Width of embeddings and of every sub-layer output (512 base, 1024 big). Positive.
    d_ff : int
        Inner width of the feed-forward networks (2048 base, 4096 big). Positive.
    num_heads : int
        Attention heads h (8 base, 16 big). Positive.
    d_k : int or None
        Query/key width per head; None means ``d_model // num_heads`` (Table 2 rows A, B, C vary it).
        Positive or None.
    d_v : int or None
        Value width per head; None means ``d_model // num_heads``. Positive or None.
    num_encoder_layers : int
        Encoder layers N (6). Positive.
    num_decoder_layers : int
        Decoder layers N (6). Positive.
    dropout : float
        P_drop on every sub-layer output and on the embedding sums (0.1 base, 0.3 big EN-DE). In [0, 1).
    attention_dropout : float
        Dropout on attention weights; the paper uses none. In [0, 1).
    activation : str
        Feed-forward non-linearity: "relu" (paper), "silu" or "gelu" (other toolkits' checkpoints).
    positional_encoding : str
        "sinusoidal" (paper), "learned" (Table 2 row E) or "none" (no position information at all: the
        encoder is then permutation-equivariant, the ablation of ``transformer experiment positions``).
    max_positions : int
        Positions of the learned embedding table; sinusoidal encodings have no limit. Positive.
    share_embeddings : bool
        One embedding matrix for source and target tokens (paper section 3.4, with a shared BPE vocabulary).
    tie_output_projection : bool
        Use the target embedding matrix as the pre-softmax projection (section 3.4).
    scale_embeddings : bool
        Multiply embeddings by sqrt(d_model) (section 3.4).
    norm_first : bool
        Pre-norm ``x + Sublayer(LayerNorm(x))`` instead of the paper's post-norm ``LayerNorm(x + Sublayer(x))``.
    layer_norm_eps : float
        Epsilon of every LayerNorm. In (0, 1]: zero divides by zero on a constant row, and a larger epsilon
        swamps the variance it is added to.
    attention_scoring : str
        "dot_product" (Eq. 1) or "additive" (Bahdanau), section 3.2.1.
    attention_scaling : str
        Scale of the dot-product scores: "sqrt" divides by sqrt(d_k) (Eq. 1, the paper), "none" leaves them
        unscaled (dot-product attention "without scaling", section 3.2.1) and "linear" divides by d_k. Must be
        "sqrt" with additive scoring, which has no such factor.
    attention_window : int or None
        Restrict self-attention to r neighbours on each side (Table 1, last row); None is full attention.
        Positive or None.
    attention_implementation : str
        "auto" (explicit matrix products up to a length measured on the machine at hand, the fused kernel
        beyond, where it is faster and keeps memory linear), "fused" or "explicit". Training times both
        paths at 16, 32, ... positions once per machine, precision and head shape (cached like
        ``train.precision``): the explicit formula won up to a few hundred positions in bf16 on the CPUs
        measured, while in fp32 on a CPU without AMX, and on GPUs, the fused kernel wins from the start.
        Translation (one new query per step) and a model built directly use 256.
    pad_id, bos_id, eos_id, unk_id : int
        Ids of the special tokens, fixed by the tokenizer. Non-negative and inside the vocabulary.
    decoder_start_id : int or None
        First decoder input token; None means ``bos_id``. (HuggingFace Marian starts from its pad token.)
        Non-negative and inside the vocabulary, or None.
    sinusoidal_layout : str
        "interleaved": sin in even and cos in odd dimensions, the paper's formula; "concatenated": all sines
        then all cosines (HuggingFace Marian, fairseq). Same frequencies, different order.
    output_bias : bool
        Add a bias vector to the logits (Marian's ``final_logits_bias``); the paper has none.

    Raises
    ------
    ValueError
        At construction, naming the field, for an invalid value or combination.
    TypeError
        At construction, naming the field, for a wrongly typed value.

    Notes
    -----
    Frozen and validated at construction, so a model is never built from a combination that cannot work
    (``d_model`` not divisible by ``num_heads`` without explicit ``d_k`` and ``d_v``, a special id outside the
    vocabulary). Every numeric field's range (``FIELD_RANGES``) is checked first, naming the field.
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
    attention_scaling: str = "sqrt"
    attention_window: int | None = None
    attention_implementation: str = "auto"
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3
    decoder_start_id: int | None = None
    sinusoidal_layout: str = "interleaved"
    output_bias: bool = False

    #: The range of every numeric field (:func:`transformer.typed_fields.check_ranges`), as the docstring says.
    FIELD_RANGES: ClassVar[Mapping[str, FieldRange]] = {
        "vocab_size": POSITIVE,
        "target_vocab_size": POSITIVE,
        "d_model": POSITIVE,
        "d_ff": POSITIVE,
        "num_heads": POSITIVE,
        "d_k": POSITIVE,
        "d_v": POSITIVE,
        "num_encoder_layers": POSITIVE,
        "num_decoder_layers": POSITIVE,
        "dropout": PROBABILITY_BELOW_ONE,
        "attention_dropout": PROBABILITY_BELOW_ONE,
        "max_positions": POSITIVE,
        "layer_norm_eps": FieldRange(0, 1, low_open=True),
        "attention_window": POSITIVE,
        "pad_id": NON_NEGATIVE,
        "bos_id": NON_NEGATIVE,
        "eos_id": NON_NEGATIVE,
        "unk_id": NON_NEGATIVE,
        "decoder_start_id": NON_NEGATIVE,
    }

    def __post_init__(self) -> None:
        check_field_types(self)
        check_ranges(self)
        if (self.d_k is None or self.d_v is None) and self.d_model % self.num_heads:
            raise ValueError(
                f"TransformerConfig: d_model={self.d_model} is not divisible by num_heads={self.num_heads}; "
                "set d_k and d_v explicitly"
            )
        self._check_choices()
        self.check_special_tokens()

    def _check_choices(self) -> None:
        check_choice(self, "activation", ACTIVATIONS)
        check_choice(self, "positional_encoding", POSITIONAL_ENCODINGS)
        check_choice(self, "attention_scoring", ATTENTION_SCORINGS)
        check_choice(self, "attention_scaling", ATTENTION_SCALINGS)
        check_choice(self, "sinusoidal_layout", SINUSOIDAL_LAYOUTS)
        check_choice(self, "attention_implementation", ATTENTION_IMPLEMENTATIONS)
        if self.positional_encoding == "sinusoidal" and self.d_model % 2:
            raise ValueError(
                f"TransformerConfig.d_model={self.d_model} must be even for sinusoidal encodings"
            )
        if self.attention_scoring == "additive" and self.attention_scaling != "sqrt":
            raise ValueError(
                f"TransformerConfig.attention_scaling={self.attention_scaling!r} applies to dot-product scores; "
                "additive scoring has no scale factor (leave attention_scaling at 'sqrt')"
            )

    @property
    def head_dims(self) -> tuple[int, int]:
        """The per-head widths ``(d_k, d_v)`` with defaults resolved.

        Returns
        -------
        tuple[int, int]
            ``d_k`` and ``d_v``, each ``d_model // num_heads`` when unset.

        Notes
        -----
        Section 3.2.2: the paper uses d_k = d_v = d_model / h = 64, so multi-head attention costs about as
        much as one head of full width. Explicit values (Table 2 rows A and B) need not divide ``d_model``;
        the default does, which construction checks.
        """
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
        if len(row) > 1:  # a full name such as "C4": a varied setting may only repeat the variant's value
            contradicted = {
                key: value
                for key, value in selectors.items()
                if value != variant.model_settings.get(key, BASE_SETTINGS.get(key, value))
            }
            if contradicted:
                raise ValueError(
                    f"Table 2 variant {variant.name} sets {dict(variant.model_settings)}; {contradicted} contradicts "
                    f"it (name the row letter {variant.row!r} to select by setting instead)"
                )
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

        Raises
        ------
        ValueError
            Listing the known fields for an unknown key, or naming the field for an invalid value.
        TypeError
            Naming the field for a wrongly typed value.

        Notes
        -----
        An unknown key is an error rather than ignored, so a typo in a YAML file never silently trains the
        default.
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
        Every field is a JSON scalar, so checkpoints store this dict as JSON in the weights file's metadata
        and rebuild the config with :meth:`from_dict`, which validates it again; a field added later gets
        its default when an older checkpoint is read.
        """
        return dataclasses.asdict(self)
