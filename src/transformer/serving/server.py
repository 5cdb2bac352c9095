"""Load the models and run the server until SIGTERM or Ctrl-C: what ``transformer serve`` calls."""

import signal
import socket
import threading
from types import FrameType

import uvicorn
from fastapi import FastAPI

from transformer.serving.access_log import logging_config
from transformer.serving.app import create_app
from transformer.serving.config import ServeConfig
from transformer.serving.connection_limits import head_timeout_protocol
from transformer.serving.metrics import ServingMetrics
from transformer.serving.model_worker import ModelWorker
from transformer.serving.served_model import ServedModel, load_served_model
from transformer.serving.server_state import ServerState
from transformer.serving.translation_cache import TranslationCache


def build_server_state(config: ServeConfig) -> ServerState:
    """Load every model and prepare (not start) the worker.

    Parameters
    ----------
    config : ServeConfig
        The server's settings.

    Returns
    -------
    ServerState
        Models, worker, metrics; the app's lifespan starts the worker.

    Notes
    -----
    Models load before the port opens, so a wrong ``--checkpoint`` ends the command with its one-line
    error instead of a server that answers 503 forever. Raises ValueError (CheckpointError included) naming
    the option at fault.
    """
    models = load_models_off_the_main_thread(config)
    metrics = ServingMetrics()
    worker = ModelWorker(
        models,
        config.batching,
        config.max_batch_tokens,
        config.max_queue,
        metrics,
        config.admit_every,
    )
    cache = TranslationCache(config.cache_size, config.cache_bytes) if config.cache_size else None
    return ServerState(config, models, worker, metrics, translation_cache=cache)


def load_models_off_the_main_thread(config: ServeConfig) -> dict[str, ServedModel]:
    """Load every model in a thread of its own that ends before the server starts.

    Parameters
    ----------
    config : ServeConfig
        The checkpoints, engine, device and precision.

    Returns
    -------
    dict of str to ServedModel
        The models by name, in ``--checkpoint`` order.

    Raises
    ------
    ValueError
        From :func:`~transformer.serving.served_model.load_served_model` (a ``CheckpointError`` included),
        re-raised in the calling thread.

    Notes
    -----
    Loading runs PyTorch operators (the checksum and finiteness checks of the weights), and a thread that runs
    one keeps an OpenMP thread team alive. With the main thread's team alive, every forward pass of the model
    worker thread ran 2.6x slower on a 2-core CPU (a sentence alone, beam 4, Multi30k model: 135 ms against
    52 ms; 2026-11-26, AMX Xeon): the teams compete for the cores. A loading thread's team ends with the
    thread, so the worker's passes run as fast as in a single-threaded program (54 ms).
    """
    models: dict[str, ServedModel] = {}
    failure: list[BaseException] = []

    def load_all() -> None:
        try:
            for name, directories in config.checkpoints.items():
                models[name] = load_served_model(
                    name,
                    directories,
                    config.engine,
                    config.device,
                    config.precision,
                    config.fp32_kernels,
                    config.shortlist,
                )
        except BaseException as error:  # handed to the caller, which raises it in its own thread
            failure.append(error)

    loader = threading.Thread(target=load_all, name="transformer-serve-loader")
    loader.start()
    loader.join()
    if failure:
        raise failure[0]
    return models


def serve(config: ServeConfig) -> int:
    """Serve until SIGTERM or SIGINT, then finish the requests in flight and return.

    Parameters
    ----------
    config : ServeConfig
        The server's settings.

    Returns
    -------
    int
        0 after a graceful shutdown.

    Notes
    -----
    uvicorn handles the signals: it stops accepting connections, waits for the open requests to be answered
    (their sentences keep decoding on the worker), then runs the app's shutdown, which stops the worker
    once it is idle. Uvicorn's own log lines (listening address, access log) go to standard error.
    """
    listening = bind_socket(config.host, config.port)
    try:
        state = build_server_state(config)
    except BaseException:
        listening.close()
        raise
    server = uvicorn.Server(uvicorn_config(create_app(state), config))
    # uvicorn re-raises the signal it shut down on, once its own handler is removed; with the default
    # SIGTERM handler that would end the process with status -15 after a clean shutdown. A handler that
    # ignores it makes SIGTERM end the command with status 0 (SIGINT keeps its handler: an interrupt).
    previous = signal.signal(signal.SIGTERM, _note_sigterm) if _in_main_thread() else None
    try:
        server.run(sockets=[listening])
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


def uvicorn_config(app: FastAPI, config: ServeConfig, log_level: str = "info") -> uvicorn.Config:
    """Configure uvicorn for the app: the connection timeouts and an access log without keys.

    Parameters
    ----------
    app : FastAPI
        What :func:`~transformer.serving.app.create_app` built.
    config : ServeConfig
        Host, port, ``keep_alive_timeout`` and ``read_timeout``.
    log_level : str
        uvicorn's log level ("info" writes the access log).

    Returns
    -------
    uvicorn.Config
        Ready for ``uvicorn.Server``.

    Notes
    -----
    The h11 protocol is pinned, with the request-head timeout
    (:class:`~transformer.serving.connection_limits.HeadTimeoutH11Protocol`); the access log's handler
    redacts key-like query fields (:mod:`transformer.serving.access_log`). Tests start servers through here
    too, so what they check is what ``transformer serve`` runs.
    """
    return uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        log_level=log_level,
        log_config=logging_config(),
        http=head_timeout_protocol(config.read_timeout),
        timeout_keep_alive=config.keep_alive_timeout,  # type: ignore[arg-type]  # uvicorn takes any seconds
    )


def _note_sigterm(signal_number: int, frame: FrameType | None) -> None:
    """Accept the SIGTERM uvicorn re-raises after its graceful shutdown: the shutdown is already done."""


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def bind_socket(host: str, port: int) -> socket.socket:
    """Open the listening socket before anything slow, so a taken port is a one-line error.

    Parameters
    ----------
    host : str
        Address (IPv4 or IPv6) to listen on.
    port : int
        TCP port; 0 picks a free one.

    Returns
    -------
    socket.socket
        Bound, not yet listening (uvicorn listens on it).

    Notes
    -----
    Raises ValueError naming ``--host``/``--port`` when the address cannot be bound (in use, not local,
    no permission). Binding here rather than in uvicorn also keeps the port from being taken while the
    models load.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not the default 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on connections
    # whose socket says IPPROTO_TCP, and with it on, every response after a connection's first waited for
    # the client's delayed ACK before its body went out: 40-44 ms added to each keep-alive request.
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as error:
        listening.close()
        raise ValueError(f"--host {host} --port {port}: cannot listen there ({error.strerror})") from None
    return listening
