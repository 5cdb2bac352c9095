"""The model worker: one thread owns the models and runs every forward pass; the event loop never does.

Requests put sentences into one queue (:meth:`ModelWorker.submit`) and get each result through a callback
the moment that sentence's search ends. The thread loops:

1. take the functions queued with :meth:`ModelWorker.call` (warm-up, attention maps) and run them;
2. forget queued sentences whose client went away, and drop such sentences from the running batches;
3. **continuous batching**: admit waiting sentences, requests taking turns (the request with the fewest
   sentences decoding first, then the oldest), into the running batch of their model
   and beam size while the token budget allows; run one decoder step of every running batch; hand back
   the sentences that ended. **Request batching** (the baseline): take waiting sentences up to the budget,
   run the offline search over them to the end, hand back all.

The searches that step-level batching does not run (sampling, MBR, target prefixes, n-gram blocking, and
every search of an ensemble) take the request-batching path in either mode: admitted like the others, then
searched to the end with ``Translator.search_tokens``, so each gives what ``transformer translate`` gives.
Under continuous batching such a *whole search* is time-sliced with the running batches: before each of its
own steps (and its encoder pass, and each MBR sentence's utilities) it hands the thread back, and the
running batches step, and admit the sentences they can, for as long as its own last step took (at least one
step). The running batches thus get at least half of the thread's time beside any whole search, however
long: one 45 s prefix used to stall every other client for its 45 s. A whole search whose clients have all
gone is abandoned at its next step.

The thread sleeps on a condition variable when there is nothing to do, and :meth:`ModelWorker.stop`
drains what was accepted before it returns.
"""

import functools
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any

import torch

from transformer.config.decode import DecodeConfig
from transformer.model.transformer import Transformer
from transformer.serving.continuous_batching import ContinuousBatch, DecodedSentence, SentenceToDecode
from transformer.serving.metrics import ServingMetrics
from transformer.serving.sentence_jobs import RequestHandle, SentenceJob, SentenceTiming
from transformer.serving.served_model import ServedModel
from transformer.serving.stable_prefix import stable_prefixes
from transformer.serving.worker_errors import QueueFullError, SearchAbandonedError, WorkerStoppedError

#: The values of ``--batching``.
BATCHING_MODES = ("continuous", "request")
#: Waiting sentences that join the running batch at once, without waiting for ``admit_every`` steps.
ADMISSION_GROUP = 8


class ModelWorker:
    """The thread that owns the models and decodes every queued sentence.

    Parameters
    ----------
    models : dict of str to ServedModel
        The served models, by name: each decodes with its PyTorch model(s) (on their device, in eval mode
        and their serving precision) or its CTranslate2 export.
    batching : {"continuous", "request"}
        Step-level batching, or the request-level baseline.
    max_batch_tokens : int
        Budget of source tokens times beam size over all running sentences; a sentence over it alone
        still runs, alone.
    max_queue : int
        Most sentences waiting to join; :meth:`submit` refuses a request that would exceed it.
    metrics : ServingMetrics
        Where batch and queue metrics go.
    admit_every : int
        Continuous batching: while sentences decode, waiting ones join at most every this many steps, or as
        soon as :data:`ADMISSION_GROUP` of them wait; with nothing decoding they join at once.

    Raises
    ------
    ValueError
        For an unknown ``batching`` mode, or continuous batching with a model that is not a Transformer.

    Notes
    -----
    Continuous batching needs the Transformer's incremental cache; other architectures (the recurrent
    baseline) and CTranslate2 (no step-level API) are refused there, and serve with ``batching="request"``.
    An ensemble of Transformers is accepted: its sentences take the request-batching path.

    Why admissions are grouped: each one runs the encoder over the sentences joining and copies every layer's
    cached keys and values to add their rows. Admitted one or two at a time (every step under load), that
    was 28% of the worker's time at 64 clients (py-spy; BENCHMARKS.md 7c): small encoder batches and one full
    cache copy per step. Grouped, the copies happen every few steps and the encoder sees real batches; a
    sentence waits at most ``admit_every`` steps, and a lone request never waits.
    """

    def __init__(
        self,
        models: dict[str, ServedModel],
        batching: str,
        max_batch_tokens: int,
        max_queue: int,
        metrics: ServingMetrics,
        admit_every: int = 2,
    ) -> None:
        if batching not in BATCHING_MODES:
            raise ValueError(f"batching={batching!r} is not one of {BATCHING_MODES}")
        if batching == "continuous":
            for name, served in models.items():
                if not isinstance(served.engine_model, Transformer):
                    raise ValueError(
                        f"model {name!r}: continuous batching decodes PyTorch Transformer models; serve "
                        "this one with --batching request"
                    )
        self.models = models
        self.batching = batching
        self.max_batch_tokens = max_batch_tokens
        self.max_queue = max_queue
        self.metrics = metrics
        if admit_every < 1:
            raise ValueError(f"admit_every={admit_every} must be at least 1")
        self.admit_every = admit_every
        self._steps_since_admission = 0
        self._whole_search_tokens = 0  # the token budget held by admitted whole searches not yet done
        self._slice_ended = 0.0  # when the running whole search last got the thread back
        self._batch_seconds: dict[tuple[str, int], float] = {}  # step time each running batch has had
        self._waiting: deque[SentenceJob] = deque()
        self._calls: list[tuple[Callable[[], Any], Future[Any]]] = []
        self._batches: dict[tuple[str, int], ContinuousBatch] = {}
        self._condition = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="model-worker", daemon=True)

    def start(self) -> None:
        """Start the worker thread.

        Returns
        -------
        None

        Notes
        -----
        Call once; the thread runs until :meth:`stop`.
        """
        self._thread.start()

    def submit(self, jobs: list[SentenceJob]) -> None:
        """Queue a request's sentences, all or none.

        Parameters
        ----------
        jobs : list of SentenceJob
            The sentences, in order; they are decoded oldest request first.

        Returns
        -------
        None

        Notes
        -----
        Raises :class:`QueueFullError` when they do not all fit in ``max_queue`` and
        :class:`WorkerStoppedError` after :meth:`stop`.
        """
        with self._condition:
            if self._stopping:
                raise WorkerStoppedError("the server is shutting down")
            if len(self._waiting) + len(jobs) > self.max_queue:
                raise QueueFullError(
                    f"{len(self._waiting)} sentences are waiting and this request adds {len(jobs)}; "
                    f"the queue holds {self.max_queue}"
                )
            self._waiting.extend(jobs)
            self.metrics.queue_depth.set(len(self._waiting))
            self._condition.notify()

    def call(self, function: Callable[[], Any]) -> "Future[Any]":
        """Run a function on the worker thread, between decoder steps (warm-up, attention maps).

        Parameters
        ----------
        function : callable
            Takes no argument; runs under ``torch.inference_mode``.

        Returns
        -------
        concurrent.futures.Future
            Its result or exception.

        Notes
        -----
        Keeps every forward pass on one thread, so the event loop never blocks on the model and two
        computations never compete for the CPU's cores. Raises :class:`WorkerStoppedError` after :meth:`stop`.
        """
        future: Future[Any] = Future()
        with self._condition:
            if self._stopping:
                raise WorkerStoppedError("the server is shutting down")
            self._calls.append((function, future))
            self._condition.notify()
        return future

    def stop(self, timeout: float | None = None) -> None:
        """Refuse new work, finish everything accepted, and end the thread.

        Parameters
        ----------
        timeout : float or None
            Most seconds to wait for the thread; None waits as long as it takes.

        Returns
        -------
        None

        Notes
        -----
        Called when the server shuts down (SIGTERM): uvicorn has stopped accepting connections and waited for
        the open requests, whose sentences this lets end.
        """
        with self._condition:
            self._stopping = True
            self._condition.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        """Loop over calls, cancellations, admissions and one step per batch, until stopped and idle."""
        with torch.inference_mode():
            while True:
                with self._condition:
                    while not (self._waiting or self._calls or self._running() or self._stopping):
                        self._condition.wait()
                    if self._stopping and not (self._waiting or self._calls or self._running()):
                        return
                    calls, self._calls = self._calls, []
                    self._forget_cancelled()
                    admitted = self._take_admissible()
                    self.metrics.queue_depth.set(len(self._waiting))
                for function, future in calls:
                    _run_call(function, future)
                if self.batching == "continuous":
                    to_the_end = [job for job in admitted if self._searches_to_the_end(job)]
                    self._step_continuous([job for job in admitted if job not in to_the_end])
                    if to_the_end:
                        self._run_request_batch(to_the_end, interleaved=True)
                else:
                    self._run_request_batch(admitted)

    def _searches_to_the_end(self, job: SentenceJob) -> bool:
        """Whether a sentence needs a search that step-level batching does not run."""
        config = job.decode_config
        needs_offline_search = (
            config.sampling or config.mbr or config.no_repeat_ngram or job.prefix_ids or job.term_ids
        )
        return bool(needs_offline_search) or self.models[job.model].is_ensemble

    def _running(self) -> int:
        return sum(batch.num_sentences for batch in self._batches.values())

    def _forget_cancelled(self) -> None:
        """Drop queued sentences of disconnected clients (called with the lock held)."""
        cancelled = [job for job in self._waiting if job.handle.cancelled]
        if cancelled:
            self._waiting = deque(job for job in self._waiting if not job.handle.cancelled)
            self.metrics.sentences_cancelled.inc(len(cancelled))

    def _take_admissible(self, step_batched_only: bool = False) -> list[SentenceJob]:
        """Pop waiting sentences, requests taking turns, while they fit the token budget (lock held).

        The next sentence is the oldest waiting one of the request with the fewest sentences decoding (then
        of the request that came first): the 90 sentences of one long text join as the budget frees, and a
        one-sentence request that comes after them joins at the next admission instead of behind all 90.
        While other requests have sentences decoding or waiting, a request holds at most as many decoding as
        they have together (at least :data:`ADMISSION_GROUP`), so 88 one-character sentences do not make
        every step four times as wide for a client of one sentence; alone, a request takes all the budget
        allows. Between requests with as many decoding, and within a request, the oldest goes first. The
        sentence so chosen that does not fit the budget ends the admission (no smaller one overtakes it), so a
        long sentence waits at most until enough running ones end; with nothing running, one sentence goes in
        whatever its size. ``step_batched_only`` (while a whole search runs) leaves whole searches waiting.
        """
        if self.batching == "continuous" and not self._admission_due():
            return []
        used = self._whole_search_tokens + sum(batch.source_tokens for batch in self._batches.values())
        decoding = Counter(job.handle for batch in self._batches.values() for job in batch.keys
                           if isinstance(job, SentenceJob))  # fmt: skip
        by_request: dict[RequestHandle, deque[SentenceJob]] = {}
        for job in self._waiting:
            if not (step_batched_only and self._searches_to_the_end(job)):
                by_request.setdefault(job.handle, deque()).append(job)
        arrival = {handle: index for index, handle in enumerate(by_request)}
        total = sum(decoding.values()) + sum(len(jobs) for jobs in by_request.values())
        others = {handle: total - decoding[handle] - len(jobs) for handle, jobs in by_request.items()}
        taken: list[SentenceJob] = []
        widest = 0
        while by_request:
            within_share = [
                request
                for request in by_request
                if not others[request] or decoding[request] < max(ADMISSION_GROUP, others[request])
            ]
            if not within_share:
                break
            handle = min(within_share, key=lambda request: (decoding[request], arrival[request]))
            job = by_request[handle][0]
            rows = decoder_rows(job.decode_config)
            if self.batching == "continuous":
                cost = used + rows * len(job.src_ids)
            else:  # a padded batch: every row as wide as the longest
                widest = max(widest, len(job.src_ids))
                cost = (len(taken) + 1) * widest * rows
            if (used or taken) and cost > self.max_batch_tokens:
                break
            if self.batching == "continuous":
                used = cost
            taken.append(by_request[handle].popleft())
            decoding[handle] += 1
            if not by_request[handle]:
                del by_request[handle]
        if taken:
            chosen = set(taken)
            self._waiting = deque(job for job in self._waiting if job not in chosen)
            self._steps_since_admission = 0
        now = time.perf_counter()
        for job in taken:
            job.admitted_at = now
        return taken

    def _admission_due(self) -> bool:
        """Whether waiting sentences may join now: nothing runs, enough wait, or ``admit_every`` steps passed."""
        self._steps_since_admission += 1
        return (
            not self._running()
            or len(self._waiting) >= ADMISSION_GROUP
            or self._steps_since_admission >= self.admit_every
        )

    def _step_continuous(self, admitted: list[SentenceJob]) -> None:
        """Admit sentences to their batches, drop cancelled ones, run one step of the batch most owed time.

        Batches (one per model and beam size) take turns by the time their steps have taken: the one that has
        had the least steps next, so each gets an equal share of the thread. A one-sentence request's beam-4
        batch beside a beam-16 batch of 270 rows used to wait for the wide batch's step after each of its own
        (4.4x its p99 alone); now it takes several cheap steps per wide one. A batch that empties forgets its
        account, and one that starts begins level with the lowest.
        """
        for job in admitted:
            key = (job.model, job.decode_config.beam_size)
            if key not in self._batches:
                served = self.models[job.model]
                model = served.engine_model
                assert isinstance(model, Transformer)
                translator = served.translator
                shortlist = translator.shortlist if translator is not None else None
                native_step = translator.native_steps.get(id(model)) if translator is not None else None
                self._batches[key] = ContinuousBatch(
                    model, job.decode_config.beam_size, shortlist, native_step
                )
        for key, batch in self._batches.items():
            joining = [job for job in admitted if (job.model, job.decode_config.beam_size) == key]
            try:
                batch.admit([SentenceToDecode(job, job.src_ids, job.decode_config) for job in joining])
            except Exception as error:  # a bad input must not take the worker down
                self._fail(joining, error)
            cancelled = {job for job in batch.keys if isinstance(job, SentenceJob) and job.handle.cancelled}
            if cancelled:
                self.metrics.sentences_cancelled.inc(batch.drop(set(cancelled)))
        running = [key for key, batch in self._batches.items() if batch.num_sentences]
        known = [self._batch_seconds[key] for key in running if key in self._batch_seconds]
        self._batch_seconds = {key: self._batch_seconds.get(key, min(known, default=0.0)) for key in running}
        if running:
            key = min(running, key=self._batch_seconds.__getitem__)
            start = time.perf_counter()
            self._step_batch(self._batches[key])
            self._batch_seconds[key] += time.perf_counter() - start
        self.metrics.running_sentences.set(self._running())

    def _step_batch(self, batch: ContinuousBatch) -> None:
        """Run one step of a batch and deliver the sentences that ended; a failing step fails its sentences."""
        self.metrics.batch_rows.observe(batch.num_rows)
        try:
            results = batch.step()
        except Exception as error:  # fail this batch's sentences, keep serving the others
            failed = [job for job in batch.keys if isinstance(job, SentenceJob)]
            batch.drop(set(batch.keys))
            self._fail(failed, error)
            return
        for result in results:
            self._deliver(result)
        streaming: set[Hashable] = {
            job for job in batch.keys if isinstance(job, SentenceJob) and job.progress is not None
        }
        for key, tokens in stable_prefixes(batch, streaming):
            assert isinstance(key, SentenceJob) and key.progress is not None
            if len(tokens) > key.streamed:  # a streaming client's sentence has new certain words
                key.streamed = len(tokens)
                try:
                    key.progress(tokens)
                except Exception:  # a failing update must not stop the worker: the sentence streams no more
                    key.progress = None

    def _run_request_batch(self, admitted: list[SentenceJob], interleaved: bool = False) -> None:
        """Decode the admitted sentences to the end with the offline search, grouped by model and search.

        ``interleaved`` (continuous batching) time-slices each group with the running batches
        (:meth:`_between_whole_steps`); the groups hold their share of the token budget until they end.
        """
        groups: dict[tuple[str, DecodeConfig], list[SentenceJob]] = {}
        for job in admitted:
            groups.setdefault((job.model, job.decode_config), []).append(job)
        if interleaved:
            self._whole_search_tokens = sum(
                decoder_rows(job.decode_config) * len(job.src_ids) for job in admitted
            )
        for (name, config), jobs in groups.items():
            self.metrics.batch_rows.observe(len(jobs) * decoder_rows(config))
            self.metrics.running_sentences.set(len(jobs) + self._running())
            between_steps = None
            if interleaved:
                self._slice_ended = time.perf_counter()
                between_steps = functools.partial(self._between_whole_steps, jobs)
            try:
                hypotheses = self.models[name].search_to_the_end(
                    [job.src_ids for job in jobs],
                    [job.prefix_ids for job in jobs],
                    config,
                    between_steps,
                    [job.term_ids for job in jobs],
                )
            except SearchAbandonedError:
                self.metrics.sentences_cancelled.inc(len(jobs))
                continue
            except Exception as error:
                self._fail(jobs, error)
                continue
            finally:
                if interleaved:
                    self._whole_search_tokens -= sum(decoder_rows(config) * len(job.src_ids) for job in jobs)
            for job, sentence_hypotheses in zip(jobs, hypotheses, strict=True):
                steps = max((len(item.tokens) for item in sentence_hypotheses), default=0)
                self._deliver(DecodedSentence(job, sentence_hypotheses, steps))
        self.metrics.running_sentences.set(self._running())

    def _between_whole_steps(self, jobs: list[SentenceJob]) -> None:
        """Between two steps of a whole search: step the running batches for as long as its last step took.

        At least one step of the running batches when they have sentences; none (an immediate return) when
        they have none and none can join. Queued calls run here too, and step-batched sentences are admitted
        as between ordinary steps. Raises :class:`SearchAbandonedError` once every client of ``jobs`` is gone.
        """
        if all(job.handle.cancelled for job in jobs):
            raise SearchAbandonedError("every client of this search has gone")
        start = time.perf_counter()
        own_slice = start - self._slice_ended
        while True:
            with self._condition:
                calls, self._calls = self._calls, []
                self._forget_cancelled()
                admitted = self._take_admissible(step_batched_only=True)
                self.metrics.queue_depth.set(len(self._waiting))
            for function, future in calls:
                _run_call(function, future)
            if not (admitted or self._running()):
                break
            self._step_continuous(admitted)
            if time.perf_counter() - start >= own_slice:
                break
        self._slice_ended = time.perf_counter()

    def _deliver(self, result: DecodedSentence) -> None:
        job = result.key
        assert isinstance(job, SentenceJob)
        now = time.perf_counter()
        timing = SentenceTiming(job.admitted_at - job.submitted_at, now - job.admitted_at)
        self.metrics.sentence_latency.labels("queued").observe(timing.queued)
        self.metrics.sentence_latency.labels("decoding").observe(timing.decoding)
        job.deliver(result, timing)

    def _fail(self, jobs: list[SentenceJob], error: Exception) -> None:
        message = f"{type(error).__name__}: {error}"
        for job in jobs:
            self._deliver(DecodedSentence(job, [], 0, message))


def decoder_rows(config: DecodeConfig) -> int:
    """Count the decoder rows a sentence takes with a search: what the token budget multiplies its length by.

    Parameters
    ----------
    config : DecodeConfig
        The sentence's search.

    Returns
    -------
    int
        ``mbr`` candidates with MBR, ``nbest`` samples with sampling, else ``beam_size``.

    Notes
    -----
    An MBR sentence with N = 32 decodes eight times the rows of beam 4, so it counts eight times as much
    against ``--max-batch-tokens`` (as ``Translator.batch_budget`` scales its batches).
    """
    if config.mbr:
        return config.mbr
    return config.nbest if config.sampling else config.beam_size


def _run_call(function: Callable[[], Any], future: "Future[Any]") -> None:
    """Run one queued function and settle its future."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(function())
    except Exception as error:
        future.set_exception(error)
