"""The errors the model worker raises to the server: a full queue, a stopped worker, an abandoned search.

:class:`QueueFullError` and :class:`WorkerStoppedError` come out of
:meth:`~transformer.serving.model_worker.ModelWorker.submit` and become HTTP 503 answers in the app;
:class:`SearchAbandonedError` stays inside the worker, which raises it between a whole search's steps once
every client of that search has gone. Start reading at :class:`QueueFullError`.
"""


class QueueFullError(RuntimeError):
    """The waiting queue has no room for a request's sentences (HTTP 503 with Retry-After).

    Notes
    -----
    Raised before any of the request's sentences is queued, so a refused request leaves nothing behind.
    """


class SearchAbandonedError(RuntimeError):
    """Every client of a whole search has gone: raised between its steps to stop it.

    Notes
    -----
    Raised by the worker's pause inside :class:`~transformer.decoding.pausing_step_model.PausingStepModel`
    and caught by the worker, which delivers nothing: the requests are already answered (or closed).
    """


class WorkerStoppedError(RuntimeError):
    """The worker is shutting down and accepts no more work (HTTP 503).

    Notes
    -----
    Raised by :meth:`~transformer.serving.model_worker.ModelWorker.submit` and
    :meth:`~transformer.serving.model_worker.ModelWorker.call` after
    :meth:`~transformer.serving.model_worker.ModelWorker.stop`.
    """
