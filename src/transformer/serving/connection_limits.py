"""What one connection may cost the server: bounded body bytes, and bounded time to send a request.

uvicorn reads a request's whole body before the application sees it, and times out only a keep-alive
connection that has *finished* a response. A 50 MB body was therefore read and parsed whole before its 413
(+127 MiB of resident memory each), a connection that never sent a byte stayed open forever, and one that sent
its headers a byte a second (slowloris) reset the keep-alive timer with every byte. Here:

* :class:`BodyLimitMiddleware` refuses a ``Content-Length`` over the limit before reading anything, counts the
  bytes of a body as they arrive and answers 413 the moment they pass the limit, and answers 408 to a body
  that does not arrive within the read timeout; the connection is closed after either answer, so the rest of
  the body is never read.
* :class:`HeadTimeoutH11Protocol` closes, with a 408, a connection whose request line and headers have not all
  arrived within the read timeout of the connection opening (or of its previous response ending).
"""

import asyncio
import json
import logging
from collections import deque

import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

#: Body bytes allowed per character of ``--max-chars``: JSON's ``\\ud83d\\ude00`` spends 12 bytes on one
#: astral character, and a list of one-character texts 5 more per item (quotes, comma, space).
BODY_BYTES_PER_CHARACTER = 16
#: Body bytes allowed beyond that, for the other fields (options, prefixes' keys, form boundaries).
BODY_BYTES_OVERHEAD = 64 * 1024
#: Paths that answer in LibreTranslate's ``{"error": ...}`` shape rather than ``{"detail": ...}``.
LIBRETRANSLATE_PATHS = frozenset({"/translate", "/languages"})


def max_body_bytes(max_chars: int) -> int:
    """Compute the most bytes a request body may have on a server that takes ``max_chars`` characters.

    Parameters
    ----------
    max_chars : int
        ``--max-chars``: characters per request, all texts together.

    Returns
    -------
    int
        ``16 * max_chars + 64 KiB``.

    Notes
    -----
    Generous on purpose: a request within ``--max-chars`` must never be refused for its encoding (escaped
    JSON, form encoding); the precise character limit is applied after parsing. What this bounds is the
    memory a body can take before that check: about 145 KiB at the default 5,000 characters, not 50 MB.
    """
    return BODY_BYTES_PER_CHARACTER * max_chars + BODY_BYTES_OVERHEAD


class BodyLimitMiddleware:
    """Read each request body under a byte limit and a time limit before the application sees it.

    Parameters
    ----------
    app : ASGIApp
        The application it wraps.
    max_chars : int
        ``--max-chars``, from which the byte limit is derived (:func:`max_body_bytes`).
    read_timeout_s : float
        Seconds the whole body may take to arrive (``--read-timeout``).

    Notes
    -----
    The body (at most the limit) is buffered here and replayed to the application, then ``receive`` passes
    through untouched, so a route still sees its client's disconnect. A plain ASGI middleware, as
    :class:`~transformer.serving.app.RequestMetricsMiddleware` is, for the same reason.
    """

    def __init__(self, app: ASGIApp, max_chars: int, read_timeout_s: float) -> None:
        self.app = app
        self.max_chars = max_chars
        self.limit = max_body_bytes(max_chars)
        self.read_timeout_s = read_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse an over-long or too-slow body, else pass the request on with its body replayed.

        Parameters
        ----------
        scope : Scope
            The ASGI connection scope.
        receive : Receive
            The ASGI receive channel, read here until the body's end.
        send : Send
            The ASGI send channel.

        Returns
        -------
        None

        Notes
        -----
        A declared ``Content-Length`` over the limit is refused before a byte of the body is read; a
        chunked body is refused as soon as the bytes counted pass it. Either way the answer carries
        ``Connection: close``, so uvicorn closes the connection instead of reading the rest.
        """
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, send, 413, f"{declared:,} bytes declared")
            return
        body: deque[Message] = deque()
        try:  # wait_for, not asyncio.timeout (3.11+); its TimeoutError is asyncio's own on 3.10
            size = await asyncio.wait_for(_read_body(receive, body, self.limit), self.read_timeout_s)
        except asyncio.TimeoutError:
            await self._refuse(scope, send, 408, "")
            return
        if size is None:  # the client went away before its body ended: nobody to answer
            return
        if size > self.limit:
            await self._refuse(scope, send, 413, f"more than {self.limit:,} bytes sent")
            return

        async def replay() -> Message:
            return body.popleft() if body else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, send: Send, status: int, seen: str) -> None:
        """Answer 413 or 408 with one line naming the limit and the option behind it, and close."""
        if status == 413:
            message = (
                f"request body too large: {seen}; this server takes at most {self.limit:,} bytes "
                f"(--max-chars {self.max_chars})"
            )
        else:
            message = f"request body not received within {self.read_timeout_s:g} s (--read-timeout)"
        key = "error" if scope.get("path") in LIBRETRANSLATE_PATHS else "detail"
        payload = json.dumps({key: message}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _declared_length(scope: Scope) -> int | None:
    """Read the request's ``Content-Length`` (h11 has already refused a malformed one), or None."""
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value)
    return None


async def _read_body(receive: Receive, body: deque[Message], limit: int) -> int | None:
    """Receive body messages into ``body`` until the end or past ``limit``; the bytes seen, None if gone."""
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        size += len(message.get("body", b""))
        body.append(message)
        if size > limit or not message.get("more_body", False):
            return size


class HeadTimeoutH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head is not complete in time.

    Notes
    -----
    The timer starts when the connection opens and again when a response ends on a kept-alive connection,
    and stops once h11 has parsed the request line and every header (its peer state leaves ``IDLE``), so
    idle time before the first byte counts: a connection that sends nothing is closed too. Data arriving
    resets uvicorn's own keep-alive timer but never this one, which is what a byte-a-second sender relies
    on. ``head_timeout_s`` is set on a subclass by :func:`head_timeout_protocol`, because uvicorn builds
    protocols from a class and its own :class:`uvicorn.Config` (and constructs them with that config, as
    :class:`uvicorn.protocols.http.h11_impl.H11Protocol`).
    """

    head_timeout_s: float = 10.0
    _head_timer: asyncio.TimerHandle | None = None
    #: Kept alive after a response, no byte of the next request yet: uvicorn's keep-alive timer runs instead.
    _idle_between_requests: bool = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Start the connection and its head timer.

        Parameters
        ----------
        transport : asyncio.Transport
            The new connection.

        Returns
        -------
        None

        Notes
        -----
        Counted from here, before any byte arrives.
        """
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        """Parse the bytes; stop the head timer once the request's head is complete.

        Parameters
        ----------
        data : bytes
            Bytes from the client.

        Returns
        -------
        None

        Notes
        -----
        h11 moves the client's state out of ``IDLE`` when it has the whole head. On a kept-alive connection
        the timer starts with the next request's first byte: the idle time before it is
        ``--keep-alive-timeout``'s, which may well be longer than ``--read-timeout``.
        """
        if self._idle_between_requests and data:
            self._idle_between_requests = False
            self._arm_head_timer()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        """Let uvicorn finish the cycle; on a kept-alive connection, wait for the next request's first byte.

        Returns
        -------
        None

        Notes
        -----
        Arming the head timer here would cut an idle kept-alive connection at ``--read-timeout`` (an
        unprompted 408) whatever ``--keep-alive-timeout`` says; uvicorn's keep-alive timer covers the idle
        time, :meth:`data_received` starts the head timer. A pipelined request already parsed leaves
        ``IDLE`` at once, and gets no timer.
        """
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._idle_between_requests = True

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the timer of a closed connection.

        Parameters
        ----------
        exc : Exception or None
            Why it closed, as asyncio says.

        Returns
        -------
        None

        Notes
        -----
        A timer left armed would fire on a dead transport (harmless, but it would hold the protocol).
        """
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        """(Re)start the countdown to the head's deadline."""
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        """Stop the countdown, if any."""
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        """Answer 408 (written raw: h11 sends no response before a request) and close the connection."""
        self._head_timer = None
        if self.transport.is_closing():
            return
        message = f"request line and headers not received within {self.head_timeout_s:g} s (--read-timeout)\n"
        self.transport.write(
            b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            + f"content-length: {len(message)}\r\n\r\n{message}".encode()
        )
        self.transport.close()
        client = f"{self.client[0]}:{self.client[1]} - " if self.client else ""
        logging.getLogger("uvicorn.error").info("%sclosed: %s", client, message.strip())


def head_timeout_protocol(head_timeout_s: float) -> type[HeadTimeoutH11Protocol]:
    """Make the protocol class uvicorn should serve with, for one timeout.

    Parameters
    ----------
    head_timeout_s : float
        Seconds a client has to send a request line and its headers.

    Returns
    -------
    type
        A subclass of :class:`HeadTimeoutH11Protocol` with that timeout.

    Notes
    -----
    Pinning h11 (rather than uvicorn's "auto", which picks httptools where installed) also keeps the
    protocol, and so these timeouts, the same on every machine.
    """
    return type("HeadTimeoutH11Protocol", (HeadTimeoutH11Protocol,), {"head_timeout_s": head_timeout_s})
