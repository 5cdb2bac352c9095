"""Minimum Bayes risk (MBR) decoding: choose the candidate that agrees most with the others.

Beam search returns the most probable output, which is often not the best one: the mode of a translation
model's distribution is atypical (short, generic; Eikema & Aziz 2020). MBR draws N candidates, treats them
as samples of what a reference might be, and returns the candidate with the highest average utility against
the others (Kumar & Byrne 2004; Freitag et al. 2022 and 2023 find it beats beam search on every metric but
the one it optimises). Candidates come from sampling (unbiased, so the average estimates an expectation
under the model) or from beam search's N-best list; the utility is sacreBLEU's chrF2 or sentence BLEU.
"""

import dataclasses
from collections.abc import Callable, Sequence

from torch import Tensor

from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.decoding.search import Hypothesis
from transformer.decoding.step_model import Decodable
from transformer.evaluation.bleu import SentenceUtility


def candidate_config(config: DecodeConfig) -> DecodeConfig:
    """Derive the search settings that draw the MBR candidates.

    Parameters
    ----------
    config : DecodeConfig
        Settings with ``mbr`` = N (at least 2), ``mbr_candidates`` and the sampling or beam settings.

    Returns
    -------
    DecodeConfig
        "sampling": ``sampling=True`` with ``nbest=N`` (temperature, top-k, top-p, epsilon and seed as
        given); "beam": beam search with ``beam_size=nbest=N``; ``mbr`` off in both.

    Notes
    -----
    Length limits and constraints (prefixes, ``no_repeat_ngram``) carry over, so every candidate obeys
    them.
    """
    if config.mbr_candidates == "sampling":
        return dataclasses.replace(config, mbr=0, sampling=True, nbest=config.mbr)
    return dataclasses.replace(config, mbr=0, sampling=False, beam_size=config.mbr, nbest=config.mbr)


def rank_by_expected_utility(
    candidates: Sequence[Hypothesis], texts: Sequence[str], utility: SentenceUtility
) -> list[Hypothesis]:
    """Order one sentence's candidates by expected utility, best first.

    Parameters
    ----------
    candidates : sequence of Hypothesis
        The sentence's N candidates.
    texts : sequence of str
        Their detokenised texts, in the same order.
    utility : SentenceUtility
        chrF or BLEU.

    Returns
    -------
    list of Hypothesis
        The candidates with ``expected_utility`` set, sorted by it (higher first); a tie keeps the
        candidate with the higher model score first, then the earlier one.

    Notes
    -----
    Identical texts get identical utilities; duplicates are kept (the caller takes the ``nbest`` it needs).
    """
    utilities = utility.expected_utilities(texts)
    ranked = [
        dataclasses.replace(candidate, expected_utility=value)
        for candidate, value in zip(candidates, utilities, strict=True)
    ]
    return sorted(ranked, key=lambda hypothesis: (-(hypothesis.expected_utility or 0.0), -hypothesis.score))


def mbr_search(
    model_or_step_model: Decodable,
    src_tokens: Tensor,
    config: DecodeConfig,
    detokenize: Callable[[list[int]], str],
    prefixes: Sequence[Sequence[int]] | None = None,
    between_sentences: Callable[[], None] | None = None,
) -> list[list[Hypothesis]]:
    """Translate a batch by minimum Bayes risk decoding.

    Parameters
    ----------
    model_or_step_model : Transformer, RNNEncoderDecoder or StepModel
        The model, an ensemble, or any step model.
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        Source token ids, right-padded with the pad id.
    config : DecodeConfig
        ``mbr`` (N candidates), ``mbr_candidates``, ``mbr_utility``, ``nbest`` (how many of the ranked
        candidates to return) and the candidate search's settings.
    detokenize : callable
        Turns output token ids into text (the utility compares detokenised text, as BLEU does).
    prefixes : sequence of sequence of int, optional
        A forced target prefix per sentence.
    between_sentences : callable or None
        Called before each sentence's utilities are computed (the server steps its other clients there: N = 64
        candidates are 4,032 utilities); None calls nothing.

    Returns
    -------
    list of list of Hypothesis
        Per sentence, its ``nbest`` best candidates by expected utility (``Hypothesis.expected_utility``),
        each keeping its model ``score`` and ``log_prob``.

    Raises
    ------
    ValueError
        When ``config.mbr`` is 0.

    Notes
    -----
    The cost is the candidate search plus, per sentence, N features and up to N(N - 1) pairwise utilities
    (:class:`~transformer.evaluation.bleu.SentenceUtility`): for N = 32 the utilities, not the model, dominate
    on a fast machine.
    """
    if config.mbr < 2:
        raise ValueError(f"mbr_search needs DecodeConfig.mbr >= 2 candidates, got {config.mbr}")
    candidates = search(model_or_step_model, src_tokens, candidate_config(config), prefixes)
    utility = SentenceUtility(config.mbr_utility)
    ranked = []
    for sentence in candidates:
        if between_sentences is not None:
            between_sentences()
        texts = [detokenize(hypothesis.tokens) for hypothesis in sentence]
        ranked.append(rank_by_expected_utility(sentence, texts, utility)[: config.nbest])
    return ranked
