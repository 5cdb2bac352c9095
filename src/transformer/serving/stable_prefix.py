"""What of a running sentence's translation can no longer change: the prefix every possible winner shares.

A streamed translation (``POST /v1/translate/stream``) sends a sentence's words as they become certain. Under
greedy search every token is certain once chosen. Under beam search the final translation is one of the
hypotheses finished so far or an extension of a live beam, so the tokens all of those begin with are certain:
whatever the length penalty ranks first, it starts with them. Beams that have fallen to zero probability
(``-inf``) can no longer win and are left out.
"""

from collections.abc import Hashable, Sequence

from transformer.serving.continuous_batching import ContinuousBatch


def common_prefix(sequences: Sequence[Sequence[int]]) -> list[int]:
    """Return the longest sequence every one of ``sequences`` begins with.

    Parameters
    ----------
    sequences : sequence of sequence of int
        Token sequences.

    Returns
    -------
    list of int
        Their longest common prefix; empty when there are none.

    Notes
    -----
    One pass over the shortest sequence's positions.
    """
    if not sequences:
        return []
    shortest = min(sequences, key=len)
    for position, token in enumerate(shortest):
        if any(sequence[position] != token for sequence in sequences):
            return list(shortest[:position])
    return list(shortest)


def stable_prefixes(batch: ContinuousBatch, keys: set[Hashable]) -> list[tuple[Hashable, list[int]]]:
    """Give, for each running sentence among ``keys``, the tokens its translation is sure to begin with.

    Parameters
    ----------
    batch : ContinuousBatch
        A batch after :meth:`~ContinuousBatch.step` (sentences that ended have left it).
    keys : set of Hashable
        The sentences that want them (streaming clients'); others are not read.

    Returns
    -------
    list of (Hashable, list of int)
        Per wanted running sentence, its key and stable tokens (no EOS).

    Notes
    -----
    One read of the wanted sentences' token table and beam scores back to the host per call, so a batch
    without streaming sentences pays nothing. Finished hypotheses are taken without their EOS, as the search
    returns them.
    """
    indices = [index for index, key in enumerate(batch.keys) if key in keys]
    if not indices:
        return []
    tokens = batch.tokens[indices].tolist()  # (wanted, beam, width)
    live = batch.log_probs[indices].isfinite().tolist()  # (wanted, beam)
    steps = batch.steps[indices].tolist()
    prefixes = []
    for row, index in enumerate(indices):
        candidates = [beam[: steps[row]] for beam, alive in zip(tokens[row], live[row], strict=True) if alive]
        finished = batch.finished[index]
        candidates += [
            hypothesis[: length - int(eos)]
            for hypothesis, length, eos in zip(
                finished.tokens, finished.num_steps, finished.ends_with_eos, strict=True
            )
        ]
        prefixes.append((batch.keys[index], common_prefix(candidates)))
    return prefixes
