"""The ``train`` section: the training recipe of section 5, and the machine settings it runs with."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from transformer.typed_fields import (
    NON_NEGATIVE,
    POSITIVE,
    PROBABILITY_BELOW_ONE,
    SEED,
    FieldRange,
    check_choice,
    check_field_types,
    check_ranges,
)

PRECISIONS = ("auto", "fp32", "bf16", "fp16")


@dataclass(frozen=True)
class TrainConfig:
    """The training recipe; defaults are the paper's (section 5).

    Parameters
    ----------
    max_tokens : int
        Token budget of one batch, per side (the paper: about 25,000 source and 25,000 target tokens per
        step, over 8 GPUs). Positive.
    accumulate : int
        Batches whose gradients are summed per optimizer step, to reach a large effective batch. Positive.
    max_steps : int
        Optimizer steps to run (100,000 base, 300,000 big). Positive.
    max_epochs : int or None
        Stop after this many passes over the data, if earlier. Positive or None.
    max_minutes : float or None
        Stop after this much wall-clock training time per invocation, if earlier than ``max_steps`` (a
        ``--resume`` trains for another ``max_minutes``). Where the limit binds, the whole schedule follows
        the clock: warm-up takes the share of the time that ``warmup_steps`` is of ``max_steps``, the
        cool-down anneals to zero at the limit, and validations and checkpoints keep their spacing in the
        schedule, so a slow machine still runs the whole recipe in fewer steps (see
        ``transformer.training.schedule.TimeBudget``); without a cool-down, a run stopped by the limit ends
        with a warning naming the share of the schedule done. Positive or None.
    warmup_steps : int
        Linear warm-up steps of Eq. (3) (4,000). Positive: Eq. (3) divides by its power 1.5.
    learning_rate_scale : float
        Multiplier on Eq. (3). Positive: a rate that is zero never moves, and a negative one climbs the loss.
    peak_learning_rate : float or None
        If set, overrides ``learning_rate_scale`` so the schedule peaks at this rate. Positive or None
        (``-1`` trained to a perplexity of 2.7e43 with exit status 0 before it was checked). No upper bound:
        a rate too large diverges, which the trainer stops at the first non-finite loss, naming the step.
    cooldown_steps : int
        Linear decay to zero over the last steps of ``max_steps`` (0: the paper's pure inverse square root).
        Non-negative.
    adam_beta1, adam_beta2, adam_epsilon : float
        Adam's beta_1 = 0.9, beta_2 = 0.98, epsilon = 1e-9. The betas in [0, 1) (Adam's moving averages need
        a decay below 1), epsilon in (0, 1].
    label_smoothing : float
        eps_ls = 0.1. In [0, 1): at 1 the target carries no information.
    clip_norm : float or None
        Clip the gradient norm to this (not in the paper); None disables clipping. Positive or None.
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
        Positive or None.
    seed : int
        Seed of parameter initialisation, data order and dropout. From 0 to 2^63 - 1.
    log_every : int
        Steps between training-metric records. Positive.
    validate_every : int
        Steps between validation passes (0: only at the end). Non-negative.
    checkpoint_every : int
        Steps between checkpoints (0: only at the end). Non-negative.
    keep_checkpoints : int
        Recent checkpoints kept on disk, besides the best one by validation loss. Positive.
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
    paper's effective batch. Every numeric field has the range stated above (``FIELD_RANGES``), checked at
    construction, so a value from YAML or ``--set`` outside it stops before any data is read.
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

    #: The range of every numeric field (:func:`transformer.typed_fields.check_ranges`), as the docstring says.
    FIELD_RANGES: ClassVar[Mapping[str, FieldRange]] = {
        "max_tokens": POSITIVE,
        "accumulate": POSITIVE,
        "max_steps": POSITIVE,
        "max_epochs": POSITIVE,
        "max_minutes": POSITIVE,
        "warmup_steps": POSITIVE,  # Eq. (3) divides by warmup_steps^1.5
        "learning_rate_scale": POSITIVE,
        "peak_learning_rate": POSITIVE,
        "cooldown_steps": NON_NEGATIVE,
        "adam_beta1": PROBABILITY_BELOW_ONE,
        "adam_beta2": PROBABILITY_BELOW_ONE,
        "adam_epsilon": FieldRange(0, 1, low_open=True),
        "label_smoothing": PROBABILITY_BELOW_ONE,
        "clip_norm": POSITIVE,
        "threads": POSITIVE,
        "seed": SEED,
        "log_every": POSITIVE,
        "validate_every": NON_NEGATIVE,
        "checkpoint_every": NON_NEGATIVE,
        "keep_checkpoints": POSITIVE,
    }

    def __post_init__(self) -> None:
        check_field_types(self)
        check_ranges(self)
        check_choice(self, "precision", PRECISIONS)
        if self.deterministic and self.max_minutes is not None:
            raise ValueError(
                f"TrainConfig.deterministic=True with max_minutes={self.max_minutes}: a time budget makes the "
                "learning rate follow the clock; set train.max_minutes to null for a reproducible run"
            )
