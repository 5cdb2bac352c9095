"""Typed run configuration: data, training and decoding, composed with the model's; ``configs/*.yaml`` hold values.

:class:`ExperimentConfig` is what ``transformer train --config`` reads: a ``model`` section
(:class:`~transformer.model.config.TransformerConfig`, defined in the model package and re-exported here, or
with ``architecture: rnn`` the recurrent baseline's :class:`~transformer.baselines.rnn_config.RNNConfig`),
and ``data``, ``train`` and ``decode`` sections defined below.
"""

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from transformer.architectures import ARCHITECTURES, ModelConfig, model_config_from_dict
from transformer.baselines.rnn_config import RNNConfig
from transformer.model.config import TransformerConfig as TransformerConfig
from transformer.typed_fields import build_dataclass, check_field_types

LENGTH_PENALTY_FORMS = ("gnmt", "power")
MBR_CANDIDATE_SOURCES = ("sampling", "beam")
MBR_UTILITIES = ("chrf", "bleu")


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
        Longest output = source length + this (50, section 6.1); at most :data:`MAX_LENGTH_OFFSET`.
    max_length : int or None
        Absolute cap on output tokens (EOS excluded); None means no cap beyond the offset rule.
    min_length : int
        EOS is forbidden before this many tokens; with ``max_length`` equal to it, forces the output length.
    nbest : int
        Hypotheses returned per sentence (at most ``beam_size``).
    use_cache : bool
        Reuse self-attention keys/values and the projected encoder output between steps (incremental
        decoding); False recomputes the whole prefix every step (same tokens, slower).
    sampling : bool
        Draw each token at random from the model's distribution (ancestral sampling) instead of searching;
        ``nbest`` samples per sentence, ``beam_size`` ignored. Used for back-translation and MBR candidates.
    temperature : float
        Sampling only: divides the log-probabilities before truncation; below 1 sharpens, above 1 flattens.
    top_k : int
        Sampling only: keep the ``top_k`` most probable tokens (0 keeps all); 1 is greedy search.
    top_p : float
        Sampling only: keep the smallest set of most probable tokens whose probability reaches ``top_p``
        (nucleus sampling, Holtzman et al. 2020); 1 keeps all.
    epsilon : float
        Sampling only: drop tokens whose probability is below ``epsilon`` (epsilon sampling, Hewitt et al.
        2022); 0 keeps all.
    seed : int
        Sampling only: with the same seed a sentence gets the same samples, whatever it is batched with.
    no_repeat_ngram : int
        Forbid a token that would repeat an n-gram of this size already in the hypothesis (0: off).
    mbr : int
        Minimum Bayes risk decoding (0: off): draw this many candidates and return the one with the highest
        average utility against the others.
    mbr_candidates : str
        "sampling" (``mbr`` samples with the sampling settings above) or "beam" (beam search's ``mbr``-best).
    mbr_utility : str
        "chrf" or "bleu" (sacreBLEU's sentence-level chrF2 or BLEU).

    Raises
    ------
    ValueError
        At construction for a non-positive beam, nbest > beam (nbest > mbr with MBR; any nbest when sampling),
        negative lengths, an unknown penalty form, sampling parameters out of range, or an unknown MBR
        candidate source or utility.

    Notes
    -----
    Sampling truncates in the order temperature, top-k, top-p, epsilon (see
    :func:`transformer.decoding.sampling.sampling_distribution`).
    """

    beam_size: int = 4
    length_penalty: float = 0.6
    length_penalty_form: str = "gnmt"
    max_length_offset: int = 50
    max_length: int | None = None
    min_length: int = 0
    nbest: int = 1
    use_cache: bool = True
    sampling: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    epsilon: float = 0.0
    seed: int = 0
    no_repeat_ngram: int = 0
    mbr: int = 0
    mbr_candidates: str = "sampling"
    mbr_utility: str = "chrf"

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.beam_size < 1:
            raise ValueError(f"DecodeConfig.beam_size={self.beam_size} must be at least 1")
        self._check_nbest()
        self._check_sampling()
        if self.no_repeat_ngram < 0:
            raise ValueError(f"DecodeConfig.no_repeat_ngram={self.no_repeat_ngram} must be non-negative")
        if self.mbr_candidates not in MBR_CANDIDATE_SOURCES:
            raise ValueError(
                f"DecodeConfig.mbr_candidates={self.mbr_candidates!r} is not one of {MBR_CANDIDATE_SOURCES}"
            )
        if self.mbr_utility not in MBR_UTILITIES:
            raise ValueError(f"DecodeConfig.mbr_utility={self.mbr_utility!r} is not one of {MBR_UTILITIES}")
        if self.length_penalty_form not in LENGTH_PENALTY_FORMS:
            raise ValueError(
                f"DecodeConfig.length_penalty_form={self.length_penalty_form!r} is not one of {LENGTH_PENALTY_FORMS}"
            )
        if self.min_length < 0:
            raise ValueError(f"DecodeConfig.min_length={self.min_length} must be non-negative")
        if not 0 <= self.max_length_offset <= MAX_LENGTH_OFFSET:
            raise ValueError(
                f"DecodeConfig.max_length_offset={self.max_length_offset} must be from 0 to {MAX_LENGTH_OFFSET} "
                "(the search sizes its tables by the limit before its first step)"
            )
        if self.max_length is not None and self.max_length < max(1, self.min_length):
            raise ValueError(
                f"DecodeConfig.max_length={self.max_length} must be at least max(1, min_length={self.min_length})"
            )

    def _check_nbest(self) -> None:
        """Refuse an ``nbest`` the chosen search cannot return (see the class Notes)."""
        if self.mbr == 1 or self.mbr < 0:
            raise ValueError(f"DecodeConfig.mbr={self.mbr} must be 0 (off) or at least 2 candidates")
        if self.mbr:
            if not 1 <= self.nbest <= self.mbr:
                raise ValueError(f"DecodeConfig.nbest={self.nbest} must be between 1 and mbr={self.mbr}")
        elif self.sampling:
            if self.nbest < 1:
                raise ValueError(f"DecodeConfig.nbest={self.nbest} must be at least 1")
        elif not 1 <= self.nbest <= self.beam_size:
            raise ValueError(
                f"DecodeConfig.nbest={self.nbest} must be between 1 and beam_size={self.beam_size}"
            )

    def _check_sampling(self) -> None:
        """Refuse sampling parameters out of range (NaN is refused by the field types already)."""
        if not self.temperature > 0:
            raise ValueError(f"DecodeConfig.temperature={self.temperature} must be positive")
        if self.top_k < 0:
            raise ValueError(f"DecodeConfig.top_k={self.top_k} must be non-negative (0 keeps every token)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"DecodeConfig.top_p={self.top_p} must be in (0, 1]")
        if not 0 <= self.epsilon < 1:
            raise ValueError(f"DecodeConfig.epsilon={self.epsilon} must be in [0, 1)")


PRECISIONS = ("auto", "fp32", "bf16", "fp16")


#: The largest ``decode.max_length_offset``: the translator cuts inputs at 1,024 tokens, and a larger offset made a
#: search allocate and run for minutes with no output (a configuration typo, as on the command line).
MAX_LENGTH_OFFSET = 1024


@dataclass(frozen=True)
class DataConfig:
    """Where the parallel text comes from and how it is tokenised.

    Parameters
    ----------
    corpus : str
        "synthetic" (the built-in grammar, generated from ``synthetic_seed``), a known corpus name:
        "multi30k", "wmt14-en-de" or "wmt14-en-fr" (downloaded to ``cache_dir``, checksums verified; see
        docs/wmt14.md), or "directory" (files in ``data_dir``).
    data_dir : str or None
        Folder of ``{train,valid,test}.{lang}[.gz]`` files when ``corpus == "directory"``.
    source_lang : str
        Source language suffix ("en"). For a known corpus, its own direction or the reverse.
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
    token_store : bool
        Encode the training split once into a memory-mapped token store under ``run_dir/token_store/train``
        (reused by later runs with the same files and vocabulary) and train from it, instead of holding the
        corpus as Python lists; for corpora of millions of pairs. Validation stays in memory.
    token_store_verify : bool
        When reusing a token store, also check the SHA-256 of every array file (reads all of it); sizes are
        always checked.
    backtranslated_dir : str or None
        A folder written by ``transformer backtranslate`` (``train.{source_lang}``, ``train.{target_lang}``):
        its synthetic pairs are trained on beside the corpus's training split; None: none.
    backtranslation_tag : str or None
        Put before every synthetic source (tagged back-translation, Caswell et al. 2019), e.g. "<BT>"; it is
        made one piece of the joint vocabulary. None: the synthetic sources are not marked.
    real_upsample : int
        With ``backtranslated_dir``, each real training pair is repeated this many times (the ratio of real
        to synthetic data; Edunov et al. 2018 up-sample the bitext).

    Notes
    -----
    The joint BPE vocabulary size is ``model.vocab_size``: one number, so the two cannot disagree. The
    vocabulary is learned on the real and synthetic training pairs together.
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
    token_store: bool = False
    token_store_verify: bool = False
    backtranslated_dir: str | None = None
    backtranslation_tag: str | None = None
    real_upsample: int = 1

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.corpus == "directory" and not self.data_dir:
            raise ValueError("DataConfig.corpus='directory' needs data_dir")
        if self.max_len <= 1:
            raise ValueError(f"DataConfig.max_len={self.max_len} must be at least 2")
        self._check_backtranslation()

    def _check_backtranslation(self) -> None:
        """Refuse back-translation settings that would be ignored or break the vocabulary."""
        if self.real_upsample < 1:
            raise ValueError(f"DataConfig.real_upsample={self.real_upsample} must be at least 1")
        if self.backtranslated_dir is None and (
            self.backtranslation_tag is not None or self.real_upsample != 1
        ):
            raise ValueError("DataConfig.backtranslation_tag and real_upsample need backtranslated_dir")
        if self.backtranslated_dir is not None and self.token_store:
            raise ValueError(
                "DataConfig.backtranslated_dir is read in memory; it cannot be used with token_store"
            )
        tag = self.backtranslation_tag
        if tag is not None and (not tag or any(character.isspace() for character in tag)):
            raise ValueError(f"DataConfig.backtranslation_tag={tag!r} must be one word without spaces")
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
        ``--resume`` trains for another ``max_minutes``). Where the limit binds, the whole schedule follows
        the clock: warm-up takes the share of the time that ``warmup_steps`` is of ``max_steps``, the
        cool-down anneals to zero at the limit, and validations and checkpoints keep their spacing in the
        schedule, so a slow machine still runs the whole recipe in fewer steps (see
        ``transformer.training.schedule.TimeBudget``); without a cool-down, a run stopped by the limit ends
        with a warning naming the share of the schedule done.
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
    deterministic : bool
        Train with ``torch.use_deterministic_algorithms(True)`` (an operation without a deterministic
        implementation raises instead of accumulating in a varying order; on CUDA, ``CUBLAS_WORKSPACE_CONFIG``
        is set) and refuse ``max_minutes``, whose schedule follows the clock. On the CPU, runs with the same
        seed, thread count, precision and attention threshold were bit-identical without it
        (:mod:`transformer.training.reproducibility`).

    Raises
    ------
    ValueError
        At construction, naming the field, for a bad value.
    TypeError
        At construction, naming the field, for a wrongly typed value.

    Notes
    -----
    The defaults are the paper's except the batch: ``max_tokens=4096`` is sized for one device, against the
    paper's ~25,000 tokens per side over 8 GPUs, so ``accumulate`` is how a small machine approaches the
    paper's effective batch.
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
    deterministic: bool = False

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
        if self.deterministic and self.max_minutes is not None:
            raise ValueError(
                f"TrainConfig.deterministic=True with max_minutes={self.max_minutes}: a time budget makes the "
                "learning rate follow the clock; set train.max_minutes to null for a reproducible run"
            )


#: Config sections a rung of the recipe ladder may change: not ``data`` (the rungs share one vocabulary).
LADDER_SECTIONS = ("model", "train", "decode")


@dataclass(frozen=True)
class LadderRung:
    """One recipe of a ladder: overrides of the configuration, and the training tokens it needs to pay off.

    Parameters
    ----------
    name : str
        What ``ladder.choose`` and the log call it, e.g. "4x256-4k".
    min_target_tokens : int
        The rung is taken when the machine's measured training speed times ``train.max_minutes`` gives at
        least this many target tokens (0: always, the last rung's value).
    overrides : tuple of str
        ``section.key=value`` items, as ``--set`` takes them, applied on top of the file's values; sections
        ``model``, ``train`` and ``decode`` only, and never ``model.vocab_size``.

    Notes
    -----
    The thresholds come from sweeps (BENCHMARKS.md, "The Multi30k recipe ladder"): below some number of
    training tokens a shallower model with smaller batches and less dropout reaches a higher BLEU than the
    full recipe does in the same time.
    """

    name: str
    min_target_tokens: int = 0
    overrides: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "overrides", tuple(self.overrides))  # JSON and YAML give lists
        check_field_types(self)
        if not self.name or self.name in LADDER_CHOICES:
            raise ValueError(f"rung name {self.name!r} must be non-empty and not one of {LADDER_CHOICES}")
        if self.min_target_tokens < 0:
            raise ValueError(f"rung {self.name!r}: min_target_tokens={self.min_target_tokens} must be >= 0")
        for item in self.overrides:
            key = str(item).partition("=")[0].strip()
            if key.partition(".")[0] not in LADDER_SECTIONS or key == "model.vocab_size":
                raise ValueError(
                    f"rung {self.name!r}: override {item!r} may only change {', '.join(LADDER_SECTIONS)} "
                    "(not model.vocab_size): every rung trains on the same data and vocabulary"
                )


#: ``ladder.choose`` values other than a rung's name.
LADDER_CHOICES = ("auto", "none")


@dataclass(frozen=True)
class LadderConfig:
    """A small ladder of recipes, one of which is trained: the largest that the time budget pays for.

    Parameters
    ----------
    choose : str
        "auto" (default): with ``train.max_minutes``, the first rung whose ``min_target_tokens`` the measured
        training speed reaches within the budget (the first rung without a budget); "none": the file's values
        as they are; or a rung's name.
    rungs : tuple of LadderRung
        From the largest recipe to the smallest; empty: no ladder.

    Notes
    -----
    Resolved once per run by :func:`transformer.training.recipe_ladder.resolve_ladder`, which logs one line
    with the measured speeds and records the rung taken in ``choose``, so ``--resume`` and checkpoints keep
    it whatever the machine measures later.
    """

    choose: str = "auto"
    rungs: tuple[LadderRung, ...] = ()

    def __post_init__(self) -> None:
        rungs = tuple(
            rung if isinstance(rung, LadderRung) else build_dataclass(LadderRung, dict(rung))
            for rung in self.rungs
        )
        object.__setattr__(self, "rungs", rungs)
        names = [rung.name for rung in rungs]
        if len(set(names)) != len(names):
            raise ValueError(f"rungs: names must be unique, got {names}")
        if self.choose not in (*LADDER_CHOICES, *names):
            raise ValueError(f"choose={self.choose!r} is not one of {[*LADDER_CHOICES, *names]}")


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything one training run needs: model, data, recipe and decoding settings.

    Parameters
    ----------
    model : TransformerConfig or RNNConfig
        The model (the YAML key ``model.architecture`` picks the class: "transformer", the default, or
        "rnn"); ``vocab_size`` is also the size of the joint BPE vocabulary trained on the data.
    data : DataConfig
        The corpus.
    train : TrainConfig
        The recipe.
    decode : DecodeConfig
        Search settings for evaluation after training.
    ladder : LadderConfig
        Recipes to choose from by measured training speed (none by default).

    Notes
    -----
    Built from YAML by :func:`load_config`, which expands a model ``preset`` and turns every error into a
    one-line ValueError naming the file and key. Each section validates itself at construction, so an
    ``ExperimentConfig`` built in code is checked too.
    """

    model: TransformerConfig | RNNConfig
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()
    ladder: LadderConfig = LadderConfig()

    def to_dict(self) -> dict[str, Any]:
        """Return the nested fields as plain dictionaries.

        Returns
        -------
        dict of str to Any
            ``{"model": {...}, "data": {...}, "train": {...}, "decode": {...}}``.

        Notes
        -----
        Round-trips through :func:`experiment_from_dict`: the model section is written out in full, with no
        ``preset`` key. Every value is a JSON scalar, so the trainer stores this dict in each checkpoint's
        ``trainer_state.json``, from which :func:`transformer.checkpoint.load_checkpoint` reads ``decode``.
        """
        return dataclasses.asdict(self)


#: Section name -> its dataclass (for ``model`` the default: ``model.architecture`` may pick ``RNNConfig``).
SECTIONS: dict[str, type] = {
    "model": TransformerConfig,
    "data": DataConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
    "ladder": LadderConfig,
}


def experiment_from_dict(values: dict[str, Any], source: str = "config") -> ExperimentConfig:
    """Build an :class:`ExperimentConfig` from nested dictionaries.

    Parameters
    ----------
    values : dict of str to Any
        Sections ``model`` (required), ``data``, ``train`` and ``decode``. The model section may name an
        ``architecture`` ("transformer", the default, or "rnn") and, for a Transformer, a ``preset`` ("base",
        "big" or a Table 2 variant such as "C4") whose values the other keys override.
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


def _model_from_dict(values: dict[str, Any]) -> ModelConfig:
    architecture = values.get("architecture", ARCHITECTURES[0])
    preset = values.pop("preset", None)
    if architecture != "transformer" and preset is not None:
        raise ValueError(
            f"model.preset={preset!r} names a Transformer; model.architecture={architecture!r} has no presets"
        )
    if preset is None:
        return model_config_from_dict(values)
    values.pop("architecture", None)
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


def describe_yaml_error(path: Path, error: yaml.YAMLError) -> str:
    """Say where and why a YAML file does not parse, in one line.

    Parameters
    ----------
    path : Path
        The file.
    error : yaml.YAMLError
        PyYAML's error.

    Returns
    -------
    str
        ``FILE:LINE:COLUMN: not valid YAML: PROBLEM (CONTEXT at line L, column C)``, counted from 1 as editors
        do; ``FILE: not valid YAML: ...`` when PyYAML gives no position.

    Notes
    -----
    PyYAML's own text spans several lines and starts with the context ("while parsing a flow sequence"), so
    its first line alone said neither what is wrong nor where. The problem's mark is where the parser
    gave up; the context's mark is where the construct it was reading began (often the real mistake: an
    unclosed bracket).
    """
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return f"{path}: not valid YAML: {' '.join(str(error).split())}"
    mark = error.problem_mark
    message = f"{path}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {error.problem}"
    if error.context:
        context = error.context
        if error.context_mark is not None:
            context += f" at line {error.context_mark.line + 1}, column {error.context_mark.column + 1}"
        message += f" ({context})"
    return message


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
        raise ValueError(describe_yaml_error(path, error)) from None
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

    Raises
    ------
    ValueError
        Quoting the item when it is malformed.

    Notes
    -----
    The key is not checked here: an unknown section or key is reported later by :func:`experiment_from_dict`,
    like one in the file.
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
