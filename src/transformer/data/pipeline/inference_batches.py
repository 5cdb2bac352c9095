"""Group the sentences to translate into batches within a token budget, longest first.

Translation has no target side and no epochs: :func:`inference_batches` sorts the inputs by length, longest
first, and cuts that order into the largest batches whose padded size fits; the translator puts the outputs back
in input order.
"""

from collections.abc import Sequence


def inference_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Group sentences for translation: longest first, each batch's padded size within ``max_tokens``.

    Parameters
    ----------
    lengths : Sequence[int]
        Token count of each sentence (EOS included); 0 marks a sentence with nothing to translate.
    max_tokens : int
        Budget for ``batch_size * longest`` per batch.

    Returns
    -------
    list[list[int]]
        Sentence indices per batch; every index with a positive length appears once, sentences of equal
        length in input order, and length-0 sentences in none.

    Notes
    -----
    Unlike :class:`~transformer.data.pipeline.token_batch_sampler.TokenBatchSampler` there is no shuffling and no target side: the longest sentences go
    first, so the first batch shows at once whether the longest input fits in memory, and the first
    sentence of a batch sets its width. A sentence longer than ``max_tokens`` still gets a batch of its own
    rather than being dropped: a translator must answer every input line.
    """
    if max_tokens <= 0:
        raise ValueError(f"inference_batches: max_tokens must be positive, got {max_tokens}")
    order = sorted(
        (index for index, length in enumerate(lengths) if length > 0), key=lambda index: -lengths[index]
    )
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        width = lengths[current[0]] if current else lengths[index]
        if current and (len(current) + 1) * width > max_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches
