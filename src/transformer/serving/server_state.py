"""What every route of one server shares: its settings, models, worker, metrics and readiness."""

import hmac
from dataclasses import dataclass, field

from transformer.serving.config import ServeConfig
from transformer.serving.language_detection import LanguageDetector
from transformer.serving.metrics import ServingMetrics
from transformer.serving.model_worker import ModelWorker
from transformer.serving.served_model import ServedModel
from transformer.serving.translation_cache import TranslationCache


@dataclass
class ServerState:
    """The state of one running server, kept on ``app.state.server`` (no module-level globals).

    Parameters
    ----------
    config : ServeConfig
        The server's settings.
    models : dict of str to ServedModel
        Served models by name, the default first.
    worker : ModelWorker
        The thread that decodes.
    metrics : ServingMetrics
        The server's metrics registry.
    warmed_up : set of str
        Models that have translated their warm-up sentence.
    language_detector : LanguageDetector
        What ``source: "auto"`` and ``/detect`` ask (its models load on first use).
    translation_cache : TranslationCache or None
        The sentences already translated (``--cache-size``), or None when off.

    Notes
    -----
    Only the event loop mutates ``warmed_up``; the worker thread never touches this object.
    """

    config: ServeConfig
    models: dict[str, ServedModel]
    worker: ModelWorker
    metrics: ServingMetrics
    warmed_up: set[str] = field(default_factory=set)
    language_detector: LanguageDetector = field(default_factory=LanguageDetector)
    translation_cache: TranslationCache | None = None

    @property
    def ready(self) -> bool:
        """Whether every model is loaded and has translated its warm-up sentence.

        Returns
        -------
        bool
            What ``GET /ready`` reports.

        Notes
        -----
        Models are loaded before the server listens, so readiness waits only for the warm-up.
        """
        return set(self.models) <= self.warmed_up

    @property
    def default_model(self) -> ServedModel:
        """The model used when a request names none: the first ``--checkpoint``.

        Returns
        -------
        ServedModel
            The first served model.

        Notes
        -----
        ``models`` keeps the order of the options.
        """
        return next(iter(self.models.values()))

    def key_is_valid(self, key: str | None) -> bool:
        """Check a client's API key.

        Parameters
        ----------
        key : str or None
            The key the client sent, None when it sent none.

        Returns
        -------
        bool
            True when no keys are configured, or ``key`` is one of them.

        Notes
        -----
        Compared in constant time (:func:`hmac.compare_digest`), so response times do not reveal how much
        of a key was right.
        """
        if not self.config.api_keys:
            return True
        if key is None:
            return False
        return any(hmac.compare_digest(key.encode(), known.encode()) for known in self.config.api_keys)
