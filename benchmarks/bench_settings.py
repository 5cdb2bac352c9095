"""The sizes and repeat counts of each mode: full (for the record), quick (2-3 minutes on 2 cores), smoke (tests).

Every knob the suite has is here, so a report's ``settings`` block says exactly what was run.
"""

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from transformer.device import bf16_unsupported_reason
from transformer.model.config import TransformerConfig

#: Model shapes by name. small: the issue's small config; base: the paper's base with a 32k vocabulary;
#: tiny: a few thousand parameters, for the smoke test only.
MODEL_SHAPES: dict[str, dict[str, Any]] = {
    "small": {
        "vocab_size": 8000,
        "d_model": 256,
        "d_ff": 1024,
        "num_heads": 4,
        "num_encoder_layers": 3,
        "num_decoder_layers": 3,
    },
    "base": {
        "vocab_size": 32000,
        "d_model": 512,
        "d_ff": 2048,
        "num_heads": 8,
        "num_encoder_layers": 6,
        "num_decoder_layers": 6,
    },
    "tiny": {
        "vocab_size": 64,
        "d_model": 32,
        "d_ff": 64,
        "num_heads": 2,
        "num_encoder_layers": 1,
        "num_decoder_layers": 1,
    },
}


def model_config(name: str) -> TransformerConfig:
    """Our ``TransformerConfig`` for a named shape, with the paper's dropout 0.1 and everything else default."""
    return TransformerConfig(**MODEL_SHAPES[name], dropout=0.1)


@dataclass(frozen=True)
class Settings:
    """Everything that differs between modes.

    Parameters
    ----------
    mode : str
        "full", "quick" or "smoke".
    matmul_sizes : tuple of int
        Square matrix sizes for the peak.
    matmul_repeats : int
        Timed repeats per size.
    training_cells : tuple of (str, str)
        (shape from ``MODEL_SHAPES``, "fp32" or "bf16") pairs to train.
    training_max_tokens : int
        Target tokens per step (the token budget of a batch).
    training_sentence_length : int
        Positions per sentence on each side; ``training_max_tokens`` must be a multiple.
    training_warmup, training_repeats : int
        Untimed and timed steps per system.
    training_paper_dropout_reference : bool
        Also time the reference with dropout on residuals and embeddings only (our model's placement).
    translation_model : str
        Shape of the translation model (random weights).
    translation_sentences : int
        Sentences translated per timed pass with the key/value cache (the issue: 256).
    translation_uncached_sentences : int
        Sentences per pass without the cache (quadratic in output length, so fewer).
    translation_source_length, translation_output_length, translation_batch_size : int
        24 source tokens (EOS included), exactly 32 output tokens, 32 sentences per batch.
    translation_beams : tuple of int
        Beam sizes (1 is greedy).
    translation_uncached : tuple of (str, int)
        (precision, beam size) of our rows without the key/value cache.
    translation_warmup_length : int
        Output tokens of the untimed warm-up pass over the first batch.
    translation_repeats : int
        Timed passes per system.
    attention_lengths : tuple of int
        Sequence lengths for the attention benchmark.
    attention_batch, attention_heads, attention_head_dim : int
        Shape of Q, K and V: (batch, heads, length, head_dim); base model heads by default.
    attention_repeats : int
        Timed forward+backward passes per (implementation, length).
    memory_cells : tuple of (str, str, int, int)
        (shape, precision, tokens per micro-batch, micro-batches accumulated) of the training-memory
        measurement; empty skips it.
    memory_sentence_length : int
        Positions per sentence on each side in the memory measurement (tokens per micro-batch divide by it).
    quality_sentences : int or None
        Validation sentences for time-to-quality (None: all).
    quality_beam_size : int or None
        Beam size for time-to-quality (None: the run's own decode settings).

    Notes
    -----
    ``for_mode`` builds the three presets.
    """

    mode: str
    matmul_sizes: tuple[int, ...] = (1024, 2048, 4096)
    matmul_repeats: int = 10
    training_cells: tuple[tuple[str, str], ...] = (
        ("small", "fp32"),
        ("small", "bf16"),
        ("base", "fp32"),
        ("base", "bf16"),
    )
    training_max_tokens: int = 4096
    training_sentence_length: int = 32
    training_warmup: int = 2
    training_repeats: int = 8
    training_paper_dropout_reference: bool = True
    translation_model: str = "base"
    translation_sentences: int = 256
    translation_uncached_sentences: int = 64
    translation_source_length: int = 24
    translation_output_length: int = 32
    translation_batch_size: int = 32
    translation_beams: tuple[int, ...] = (1, 4)
    translation_uncached: tuple[tuple[str, int], ...] = (("fp32", 1), ("fp32", 4), ("bf16", 1), ("bf16", 4))
    translation_warmup_length: int = 32
    translation_repeats: int = 3
    attention_lengths: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096)
    attention_batch: int = 2
    attention_heads: int = 8
    attention_head_dim: int = 64
    attention_repeats: int = 5
    # The paper's ~25,000 target tokens per step as 4 x 6,250 accumulated (configs/base.yaml), bf16 and fp32,
    # and one 6,250-token micro-batch alone: accumulation should not raise the peak.
    memory_cells: tuple[tuple[str, str, int, int], ...] = (
        ("base", "bf16", 6250, 4),
        ("base", "bf16", 6250, 1),
        ("base", "fp32", 6250, 4),
    )
    memory_sentence_length: int = 25
    quality_sentences: int | None = None
    quality_beam_size: int | None = None
    # bf16 rows are timed only where the CPU runs bf16 natively (see for_machine).
    bf16_skipped: str | None = None

    def __post_init__(self) -> None:
        if self.training_max_tokens % self.training_sentence_length:
            raise ValueError(
                f"training_max_tokens={self.training_max_tokens} is not a multiple of "
                f"training_sentence_length={self.training_sentence_length}"
            )

    def for_machine(self, reason: str | None = None) -> "Settings":
        """Drop the bf16 rows where this CPU has no native bf16.

        Parameters
        ----------
        reason : str or None
            Why bf16 cannot run here; None probes the CPU (:func:`bf16_unsupported_reason`).

        Returns
        -------
        Settings
            Unchanged where bf16 is native; else without bf16 in any section, ``bf16_skipped`` saying why: the
            timed bf16 rows are dropped, and the memory cells measure in fp32 instead (each shape once).

        Notes
        -----
        On a CPU with AVX2 and FMA only, oneDNN emulates bf16 at about 1.5 GFLOP/s against 60-120 in fp32:
        the quick suite spent 474 s timing bf16 matrix products there and then timed out in training. The
        probe asks oneDNN, which takes well under a second. The memory section measures bytes, not speed,
        and its point is the comparison of accumulated against single micro-batches; dropping its bf16 cells
        would drop that comparison, so they move to fp32, the precision such a CPU trains in.
        """
        reason = reason or bf16_unsupported_reason(torch.device("cpu"))
        if reason is None:
            return self
        fp32_memory_cells = tuple((shape, "fp32", *sizes) for shape, _, *sizes in self.memory_cells)
        return dataclasses.replace(
            self,
            training_cells=tuple(cell for cell in self.training_cells if cell[1] != "bf16"),
            translation_uncached=tuple(cell for cell in self.translation_uncached if cell[0] != "bf16"),
            memory_cells=tuple(dict.fromkeys(fp32_memory_cells)),
            bf16_skipped=reason,
        )

    @property
    def precisions(self) -> tuple[str, ...]:
        """The float precisions timed: fp32, and bf16 where the CPU runs it natively."""
        return ("fp32",) if self.bf16_skipped else ("fp32", "bf16")

    @classmethod
    def for_mode(cls, mode: str) -> "Settings":
        """The preset of a mode: "full", "quick" or "smoke"."""
        if mode == "full":
            return cls(mode=mode)
        if mode == "quick":
            return cls(
                mode=mode,
                matmul_sizes=(1024, 2048),
                matmul_repeats=5,
                # Two minutes on 2 cores: base fp32 training (about 7 s a step) and decoding without the
                # cache (quadratic) are left to full mode; one batch of 32 sentences per translation row.
                training_cells=(("small", "fp32"), ("small", "bf16"), ("base", "bf16")),
                training_warmup=1,
                training_repeats=2,
                training_paper_dropout_reference=False,
                translation_sentences=32,
                translation_uncached_sentences=32,
                translation_uncached=(),
                translation_warmup_length=4,
                translation_repeats=2,
                attention_lengths=(128, 256, 512, 1024),
                attention_repeats=3,
                memory_cells=(),  # about 2.5 minutes of base steps: full mode only
                quality_sentences=200,
                quality_beam_size=1,
            )
        if mode == "smoke":
            return cls(
                mode=mode,
                matmul_sizes=(64,),
                matmul_repeats=2,
                training_cells=(("tiny", "fp32"), ("tiny", "bf16")),
                training_max_tokens=64,
                training_sentence_length=8,
                training_warmup=1,
                training_repeats=2,
                training_paper_dropout_reference=False,
                translation_model="tiny",
                translation_sentences=8,
                translation_uncached_sentences=4,
                translation_source_length=6,
                translation_output_length=5,
                translation_uncached=(("fp32", 1),),
                translation_warmup_length=5,
                translation_batch_size=4,
                translation_repeats=2,
                attention_lengths=(128, 256),
                attention_batch=1,
                attention_heads=2,
                attention_head_dim=16,
                attention_repeats=2,
                memory_cells=(("tiny", "fp32", 64, 2), ("tiny", "bf16", 64, 1)),
                memory_sentence_length=8,
                quality_sentences=8,
                quality_beam_size=1,
            )
        raise ValueError(f"unknown mode {mode!r}: expected 'full', 'quick' or 'smoke'")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
