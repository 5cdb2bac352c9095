"""The body of ``POST /v1/translate``: texts, model and search options, strictly typed and bounded."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from transformer.config.decode import MAX_LENGTH_OFFSET
from transformer.config.search_limits import (
    MAX_ALPHA,
    MAX_EPSILON,
    MAX_NGRAM,
    MAX_SEED,
    MAX_TEMPERATURE,
    MAX_TOP_K,
    MIN_TEMPERATURE,
    MIN_TOP_P,
)
from transformer.serving.config import MAX_BEAM_SIZE, MAX_MBR_CANDIDATES
from transformer.serving.translation_service import SearchOptions

#: Fields that hold text to translate (and a glossary's lines): line breaks are allowed in them, in no other field.
TEXT_FIELDS = frozenset({"text", "prefix", "glossary"})


class TranslateRequest(BaseModel):
    """Body of ``POST /v1/translate``.

    Attributes
    ----------
    text : str or list of str
        A text (split into sentences, line breaks kept) or a list of sentences already split (one batch row
        each, as ``transformer translate`` takes a file's lines).
    model : str or None
        Served model name; None for the first ``--checkpoint``.
    beam : int or None
        Beam size (1 = greedy); None for the model's.
    nbest : int or None
        Hypotheses per sentence: at most ``beam``, or ``mbr`` with MBR; with sampling, any number of samples
        up to the server's beam limit.
    alpha : float or None
        Length penalty; None for the model's.
    sampling, temperature, top_k, top_p, epsilon, seed : bool, float, int, float, float, int, or None
        Sampling instead of search, as ``transformer translate --sampling --temperature ...``: the same seed
        gives the same samples whatever the batch.
    mbr : int or None
        Minimum Bayes risk decoding over this many candidates (2 to the server's beam limit; 0 off).
    mbr_candidates, mbr_utility : str or None
        ``"sampling"`` or ``"beam"`` candidates; ``"chrf"`` or ``"bleu"`` utility.
    no_repeat_ngram, min_length, max_length : int or None
        Constraints, as ``--no-repeat-ngram``, ``--min-length`` and ``--max-length`` (0: no cap).
    prefix : str, list of str or None
        A target prefix per text (the same shape as ``text``; blank for none): each translation starts
        with it. Texts are not split into sentences when prefixes are given.
    alignments : bool
        Add each translation's word alignment (Pharaoh ``i-j`` pairs) from a decoder layer's
        cross-attention.
    alignment_layer : int or None
        That layer (negative counts from the end); None: the last.
    format : {"text", "html"}
        ``"html"``: each text is an HTML fragment; the text between block-level tags is translated sentence by
        sentence and its inline tags are put back around the aligned words
        (:mod:`transformer.serving.inline_markup`). Not with ``prefix``.
    source : str or None
        The texts' language: a code the model must translate from, or ``"auto"`` to detect each text's; None
        checks nothing (unless ``target`` is given, which then detects).
    target : str or None
        The language wanted: without ``model``, the model is the one translating ``source`` (or the detected
        language) into it.
    flags : bool
        Add each translation's quality flags (omission, hallucination, repetition, each with its word span;
        :mod:`transformer.decoding.quality_flags`), at the default thresholds.
    glossary : dict, list of [str, str], str or None
        Target terms: ``{"dog": "Hund"}``, ``[["dog", "Hund"]]`` or ``--glossary`` file lines; where a source
        term occurs (whole words, any case) its target term appears in the translation (constrained beam
        search; needs a beam of 2 or more; :mod:`transformer.serving.request_glossary`).

    Notes
    -----
    Strict types and no unknown fields: ``"beam": "4"`` or a misspelt ``"nbset"`` is a 422 naming the field
    rather than a silently different search. Each option is bounded as its ``transformer translate`` flag is
    (:mod:`transformer.config.search_limits`: ``temperature`` from 0.01, where 1e-300 gave infinite scores),
    except that the search width (``beam``, ``nbest``, ``mbr``) stops at the server's
    :data:`~transformer.serving.config.MAX_BEAM_SIZE`: it shares one batch between all clients. Sampling, MBR, prefixes and n-gram blocking run the offline
    search of ``transformer translate`` (between the running batch's steps), so their results equal the
    command's; CTranslate2 models refuse them.
    """

    model_config = ConfigDict(strict=True, extra="forbid")

    text: str | list[str]
    model: str | None = None
    beam: int | None = Field(default=None, ge=1, le=MAX_BEAM_SIZE)
    nbest: int | None = Field(default=None, ge=1, le=MAX_BEAM_SIZE)
    alpha: float | None = Field(default=None, ge=0.0, le=MAX_ALPHA, allow_inf_nan=False)
    sampling: bool | None = None
    temperature: float | None = Field(
        default=None, ge=MIN_TEMPERATURE, le=MAX_TEMPERATURE, allow_inf_nan=False
    )
    top_k: int | None = Field(default=None, ge=0, le=MAX_TOP_K)
    top_p: float | None = Field(default=None, ge=MIN_TOP_P, le=1.0, allow_inf_nan=False)
    epsilon: float | None = Field(default=None, ge=0.0, le=MAX_EPSILON, allow_inf_nan=False)
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)
    mbr: int | None = Field(default=None, ge=0, le=MAX_MBR_CANDIDATES)
    mbr_candidates: Literal["sampling", "beam"] | None = None
    mbr_utility: Literal["chrf", "bleu"] | None = None
    no_repeat_ngram: int | None = Field(default=None, ge=0, le=MAX_NGRAM)
    min_length: int | None = Field(default=None, ge=0, le=MAX_LENGTH_OFFSET)
    max_length: int | None = Field(default=None, ge=0, le=MAX_LENGTH_OFFSET)
    prefix: str | list[str] | None = None
    alignments: bool = False
    alignment_layer: int | None = None
    flags: bool = False
    glossary: dict[str, str] | list[list[str]] | str | None = None
    format: Literal["text", "html"] = "text"
    source: str | None = Field(default=None, min_length=1, max_length=32)
    target: str | None = Field(default=None, min_length=1, max_length=32)

    def search_options(self) -> SearchOptions:
        """Collect the search settings of the request.

        Returns
        -------
        SearchOptions
            What the request sets; None where it keeps the model's.

        Notes
        -----
        Checked against each other when applied to the model's settings (``DecodeConfig``'s checks).
        """
        return SearchOptions(
            self.beam, self.nbest, self.alpha, self.sampling, self.temperature, self.top_k, self.top_p,
            self.epsilon, self.seed, self.mbr, self.mbr_candidates, self.mbr_utility, self.no_repeat_ngram,
            self.min_length, self.max_length,
        )  # fmt: skip

    def prefixes(self) -> list[str] | None:
        """Give the prefixes as one per text, or None when the request has none.

        Returns
        -------
        list of str or None
            One prefix per text.

        Raises
        ------
        ValueError
            When ``prefix`` does not have the shape of ``text`` (a string for a string, a list as long).

        Notes
        -----
        A string ``text`` takes a string ``prefix``; a list of n texts a list of n prefixes.
        """
        if self.prefix is None:
            return None
        if isinstance(self.text, str) != isinstance(self.prefix, str):
            raise ValueError("prefix: give a string for a string text and a list for a list of texts")
        if isinstance(self.prefix, str):
            return [self.prefix]
        if len(self.prefix) != len(self.text):
            raise ValueError(f"prefix: {len(self.prefix)} prefixes for {len(self.text)} texts")
        return list(self.prefix)
