"""The ASGI application: routes, error shapes, metrics middleware, start-up warm-up and graceful shutdown.

FastAPI (on Starlette) gives the ``/v1`` API typed request models, 422 answers that name the bad field and
the OpenAPI page at ``/docs`` without code of ours; uvicorn serves it (see docs/serving.md for the choice).
"""

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from transformer.serving import api_stream, api_v1, libretranslate
from transformer.serving.connection_limits import BodyLimitMiddleware
from transformer.serving.metrics import ServingMetrics
from transformer.serving.page import render_index_page
from transformer.serving.request_context import server_of
from transformer.serving.server_state import ServerState
from transformer.serving.translation_service import SearchOptions, TranslationError, translate_texts
from transformer.serving.worker_errors import QueueFullError, WorkerStoppedError

#: Seconds a client should wait before retrying when the queue is full.
RETRY_AFTER_SECONDS = 1


def create_app(server: ServerState) -> FastAPI:
    """Build the application around a server's models and worker.

    Parameters
    ----------
    server : ServerState
        Loaded models, the (not yet started) worker, metrics and settings.

    Returns
    -------
    FastAPI
        The app; its lifespan starts the worker and the warm-up, and at shutdown drains and stops the worker.

    Notes
    -----
    Errors of the ``/v1`` API are ``{"detail": "..."}`` one-liners (invalid JSON or text 400, bad field 422
    naming it, over the work budget 413, wrong key 403, full queue 503 with ``Retry-After``); the LibreTranslate
    routes answer in LibreTranslate's ``{"error": "..."}`` shape.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        server.worker.start()
        warm_up = asyncio.create_task(_warm_up(server))
        try:
            yield
        finally:
            warm_up.cancel()
            # uvicorn has stopped accepting and waited for the open requests: let the worker finish and end.
            await asyncio.get_running_loop().run_in_executor(None, server.worker.stop)

    app = FastAPI(
        title="Transformer translation server",
        description="Step-level batched translation with a model trained by this project.",
        lifespan=lifespan,
    )
    app.state.server = server
    app.include_router(api_v1.router)
    app.include_router(api_stream.router)
    app.include_router(libretranslate.router)
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(QueueFullError, _queue_full)  # type: ignore[arg-type]
    app.add_exception_handler(WorkerStoppedError, _stopping)  # type: ignore[arg-type]
    app.add_exception_handler(TranslationError, _translation_failed)  # type: ignore[arg-type]
    app.add_middleware(
        BodyLimitMiddleware, max_chars=server.config.max_chars, read_timeout_s=server.config.read_timeout
    )
    app.add_middleware(RequestMetricsMiddleware, metrics=server.metrics)
    app.add_api_route("/", _index, methods=["GET"], response_class=HTMLResponse, include_in_schema=False)
    app.add_api_route("/health", _health, methods=["GET"], tags=["operations"])
    app.add_api_route("/ready", _ready, methods=["GET"], tags=["operations"])
    app.add_api_route("/metrics", _metrics, methods=["GET"], tags=["operations"])
    _answer_head_wherever_get(app, (api_v1.router, api_stream.router, libretranslate.router))
    return app


def _answer_head_wherever_get(app: FastAPI, routers: tuple[APIRouter, ...]) -> None:
    """Give every GET route, the app's own and those of ``routers``, a HEAD twin: GET without the body.

    RFC 9110 9.3.2; load balancers and link checkers probe with HEAD. FastAPI's routes (unlike Starlette's)
    do not add it, and a route for both methods gives the OpenAPI page two operations of the same id, so the
    twin is a route of its own. The included routers are walked themselves: FastAPI 0.165 keeps them as one
    entry of ``app.routes``.
    """
    twinned: set[str] = set()
    for route in (*app.routes, *(route for router in routers for route in router.routes)):
        if isinstance(route, APIRoute) and "GET" in (route.methods or ()) and route.path not in twinned:
            twinned.add(route.path)
            app.add_api_route(
                route.path,
                route.endpoint,
                methods=["HEAD"],
                response_class=route.response_class,
                include_in_schema=False,
            )


async def _warm_up(server: ServerState) -> None:
    """Translate one sentence with every model through the worker; then ``/ready`` says yes."""
    for model in server.models.values():
        await translate_texts(
            [server.config.warmup_text], model, SearchOptions(), server.worker, server.metrics
        )
        server.warmed_up.add(model.name)


async def _index(request: Request) -> HTMLResponse:
    """Serve the translation page."""
    server = server_of(request)
    return HTMLResponse(render_index_page(bool(server.config.api_keys)))


async def _health() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "alive"}


async def _ready(request: Request) -> JSONResponse:
    """Readiness: 200 once every model has translated its warm-up sentence, else 503."""
    server = server_of(request)
    models = {name: name in server.warmed_up for name in server.models}
    status = 200 if server.ready else 503
    return JSONResponse({"ready": server.ready, "models": models}, status_code=status)


async def _metrics(request: Request) -> Response:
    """Prometheus metrics."""
    return Response(server_of(request).metrics.export(), media_type=CONTENT_TYPE_LATEST)


class RequestMetricsMiddleware:
    """Count every HTTP request by route and status, and time it (a plain ASGI middleware).

    Parameters
    ----------
    app : ASGIApp
        The application it wraps.
    metrics : ServingMetrics
        Where the counts go.

    Notes
    -----
    Written against ASGI directly rather than as Starlette's ``BaseHTTPMiddleware``, which wraps ``receive``
    and so hides a client's disconnect from the route (it would never drop that client's sentences).
    """

    def __init__(self, app: ASGIApp, metrics: ServingMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, noting its status as the response starts.

        Parameters
        ----------
        scope : Scope
            The ASGI connection scope.
        receive : Receive
            The ASGI receive channel, passed on untouched.
        send : Send
            The ASGI send channel, wrapped to read the status.

        Returns
        -------
        None

        Notes
        -----
        The route is read from the scope after routing (Starlette stores it there); requests that match
        no route count as "unmatched".
        """
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), [500]

        async def send_noting_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        finally:
            path = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(path, str(status[0])).inc()
            self.metrics.request_latency.labels(path).observe(time.perf_counter() - start)


async def _validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    """Answer a missing, mistyped, out-of-range or unknown field with 422 naming each field.

    No route has a body FastAPI parses: ``/v1/translate`` parses its own
    (:func:`~transformer.serving.prepared_translation.read_translate_request` answers broken JSON and a body that is no
    object itself), so every error here names a field.
    """
    errors: list[dict[str, Any]] = list(error.errors())
    detail = "; ".join(
        f"{'.'.join(str(part) for part in item['loc'][1:]) or 'body'}: {item['msg']}" for item in errors
    )
    return JSONResponse(
        {"detail": detail, "errors": jsonable_encoder(errors, exclude={"input", "url"})}, status_code=422
    )


async def _queue_full(request: Request, error: QueueFullError) -> JSONResponse:
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return JSONResponse({"detail": f"queue full: {error}"}, status_code=503, headers=headers)


async def _stopping(request: Request, error: WorkerStoppedError) -> JSONResponse:
    return JSONResponse({"detail": str(error)}, status_code=503, headers={"Retry-After": "5"})


async def _translation_failed(request: Request, error: TranslationError) -> JSONResponse:
    return JSONResponse({"detail": str(error)}, status_code=500)
