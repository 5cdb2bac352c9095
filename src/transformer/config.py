"""Typed configuration: model, data, training and decoding. YAML files in ``configs/`` hold their values."""

import dataclasses
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from transformer.model.feed_forward import ACTIVATIONS
from transformer.model.multihead_attention import ATTENTION_SCORINGS
from transformer.model.presets import BASE_SETTINGS, BIG_SETTINGS, find_table2_variant, varied_settings
from transformer.model.scaled_dot_product_attention import ATTENTION_IMPLEMENTATIONS

POSITIONAL_ENCODINGS = ("sinusoidal", "learned")
SINUSOIDAL_LAYOUTS = ("interleaved", "concatenated")


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
    attention_implementation : str
        "auto" (explicit matrix products up to a length measured on the machine at hand, the fused kernel
        beyond, where it is faster and keeps memory linear), "fused" or "explicit". Training times both
        paths at 16, 32, ... positions once per machine, precision and head shape (cached like
        ``train.precision``): the explicit formula won up to a few hundred positions in bf16 on the CPUs
        measured, while in fp32 on a CPU without AMX, and on GPUs, the fused kernel wins from the start.
        Translation (one new query per step) and a model built directly use 256.
    pad_id, bos_id, eos_id, unk_id : int
        Ids of the special tokens, fixed by the tokenizer.
    decoder_start_id : int or None
        First decoder input token; None means ``bos_id``. (HuggingFace Marian starts from its pad token.)
    sinusoidal_layout : str
        "interleaved": sin in even and cos in odd dimensions, the paper's formula; "concatenated": all sines
        then all cosines (HuggingFace Marian, fairseq). Same frequencies, different order.
    output_bias : bool
        Add a bias vector to the logits (Marian's ``final_logits_bias``); the paper has none.

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
    attention_implementation: str = "auto"
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3
    decoder_start_id: int | None = None
    sinusoidal_layout: str = "interleaved"
    output_bias: bool = False

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
            ("sinusoidal_layout", self.sinusoidal_layout, SINUSOIDAL_LAYOUTS),
            ("attention_implementation", self.attention_implementation, ATTENTION_IMPLEMENTATIONS),
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
        if self.decoder_start_id is not None:
            special["decoder_start_id"] = self.decoder_start_id
        smallest = min(self.vocab_size, self.tgt_vocab_size)
        for name, value in special.items():
            if not 0 <= value < smallest:
                raise ValueError(
                    f"TransformerConfig.{name}={value} is outside the vocabulary [0, {smallest})"
                )
        # BOS may equal EOS and the decoder may start from PAD (Marian does both); the rest must differ.
        for first, second in (
            ("pad_id", "eos_id"),
            ("pad_id", "unk_id"),
            ("eos_id", "unk_id"),
            ("pad_id", "bos_id"),
        ):
            if special[first] == special[second]:
                raise ValueError(
                    f"TransformerConfig.{first} and {second} must differ, both are {special[first]}"
                )
        if self.share_embeddings and self.tgt_vocab_size != self.vocab_size:
            raise ValueError(
                f"TransformerConfig.share_embeddings needs equal vocabularies, got vocab_size={self.vocab_size} "
                f"and target_vocab_size={self.target_vocab_size}"
            )

    @property
    def start_id(self) -> int:
        """The first decoder input token: ``decoder_start_id``, else ``bos_id``."""
        return self.decoder_start_id if self.decoder_start_id is not None else self.bos_id

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


PRECISIONS = ("auto", "fp32", "bf16", "fp16")


@dataclass(frozen=True)
class DataConfig:
    """Where the parallel text comes from and how it is tokenised.

    Parameters
    ----------
    corpus : str
        "synthetic" (the built-in grammar, generated from ``synthetic_seed``), a known corpus name such as
        "multi30k" (downloaded to ``cache_dir``), or "directory" (files in ``data_dir``).
    data_dir : str or None
        Folder of ``{train,valid,test}.{lang}[.gz]`` files when ``corpus == "directory"``.
    source_lang : str
        Source language suffix ("en").
    target_lang : str
        Target language suffix ("de").
    max_len : int
        Pairs with more BPE tokens than this on either side are dropped (and counted in the log).
    cache_dir : str
        Download cache for known corpora ("~" is expanded).
    mirror : str or None
        Local folder or file:// URL holding the corpus files, used instead of the internet.
    synthetic_train_pairs, synthetic_valid_pairs, synthetic_test_pairs : int
        Split sizes of the built-in corpus.
    synthetic_seed : int
        Seed of the built-in corpus.

    Notes
    -----
    The joint BPE vocabulary size is ``model.vocab_size``: one number, so the two cannot disagree.
    """

    corpus: str = "synthetic"
    data_dir: str | None = None
    source_lang: str = "en"
    target_lang: str = "de"
    max_len: int = 128
    cache_dir: str = "~/.cache/transformer"
    mirror: str | None = None
    synthetic_train_pairs: int = 20000
    synthetic_valid_pairs: int = 500
    synthetic_test_pairs: int = 500
    synthetic_seed: int = 1234

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.corpus == "directory" and not self.data_dir:
            raise ValueError("DataConfig.corpus='directory' needs data_dir")
        if self.max_len <= 1:
            raise ValueError(f"DataConfig.max_len={self.max_len} must be at least 2")
        for name in ("synthetic_train_pairs", "synthetic_valid_pairs", "synthetic_test_pairs"):
            if getattr(self, name) <= 0:
                raise ValueError(f"DataConfig.{name}={getattr(self, name)} must be positive")


@dataclass(frozen=True)
class TrainConfig:
    """The training recipe; defaults are the paper's (section 5).

    Parameters
    ----------
    max_tokens : int
        Token budget of one batch, per side (the paper: about 25,000 source and 25,000 target tokens per
        step, over 8 GPUs).
    accumulate : int
        Batches whose gradients are summed per optimizer step, to reach a large effective batch.
    max_steps : int
        Optimizer steps to run (100,000 base, 300,000 big).
    max_epochs : int or None
        Stop after this many passes over the data, if earlier.
    max_minutes : float or None
        Stop after this much wall-clock training time per invocation, if earlier than ``max_steps`` (a
        ``--resume`` trains for another ``max_minutes``). With a cool-down, the learning rate also anneals to
        zero by this limit: over the same share of the time as ``cooldown_steps`` is of ``max_steps``, so a
        slow machine still finishes the recipe (see ``transformer.training.schedule.TimeBudget``); without
        one, a run stopped by the limit ends with a warning naming the share of the schedule done.
    warmup_steps : int
        Linear warm-up steps of Eq. (3) (4,000).
    learning_rate_scale : float
        Multiplier on Eq. (3).
    peak_learning_rate : float or None
        If set, overrides ``learning_rate_scale`` so the schedule peaks at this rate.
    cooldown_steps : int
        Linear decay to zero over the last steps of ``max_steps`` (0: the paper's pure inverse square root).
    adam_beta1, adam_beta2, adam_epsilon : float
        Adam's beta_1 = 0.9, beta_2 = 0.98, epsilon = 1e-9.
    label_smoothing : float
        eps_ls = 0.1.
    clip_norm : float or None
        Clip the gradient norm to this (not in the paper); None disables clipping.
    precision : str
        "auto", "fp32", "bf16" or "fp16" (CUDA only, with a gradient scaler). "auto" times a training
        product at the model's shape in fp32 and in bf16 (fp16 on GPUs without bf16) and takes the reduced
        precision only if it is at least 1.1x faster: bf16 on CPUs with AMX (about 7x) and on GPUs, fp32 on
        CPUs whose bf16 is merely native (AVX-512 BF16 alone: about 0.55x) or absent. Measured once per
        machine and model shape, cached in ``~/.cache/transformer/autotune.json``, and logged.
    device : str
        "auto" (CUDA if available, else CPU), "cpu", "cuda" or "cuda:N".
    threads : int or None
        CPU threads for PyTorch. None measures: the model's products are timed with 1, 2, 4, ... threads up
        to the CPUs this process may use (its affinity mask and container quota, which PyTorch's own default
        ignores), and the largest count within 5% of the fastest is kept; cached like ``precision``.
    seed : int
        Seed of parameter initialisation, data order and dropout.
    log_every : int
        Steps between training-metric records.
    validate_every : int
        Steps between validation passes (0: only at the end).
    checkpoint_every : int
        Steps between checkpoints (0: only at the end).
    keep_checkpoints : int
        Recent checkpoints kept on disk, besides the best one by validation loss.
    tensorboard : bool
        Also write TensorBoard event files (needs the ``tensorboard`` extra).
    compile : bool
        Run the training forward through ``torch.compile`` (fused kernels, fewer launches). For GPUs, where
        small batches are bound by kernel launches; on the CPUs measured here it made steps slower
        (BENCHMARKS.md), and compiling takes tens of seconds before the first step.

    Notes
    -----
    Validated at construction; a bad value raises ValueError naming the field.
    """

    max_tokens: int = 4096
    accumulate: int = 1
    max_steps: int = 100_000
    max_epochs: int | None = None
    max_minutes: float | None = None
    warmup_steps: int = 4000
    learning_rate_scale: float = 1.0
    peak_learning_rate: float | None = None
    cooldown_steps: int = 0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-9
    label_smoothing: float = 0.1
    clip_norm: float | None = None
    precision: str = "auto"
    device: str = "auto"
    threads: int | None = None
    seed: int = 1
    log_every: int = 50
    validate_every: int = 1000
    checkpoint_every: int = 1000
    keep_checkpoints: int = 5
    tensorboard: bool = False
    compile: bool = False

    def __post_init__(self) -> None:
        check_field_types(self)
        for name in (
            "max_tokens",
            "accumulate",
            "max_steps",
            "warmup_steps",
            "log_every",
            "keep_checkpoints",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"TrainConfig.{name}={getattr(self, name)} must be positive")
        for name in ("validate_every", "checkpoint_every", "cooldown_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"TrainConfig.{name}={getattr(self, name)} must be non-negative")
        if self.precision not in PRECISIONS:
            raise ValueError(f"TrainConfig.precision={self.precision!r} is not one of {PRECISIONS}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"TrainConfig.label_smoothing={self.label_smoothing} must be in [0, 1)")
        if self.threads is not None and self.threads <= 0:
            raise ValueError(f"TrainConfig.threads={self.threads} must be positive")
        if self.clip_norm is not None and self.clip_norm <= 0:
            raise ValueError(f"TrainConfig.clip_norm={self.clip_norm} must be positive or null")


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything one training run needs: model, data, recipe and decoding settings.

    Parameters
    ----------
    model : TransformerConfig
        The model; ``vocab_size`` is also the size of the joint BPE vocabulary trained on the data.
    data : DataConfig
        The corpus.
    train : TrainConfig
        The recipe.
    decode : DecodeConfig
        Search settings for evaluation after training.

    Notes
    -----
    Built from YAML by :func:`load_config`.
    """

    model: TransformerConfig
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()

    def to_dict(self) -> dict[str, Any]:
        """Return the nested fields as plain dictionaries.

        Returns
        -------
        dict of str to Any
            ``{"model": {...}, "data": {...}, "train": {...}, "decode": {...}}``.

        Notes
        -----
        Round-trips through :func:`experiment_from_dict`.
        """
        return dataclasses.asdict(self)


SECTIONS: dict[str, type] = {
    "model": TransformerConfig,
    "data": DataConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
}


def experiment_from_dict(values: dict[str, Any], source: str = "config") -> ExperimentConfig:
    """Build an :class:`ExperimentConfig` from nested dictionaries.

    Parameters
    ----------
    values : dict of str to Any
        Sections ``model`` (required), ``data``, ``train`` and ``decode``. The model section may name a
        ``preset`` ("base", "big" or a Table 2 variant such as "C4") whose values the other keys override.
    source : str
        Where the values came from (a file name), for error messages.

    Returns
    -------
    ExperimentConfig
        The validated configuration.

    Notes
    -----
    Every error is a ValueError that starts with ``source`` and names the section and key at fault.
    """
    unknown = sorted(set(values) - set(SECTIONS))
    if unknown:
        raise ValueError(f"{source}: unknown section(s) {unknown}; known: {sorted(SECTIONS)}")
    if "model" not in values:
        raise ValueError(f"{source}: the 'model' section is required (at least model.vocab_size)")
    built: dict[str, Any] = {}
    for section, cls in SECTIONS.items():
        section_values = values.get(section) or {}
        if not isinstance(section_values, dict):
            raise ValueError(f"{source}: section '{section}' must be a mapping, got {section_values!r}")
        try:
            if section == "model":
                built[section] = _model_from_dict(dict(section_values))
            else:
                built[section] = build_dataclass(cls, section_values)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{source}: [{section}] {error}") from None
    return ExperimentConfig(**built)


def _model_from_dict(values: dict[str, Any]) -> TransformerConfig:
    preset = values.pop("preset", None)
    if preset is None:
        return TransformerConfig.from_dict(values)
    vocab_size = values.pop("vocab_size", 37000)
    if preset == "base":
        return TransformerConfig.base(vocab_size, **values)
    if preset == "big":
        return TransformerConfig.big(vocab_size, **values)
    return TransformerConfig.table2(str(preset), vocab_size, **values)


class _ConfigLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats: ``1e-3`` is 0.001, not the string "1e-3"."""


_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
        r"|[0-9][0-9_]*[eE][-+]?[0-9]+|\.(?:inf|Inf|INF)|[-+]\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def _parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_ConfigLoader)  # a SafeLoader subclass: no arbitrary objects


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Read a YAML experiment file and apply ``section.key=value`` overrides.

    Parameters
    ----------
    path : str or Path
        A YAML file with the sections of :class:`ExperimentConfig`.
    overrides : sequence of str
        Items like ``"train.max_steps=2000"`` or ``"model.dropout=0.3"``; the value is parsed as YAML
        (so ``null``, ``true``, ``1e-3`` and ``[1, 2]`` work).

    Returns
    -------
    ExperimentConfig
        The validated configuration.

    Notes
    -----
    Errors name the file (or the override) and the key at fault, in one line.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"cannot read config {path}: {error.strerror}") from None
    try:
        values = _parse_yaml(text) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not valid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a mapping of sections at the top level")
    for override in overrides:
        apply_override(values, override)
    return experiment_from_dict(values, source=str(path))


def apply_override(values: dict[str, Any], override: str) -> None:
    """Set one ``section.key=value`` item in nested config values, in place.

    Parameters
    ----------
    values : dict of str to Any
        Nested sections, as read from YAML.
    override : str
        ``"section.key=value"``; the value is parsed as YAML.

    Returns
    -------
    None

    Notes
    -----
    A malformed item raises ValueError quoting it.
    """
    key_path, separator, raw_value = override.partition("=")
    section, dot, key = key_path.strip().partition(".")
    if not separator or not dot or not section or not key:
        raise ValueError(f"--set {override!r}: expected section.key=value, e.g. train.max_steps=2000")
    try:
        parsed = _parse_yaml(raw_value)
    except yaml.YAMLError:
        raise ValueError(f"--set {override!r}: the value is not valid YAML") from None
    section_values = values.setdefault(section, {})
    if not isinstance(section_values, dict):
        raise ValueError(f"--set {override!r}: section '{section}' is not a mapping")
    section_values[key] = parsed
