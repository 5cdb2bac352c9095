"""The ``decode`` section: how to search for translations (section 6.1), and the values it may take."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from transformer.config.search_limits import MAX_ALPHA
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

LENGTH_PENALTY_FORMS = ("gnmt", "power")
MBR_CANDIDATE_SOURCES = ("sampling", "beam")
MBR_UTILITIES = ("chrf", "bleu")

#: The largest ``decode.max_length_offset``: the translator cuts inputs at 1,024 tokens, and a larger offset made a
#: search allocate and run for minutes with no output (a configuration typo, as on the command line).
MAX_LENGTH_OFFSET = 1024


@dataclass(frozen=True)
class DecodeConfig:
    """How to search for translations; defaults are the paper's (section 6.1).

    Parameters
    ----------
    beam_size : int
        Hypotheses kept per sentence (4); 1 is greedy search. At least 1.
    length_penalty : float
        alpha of the length penalty (0.6); 0 disables it. From 0 to :data:`~transformer.config.search_limits.MAX_ALPHA` (a negative
        alpha rewards length, and the search never ends a hypothesis early).
    length_penalty_form : str
        "gnmt": scores are divided by ((5 + |Y|) / 6)^alpha (Wu et al., 2016; the paper's choice).
        "power": divided by |Y|^alpha (HuggingFace ``generate()``'s form, for parity tests).
    max_length_offset : int
        Longest output = source length + this (50, section 6.1); at most :data:`MAX_LENGTH_OFFSET`.
    max_length : int or None
        Absolute cap on output tokens (EOS excluded); None means no cap beyond the offset rule. At least
        ``max(1, min_length)``, or None.
    min_length : int
        EOS is forbidden before this many tokens; with ``max_length`` equal to it, forces the output length.
        Non-negative.
    nbest : int
        Hypotheses returned per sentence: from 1 to ``beam_size`` (to ``mbr`` with MBR; any positive number
        of samples when sampling).
    use_cache : bool
        Reuse self-attention keys/values and the projected encoder output between steps (incremental
        decoding); False recomputes the whole prefix every step (same tokens, slower).
    sampling : bool
        Draw each token at random from the model's distribution (ancestral sampling) instead of searching;
        ``nbest`` samples per sentence, ``beam_size`` ignored. Used for back-translation and MBR candidates.
    temperature : float
        Sampling only: divides the log-probabilities before truncation; below 1 sharpens, above 1 flattens.
        Positive.
    top_k : int
        Sampling only: keep the ``top_k`` most probable tokens (0 keeps all); 1 is greedy search.
        Non-negative.
    top_p : float
        Sampling only: keep the smallest set of most probable tokens whose probability reaches ``top_p``
        (nucleus sampling, Holtzman et al. 2020); 1 keeps all. In (0, 1].
    epsilon : float
        Sampling only: drop tokens whose probability is below ``epsilon`` (epsilon sampling, Hewitt et al.
        2022); 0 keeps all. In [0, 1).
    seed : int
        Sampling only: with the same seed a sentence gets the same samples, whatever it is batched with.
        From 0 to 2^63 - 1.
    no_repeat_ngram : int
        Forbid a token that would repeat an n-gram of this size already in the hypothesis (0: off).
        Non-negative.
    mbr : int
        Minimum Bayes risk decoding (0: off): draw this many candidates and return the one with the highest
        average utility against the others. 0, or at least 2.
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
    :func:`transformer.decoding.sampling.sampling_distribution`). Every numeric field's range
    (``FIELD_RANGES``) is checked at construction, before the checks relating fields to each other. The
    ranges are wider than the command line's (``--beam`` at most 64): a checkpoint's stored settings and the
    tests use values a user would not type, and each bound here only refuses what cannot work.
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

    #: The range of every numeric field (:func:`transformer.typed_fields.check_ranges`), as the docstring says.
    FIELD_RANGES: ClassVar[Mapping[str, FieldRange]] = {
        "beam_size": FieldRange(1),
        "length_penalty": FieldRange(0, MAX_ALPHA),
        "max_length_offset": FieldRange(
            0, MAX_LENGTH_OFFSET, reason="the search sizes its tables by the limit before its first step"
        ),
        "max_length": FieldRange(1),
        "min_length": NON_NEGATIVE,
        "nbest": FieldRange(1),
        "temperature": POSITIVE,
        "top_k": FieldRange(0, reason="0 keeps every token"),
        "top_p": FieldRange(0, 1, low_open=True),
        "epsilon": PROBABILITY_BELOW_ONE,
        "seed": SEED,
        "no_repeat_ngram": NON_NEGATIVE,
        "mbr": NON_NEGATIVE,
    }

    def __post_init__(self) -> None:
        check_field_types(self)
        check_ranges(self)
        self._check_nbest()
        check_choice(self, "mbr_candidates", MBR_CANDIDATE_SOURCES)
        check_choice(self, "mbr_utility", MBR_UTILITIES)
        check_choice(self, "length_penalty_form", LENGTH_PENALTY_FORMS)
        if self.max_length is not None and self.max_length < max(1, self.min_length):
            raise ValueError(
                f"DecodeConfig.max_length={self.max_length} must be at least max(1, min_length={self.min_length})"
            )

    def _check_nbest(self) -> None:
        """Refuse an ``nbest`` the chosen search cannot return (see the class Notes)."""
        if self.mbr == 1:
            raise ValueError(f"DecodeConfig.mbr={self.mbr} must be 0 (off) or at least 2 candidates")
        if self.mbr:
            if self.nbest > self.mbr:
                raise ValueError(f"DecodeConfig.nbest={self.nbest} must be between 1 and mbr={self.mbr}")
        elif not self.sampling and self.nbest > self.beam_size:
            raise ValueError(
                f"DecodeConfig.nbest={self.nbest} must be between 1 and beam_size={self.beam_size}"
            )
