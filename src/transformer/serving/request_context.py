"""What every translating route needs of a request: the server, the API key, the model, the client's presence."""

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import HTTPException, Request

from transformer.serving.served_model import ServedModel
from transformer.serving.server_state import ServerState

#: HTTP status of a request whose client went away before its answer (nginx's convention; nobody reads it).
CLIENT_CLOSED_REQUEST = 499

ResultT = TypeVar("ResultT")


def server_of(request: Request) -> ServerState:
    """Find the :class:`ServerState` of the app serving ``request``.

    Parameters
    ----------
    request : Request
        The current request.

    Returns
    -------
    ServerState
        ``request.app.state.server``.

    Notes
    -----
    Kept on the app, not in a module global, so tests can run several servers in one process.
    """
    state: ServerState = request.app.state.server
    return state


def check_api_key(server: ServerState, authorization: str | None, api_key: str | None) -> None:
    """Refuse a request without a valid key (403) when keys are configured.

    Parameters
    ----------
    server : ServerState
        The server.
    authorization : str or None
        The ``Authorization`` header (``Bearer KEY``; the scheme in any case).
    api_key : str or None
        The ``X-API-Key`` header or ``api_key`` query parameter.

    Returns
    -------
    None

    Notes
    -----
    Raises HTTPException(403) for a missing or wrong key. The scheme name is case-insensitive (RFC 7235,
    section 2.1), so ``bearer KEY`` is accepted as ``Bearer KEY``; the key itself is compared exactly.
    """
    key = api_key
    scheme, _, credentials = (authorization or "").strip().partition(" ")
    if scheme.lower() == "bearer":
        key = credentials.strip()
    if not server.key_is_valid(key):
        raise HTTPException(403, "missing or invalid API key (send 'Authorization: Bearer KEY')")


def find_model(server: ServerState, name: str | None) -> ServedModel:
    """Look up a served model by name (None: the default).

    Parameters
    ----------
    server : ServerState
        The server.
    name : str or None
        The request's ``model``.

    Returns
    -------
    ServedModel
        The model.

    Notes
    -----
    Raises HTTPException(422) naming the field and the served models for an unknown name.
    """
    if name is None:
        return server.default_model
    if name not in server.models:
        raise HTTPException(422, f"model: unknown model {name!r}; served: {', '.join(server.models)}")
    return server.models[name]


async def until_disconnected(request: Request, work: Awaitable[ResultT]) -> ResultT | None:
    """Await ``work`` unless the client disconnects first; then cancel it and return None.

    Parameters
    ----------
    request : Request
        The request whose connection to watch.
    work : awaitable
        The request's translation.

    Returns
    -------
    object or None
        The result of ``work``; None when the client went away.

    Notes
    -----
    Starlette does not cancel a handler whose client disconnects, so without this its sentences would
    keep their batch rows until they finished for nobody. After the body has been read, the ASGI
    ``receive`` returns only when the connection closes.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_for_disconnect(request))
    done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        watcher.cancel()
        return task.result()
    task.cancel()  # translate_texts cancels the request's handle: its sentences leave queue and batch
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


async def _wait_for_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
