"""Search with a CTranslate2 export, for ``transformer serve --engine ctranslate2`` (request batching only).

CTranslate2 runs its whole search in C++ and its Python API exposes no decoder step, so sentences cannot
join or leave its batch mid-search: the worker hands it each request-level batch, as ``--batching request``
does for PyTorch. Its beam search ranks hypotheses by ``log_prob / |Y|^alpha`` (our "power" length penalty,
EOS counted in |Y| because we ask for the end token back), which is what these hypotheses' ``score`` is.
Its log-probabilities are renormalised after PAD and BOS are suppressed, so they sit slightly above ours for
the same tokens (by about 0.1 over 20 tokens on a small model); the tokens themselves are ours for greedy
search (tested in ``tests/interop``). CTranslate2 returns only the ranked score, so with a length penalty
``log_prob`` is reconstructed as ``score x |Y|^alpha``; with ``alpha = 0`` the two are its summed
log-probability (tested).
"""

from collections import defaultdict

from transformer.config.decode import DecodeConfig
from transformer.decoding.search import Hypothesis
from transformer.interop.ctranslate2 import CTranslate2Translator


def ctranslate2_search(
    translator: CTranslate2Translator, src_ids: list[list[int]], config: DecodeConfig
) -> list[list[Hypothesis]]:
    """Translate a batch of source ids with CTranslate2, returning hypotheses as our searches do.

    Parameters
    ----------
    translator : CTranslate2Translator
        The loaded export.
    src_ids : list of list of int
        Source ids, each ending with EOS.
    config : DecodeConfig
        ``beam_size``, ``nbest``, ``length_penalty`` (alpha of the power form), ``min_length`` and the
        length limits.

    Returns
    -------
    list of list of Hypothesis
        Per sentence, its ``nbest`` hypotheses, best first: tokens without EOS, ``score`` as CTranslate2
        ranked it, ``log_prob`` = score x |Y|^alpha.

    Notes
    -----
    CTranslate2's length limit applies to a whole call, so sentences are grouped by their limit (source
    length + ``max_length_offset``, capped by ``max_length`` and the exported position table), as
    :meth:`CTranslate2Translator.translate_ids` does. Raises ValueError for the "gnmt" penalty form with a
    non-zero alpha, which CTranslate2 does not have.
    """
    if config.length_penalty_form != "power" and config.length_penalty != 0:
        raise ValueError(
            "CTranslate2 has only the power length penalty (|Y|^alpha); length_penalty_form='gnmt'"
        )
    groups: dict[int, list[int]] = defaultdict(list)
    for index, ids in enumerate(src_ids):
        limit = len(ids) + config.max_length_offset
        groups[min(limit, config.max_length or limit, translator.max_positions - 1)].append(index)
    hypotheses: list[list[Hypothesis]] = [[] for _ in src_ids]
    for limit, indices in sorted(groups.items()):
        results = translator.translator.translate_batch(
            [[translator.source_pieces[token_id] for token_id in src_ids[index]] for index in indices],
            beam_size=config.beam_size,
            num_hypotheses=config.nbest,
            length_penalty=config.length_penalty,
            max_decoding_length=limit,
            min_decoding_length=config.min_length,
            max_input_length=0,
            return_end_token=True,
            return_scores=True,
            suppress_sequences=translator.suppressed,
            max_batch_size=len(indices),
        )
        for index, result in zip(indices, results, strict=True):
            hypotheses[index] = [
                _hypothesis(translator, pieces, score, config.length_penalty)
                for pieces, score in zip(result.hypotheses, result.scores, strict=True)
            ]
    return hypotheses


def _hypothesis(
    translator: CTranslate2Translator, pieces: list[str], score: float, alpha: float
) -> Hypothesis:
    """Turn CTranslate2's pieces and score into a Hypothesis (EOS cut from the tokens, counted in |Y|)."""
    steps = max(len(pieces), 1)
    if pieces and pieces[-1] == translator.eos_piece:
        pieces = pieces[:-1]
    return Hypothesis(
        tokens=[translator.target_ids[piece] for piece in pieces],
        score=float(score),
        log_prob=float(score) * steps**alpha,
        num_steps=steps,
    )
