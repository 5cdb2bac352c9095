"""The ``decode`` section: how to search for translations (section 6.1), and the values it may take."""

from dataclasses import dataclass

from transformer.typed_fields import check_choice, check_field_types

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
        check_choice(self, "mbr_candidates", MBR_CANDIDATE_SOURCES)
        check_choice(self, "mbr_utility", MBR_UTILITIES)
        check_choice(self, "length_penalty_form", LENGTH_PENALTY_FORMS)
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
