"""The model worker's admission rule: waiting sentences join a running batch in groups, a lone one at once."""

import pytest

from transformer.config.decode import DecodeConfig
from transformer.serving.metrics import ServingMetrics
from transformer.serving.model_worker import ADMISSION_GROUP, ModelWorker
from transformer.serving.sentence_jobs import RequestHandle, SentenceJob


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
