"""What a request hands the model worker: its sentences as jobs, their shared handle, and where time went."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from transformer.config.decode import DecodeConfig
from transformer.serving.continuous_batching import DecodedSentence


class RequestHandle:
    """What the sentences of one request share: whether its client is still waiting.

    Notes
    -----
    The event loop calls :meth:`cancel` when the client disconnects; the worker thread reads
    :attr:`cancelled` between steps. A plain bool is enough: one writer, readers tolerate one step of delay.
    """

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        """Mark the request's sentences as no longer wanted.

        Returns
        -------
        None

        Notes
        -----
        Queued sentences are forgotten and running ones leave their batch at the worker's next step.
        """
        self.cancelled = True


@dataclass(frozen=True)
class SentenceTiming:
    """Where a sentence's time went, in seconds.

    Parameters
    ----------
    queued : float
        From :meth:`ModelWorker.submit` to joining a batch.
    decoding : float
        From joining a batch to its result.

    Notes
    -----
    Under continuous batching ``queued`` stays small while the budget has room; under request batching it
    includes waiting for the batch before to end.
    """

    queued: float
    decoding: float


@dataclass(eq=False)
class SentenceJob:
    """One sentence to translate, and where its result goes.

    Parameters
    ----------
    model : str
        Name of the model to use.
    src_ids : list of int
        Source token ids ending with EOS.
    decode_config : DecodeConfig
        Search settings.
    handle : RequestHandle
        Shared by the sentences of one request.
    deliver : callable
        Called on the worker thread with the :class:`DecodedSentence` and :class:`SentenceTiming`; it must
        return quickly (e.g. schedule the result on the event loop).
    prefix_ids : list of int
        A forced target prefix (token ids; empty for none).
    term_ids : list of list of int
        Target phrases (token ids) the translation must contain: a glossary's terms matched in the sentence
        (:mod:`transformer.decoding.glossary`); empty for none.
    progress : callable or None
        Called on the worker thread with the sentence's stable tokens (:mod:`~transformer.serving.stable_prefix`)
        each time they grow during a step-batched search (a streaming client's); it must return quickly. None
        for a client that waits for the whole result.
    submitted_at : float
        ``time.perf_counter()`` when it was queued (set on creation).
    admitted_at : float
        ``time.perf_counter()`` when it joined a batch (set by the worker).
    streamed : int
        Stable tokens already passed to ``progress`` (set by the worker).

    Notes
    -----
    Jobs compare by identity (``eq=False``) and serve as the batch's keys.
    """

    model: str
    src_ids: list[int]
    decode_config: DecodeConfig
    handle: RequestHandle
    deliver: Callable[[DecodedSentence, SentenceTiming], None]
    prefix_ids: list[int] = field(default_factory=list)
    term_ids: list[list[int]] = field(default_factory=list)
    progress: Callable[[list[int]], None] | None = None
    submitted_at: float = field(default_factory=time.perf_counter)
    admitted_at: float = 0.0
    streamed: int = 0
