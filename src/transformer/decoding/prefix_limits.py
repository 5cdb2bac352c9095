"""The length limit of target prefixes: :class:`PrefixTooLongError` and the check that raises it.

:meth:`~transformer.decoding.translator.Translator.translate_nbest` calls :func:`check_prefix_lengths` before
any search, so a prefix no translation could be as long as fails at once instead of forcing thousands of
decoder steps. Start reading at :func:`check_prefix_lengths`.
"""


class PrefixTooLongError(ValueError):
    """A target prefix longer than any translation of its sentence may be.

    Parameters
    ----------
    index : int
        The sentence's position in the input (0-based).
    reason : str
        What is wrong, in one line (the message).

    Notes
    -----
    Each forced token is one decoder step, so a prefix of 4,200 tokens (a 3,000-word line) ran 4,200 steps, one
    at a time, and gave no output in 300 s; no search of any line could produce an output so long.
    ``transformer translate`` names ``--prefix-file`` and the line from ``index``.
    """

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index = index


def check_prefix_lengths(
    sources: list[list[int]],
    prefixes: list[list[int]],
    max_input_tokens: int,
    max_length_offset: int,
    max_output_length: int | None,
) -> None:
    """Refuse a prefix longer than the longest translation any line may get.

    Parameters
    ----------
    sources : list of list of int
        Each sentence's encoded source (empty for an empty line).
    prefixes : list of list of int
        Each sentence's encoded target prefix (empty for none), one per source.
    max_input_tokens : int
        The translator's source-token cap.
    max_length_offset : int
        The search's ``max_length_offset``.
    max_output_length : int or None
        The step model's output cap (a learned position table's size), or None.

    Returns
    -------
    None

    Raises
    ------
    PrefixTooLongError
        For the first non-empty line whose prefix has more than ``max_input_tokens + max_length_offset``
        tokens (or ``max_output_length`` when smaller).

    Notes
    -----
    A prefix wins over its own line's limits (it may be a whole translation of a longer sentence), but never
    forces more steps than the longest search could take. An empty source line stays empty whatever its
    prefix, so it is not checked.
    """
    limit = max_input_tokens + max_length_offset
    reason = f"--max-length-offset {max_length_offset} past the {max_input_tokens:,}-token input limit"
    if max_output_length is not None and max_output_length < limit:
        limit, reason = max_output_length, "the model's learned position table"
    for index, (source, prefix) in enumerate(zip(sources, prefixes, strict=True)):
        if source and len(prefix) > limit:
            raise PrefixTooLongError(
                index,
                f"the prefix is {len(prefix):,} tokens, more than the {limit:,} any translation may have "
                f"({reason})",
            )
