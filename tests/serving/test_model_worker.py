"""The model worker: its admission rule (groups, a lone sentence at once) and whole searches time-sliced with the batch."""

import dataclasses
import threading
import time
from pathlib import Path

import pytest
import torch

from transformer.config.decode import DecodeConfig
from transformer.serving.continuous_batching import DecodedSentence
from transformer.serving.metrics import ServingMetrics
from transformer.serving.model_worker import ADMISSION_GROUP, ModelWorker
from transformer.serving.sentence_jobs import RequestHandle, SentenceJob, SentenceTiming


def worker_with(running: int, admit_every: int) -> ModelWorker:
    """A continuous-batching worker (no thread started) whose batches hold ``running`` sentences."""
    worker = ModelWorker({}, "continuous", max_batch_tokens=10_000, max_queue=100, metrics=ServingMetrics(),
                         admit_every=admit_every)  # fmt: skip
    worker._running = lambda: running  # type: ignore[method-assign]
    return worker


def queue(worker: ModelWorker, count: int) -> list[SentenceJob]:
    """Put ``count`` two-token sentences in the worker's queue."""
    jobs = [
        SentenceJob("m", [5, 2], DecodeConfig(beam_size=2), RequestHandle(), lambda *_: None)
        for _ in range(count)
    ]
    worker._waiting.extend(jobs)
    return jobs


def test_with_nothing_decoding_a_sentence_joins_at_once() -> None:
    worker = worker_with(running=0, admit_every=4)
    jobs = queue(worker, 1)
    assert worker._take_admissible() == jobs


def test_while_sentences_decode_waiting_ones_join_every_admit_every_steps() -> None:
    worker = worker_with(running=5, admit_every=3)
    worker._steps_since_admission = 0  # as after an admission
    jobs = queue(worker, 2)
    assert worker._take_admissible() == []  # step 1
    assert worker._take_admissible() == []  # step 2
    assert worker._take_admissible() == jobs  # step 3: due
    later = queue(worker, 1)
    assert worker._take_admissible() == []  # the count restarts after an admission
    assert worker._take_admissible() == []
    assert worker._take_admissible() == later


def test_a_full_group_joins_without_waiting() -> None:
    worker = worker_with(running=5, admit_every=10)
    worker._steps_since_admission = 0
    queue(worker, ADMISSION_GROUP - 1)
    assert worker._take_admissible() == []
    queue(worker, 1)
    assert len(worker._take_admissible()) == ADMISSION_GROUP


def test_admit_every_one_admits_at_every_step_and_zero_is_refused() -> None:
    worker = worker_with(running=5, admit_every=1)
    worker._steps_since_admission = 0
    jobs = queue(worker, 1)
    assert worker._take_admissible() == jobs
    with pytest.raises(ValueError, match="admit_every=0 must be at least 1"):
        worker_with(running=0, admit_every=0)


def test_requests_take_turns_so_a_small_one_does_not_wait_behind_a_long_text() -> None:
    """Strictly oldest first, a 4,000-character text at beam 16 held small requests 19 s (9.5x their p99)."""
    worker = ModelWorker({}, "continuous", max_batch_tokens=12, max_queue=100, metrics=ServingMetrics())
    long_text, small = RequestHandle(), RequestHandle()
    config = DecodeConfig(beam_size=2)
    jobs = [SentenceJob("m", [5, 2], config, long_text, lambda *_: None) for _ in range(10)]
    jobs.append(SentenceJob("m", [5, 2], config, small, lambda *_: None))
    worker._waiting.extend(jobs)
    # Each costs 2 x 2 = 4 tokens of the 12: three join; the small request's one is the second.
    assert worker._take_admissible() == [jobs[0], jobs[10], jobs[1]]
    assert list(worker._waiting) == jobs[2:10]  # the long text's others wait, in order


def test_beside_other_requests_one_request_holds_at_most_their_share_of_the_batch() -> None:
    """88 one-character sentences all joined beside one-sentence clients: each step 5x as wide (p99 5.7x)."""
    worker = ModelWorker({}, "continuous", max_batch_tokens=10_000, max_queue=200, metrics=ServingMetrics())
    tiny, small = RequestHandle(), RequestHandle()
    config = DecodeConfig(beam_size=2)
    jobs = [SentenceJob("m", [5, 2], config, tiny, lambda *_: None) for _ in range(88)]
    worker._waiting.extend([*jobs, SentenceJob("m", [5, 2], config, small, lambda *_: None)])
    taken = worker._take_admissible()
    # The other request has 1 sentence: the many-sentence one gets ADMISSION_GROUP, the small one its own.
    assert [job.handle for job in taken].count(tiny) == ADMISSION_GROUP and taken[1].handle is small
    alone = ModelWorker({}, "continuous", max_batch_tokens=10_000, max_queue=200, metrics=ServingMetrics())
    alone._waiting.extend(jobs)
    assert alone._take_admissible() == jobs  # alone, a request takes all the budget allows


class FakeClock:
    """``time.perf_counter`` of a test: only fake batch steps move it."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class FakeBatch:
    """A running batch whose every step takes ``seconds`` on the fake clock and never ends a sentence."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        self.clock, self.seconds, self.steps = clock, seconds, 0
        self.keys: list[object] = ["sentence"]
        self.num_sentences, self.num_rows = 1, 4

    def step(self) -> list[DecodedSentence]:
        self.clock.now += self.seconds
        self.steps += 1
        return []


def test_batches_take_turns_by_the_time_their_steps_take(monkeypatch: pytest.MonkeyPatch) -> None:
    """A beam-16 batch whose steps cost 4x a beam-4 batch's gets as much time, not as many steps.

    Before: every batch stepped once per round, so the cheap batch waited for the wide one after each step.
    """
    from transformer.serving import model_worker

    clock = FakeClock()
    monkeypatch.setattr(model_worker, "time", clock)
    worker = ModelWorker({}, "continuous", max_batch_tokens=100, max_queue=100, metrics=ServingMetrics())
    wide, narrow = FakeBatch(clock, 0.004), FakeBatch(clock, 0.001)
    worker._batches = {("m", 16): wide, ("m", 4): narrow}  # type: ignore[dict-item]
    for _ in range(50):
        worker._step_continuous([])
    assert (wide.steps, narrow.steps) == (10, 40)  # 40 ms each
    # A batch that joins starts level with the lowest account, not at zero (it would take every step).
    late = FakeBatch(clock, 0.001)
    worker._batches[("m", 2)] = late  # type: ignore[assignment]
    for _ in range(30):
        worker._step_continuous([])
    assert late.steps > 0 and abs(late.steps - narrow.steps + 40) <= 1


class Deliveries:
    """Collects what the worker delivers, in order, from its thread."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.results: dict[str, DecodedSentence] = {}
        self.done = threading.Event()

    def to(self, name: str, last: bool = False):
        """The ``deliver`` callback of the job called ``name``."""

        def deliver(result: DecodedSentence, timing: SentenceTiming) -> None:
            self.order.append(name)
            self.results[name] = result
            if last:
                self.done.set()

        return deliver


@pytest.fixture(scope="module")
def served(served_run: Path):
    from transformer.serving.served_model import load_served_model

    return load_served_model("m", [served_run], "pytorch", "cpu", "fp32")


def long_prefix_job(served, deliver, handle: RequestHandle | None = None) -> SentenceJob:
    """A whole search of over 300 forced steps (a long prefix), greedy."""
    config = dataclasses.replace(served.decode_config, beam_size=1, nbest=1)
    prefix = served.encode_prefix(" ".join(["ein hund schläft ."] * 60))
    assert len(prefix) > 300
    return SentenceJob(
        "m", served.encode("a dog sleeps ."), config, handle or RequestHandle(), deliver, prefix
    )


def test_a_short_sentence_is_not_held_up_by_a_long_whole_search(served) -> None:
    """The long prefix's search is time-sliced with the running batch: the short sentence ends first.

    Before: the prefix's search ran whole between two decoder steps, and the sentence behind it waited for all
    of its 300 steps.
    """
    worker = ModelWorker({"m": served}, "continuous", 4096, 100, ServingMetrics())
    deliveries = Deliveries()
    whole = long_prefix_job(served, deliveries.to("whole", last=True))
    config = dataclasses.replace(served.decode_config, beam_size=2, nbest=1)
    short = SentenceJob("m", served.encode("a cat ."), config, RequestHandle(), deliveries.to("short"))
    worker.start()
    try:
        worker.submit([whole])
        worker.submit([short])
        assert deliveries.done.wait(120)
    finally:
        worker.stop(120)
    assert deliveries.order == ["short", "whole"]
    # Each is what it is alone: the offline search of that sentence.
    translator = served.translator
    for name, job in (("whole", whole), ("short", short)):
        src = torch.tensor([job.src_ids])
        alone = translator.search_tokens(src, [job.prefix_ids] if job.prefix_ids else None, job.decode_config)
        assert deliveries.results[name].hypotheses == alone[0]
    assert deliveries.results["whole"].hypotheses[0].tokens[: len(whole.prefix_ids)] == whole.prefix_ids


def test_a_whole_search_whose_client_has_gone_stops_at_its_next_step(served) -> None:
    metrics = ServingMetrics()
    worker = ModelWorker({"m": served}, "continuous", 4096, 100, metrics)
    deliveries = Deliveries()
    handle = RequestHandle()
    steps: list[int] = []
    real_between = worker._between_whole_steps

    def counting_between(jobs: list[SentenceJob]) -> None:
        steps.append(1)
        if len(steps) == 20:
            handle.cancel()  # the client disconnects 20 steps into its 300-step search
        real_between(jobs)

    worker._between_whole_steps = counting_between  # type: ignore[method-assign]
    worker.start()
    try:
        worker.submit([long_prefix_job(served, deliveries.to("whole"), handle)])
        config = dataclasses.replace(served.decode_config, beam_size=1, nbest=1)
        after = SentenceJob(
            "m", served.encode("a cat ."), config, RequestHandle(), deliveries.to("after", True)
        )
        deadline = time.monotonic() + 60
        while len(steps) < 20:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        worker.submit([after])
        assert deliveries.done.wait(60)
    finally:
        worker.stop(120)
    assert deliveries.order == ["after"]  # the abandoned search delivered nothing
    assert len(steps) == 20  # and took no step after the one where its client was found gone
    assert metrics.sentences_cancelled._value.get() == 1


def test_a_failing_stream_update_stops_that_stream_not_the_worker(served) -> None:
    worker = ModelWorker({"m": served}, "continuous", 4096, 100, ServingMetrics())
    deliveries = Deliveries()
    config = dataclasses.replace(served.decode_config, beam_size=1, nbest=1)
    calls: list[list[int]] = []

    def broken(tokens: list[int]) -> None:
        calls.append(tokens)
        raise RuntimeError("the client's queue is gone")

    streamed = SentenceJob("m", served.encode("a dog sleeps ."), config, RequestHandle(), deliveries.to("a"),
                           progress=broken)  # fmt: skip
    other = SentenceJob("m", served.encode("a cat ."), config, RequestHandle(), deliveries.to("b", last=True))
    worker.start()
    try:
        worker.submit([streamed, other])
        assert deliveries.done.wait(60)
        deadline = time.monotonic() + 60
        while "a" not in deliveries.results:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        worker.stop(60)
    assert len(calls) == 1 and streamed.progress is None  # one failed update, then no more
    assert deliveries.results["a"].hypotheses and deliveries.results["b"].hypotheses
