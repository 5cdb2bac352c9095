"""The server's Prometheus metrics, in a registry of its own (no process-wide state)."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from transformer.serving.translation_cache import CacheStats

#: Latency buckets in seconds: a short sentence on a CPU takes milliseconds, a long queue seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Rows per decoder step: powers of two up to a large beam batch.
ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class ServingMetrics:
    """Counters, gauges and histograms of one server, exported at ``GET /metrics``.

    Parameters
    ----------
    registry : CollectorRegistry or None
        Where to register; a new registry by default, so two servers in one process (tests) never share.

    Notes
    -----
    Names follow Prometheus conventions (``_total`` counters, ``_seconds`` durations). The worker thread
    updates the batch metrics and the event loop the request metrics; ``prometheus_client`` metrics are
    thread-safe.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        prefix = "transformer_serve"
        self.requests = Counter(
            f"{prefix}_requests", "HTTP requests by route and status code", ["route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.request_latency = Histogram(
            f"{prefix}_request_latency_seconds", "Time from receiving a request to answering it", ["route"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.sentences = Counter(
            f"{prefix}_sentences", "Sentences translated, by model", ["model"], registry=self.registry
        )
        self.sentences_cancelled = Counter(
            f"{prefix}_sentences_cancelled",
            "Sentences dropped because their client disconnected",
            registry=self.registry,
        )
        self.tokens = Counter(
            f"{prefix}_tokens", "Tokens by model and side (source, target)", ["model", "side"],
            registry=self.registry,
        )  # fmt: skip
        self.omission_retries = Counter(
            f"{prefix}_omission_retries", "Sentences flagged as an omission under --retry-omissions, by model and "
            "outcome (replaced: the retry in two pieces lost fewer words; kept: it did not; unsplit: nothing to "
            "split; skipped: no room in the queue for the pieces)",
            ["model", "outcome"], registry=self.registry,
        )  # fmt: skip
        self.cache_lookups = Counter(
            f"{prefix}_cache_lookups", "Sentences looked up in the translation cache (--cache-size), by model and "
            "result (hit, miss)", ["model", "result"], registry=self.registry,
        )  # fmt: skip
        self.cache_entries = Gauge(
            f"{prefix}_cache_entries", "Sentences held by the translation cache", registry=self.registry
        )
        self.cache_bytes = Gauge(
            f"{prefix}_cache_bytes",
            "Estimated size of the translation cache's entries",
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            f"{prefix}_queue_depth", "Sentences waiting to join the batch", registry=self.registry
        )
        self.running_sentences = Gauge(
            f"{prefix}_running_sentences", "Sentences in the running batch", registry=self.registry
        )
        self.batch_rows = Histogram(
            f"{prefix}_batch_rows", "Decoder rows per step (sentences times beam)",
            buckets=ROW_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.sentence_latency = Histogram(
            f"{prefix}_sentence_latency_seconds", "Time from queueing a sentence to its result", ["stage"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip

    def record_cache(self, model: str, hits: int, misses: int, stats: CacheStats) -> None:
        """Count a request's cache lookups and show the cache's size.

        Parameters
        ----------
        model : str
            The model's name.
        hits, misses : int
            The request's sentences answered from the cache, and not.
        stats : CacheStats
            The cache after the request.

        Returns
        -------
        None

        Notes
        -----
        Called on the event loop after each request that used the cache.
        """
        self.cache_lookups.labels(model, "hit").inc(hits)
        self.cache_lookups.labels(model, "miss").inc(misses)
        self.cache_entries.set(stats.entries)
        self.cache_bytes.set(stats.bytes)

    def export(self) -> bytes:
        """Render every metric in the Prometheus text format.

        Returns
        -------
        bytes
            The body of ``GET /metrics``.

        Notes
        -----
        Served with ``prometheus_client.CONTENT_TYPE_LATEST`` as its content type.
        """
        return generate_latest(self.registry)
