"""What every verigym server asks of a request before a route runs, as pure ASGI pieces: an API key that
never shows itself, the request body's size cap, and a whole JSON reply sent without reading the body.

``verigym serve``'s ``Guard`` (and the gateway behind it) and ``verigym env-server``'s ``EnvGuard`` are
built from these; each says which headers carry its key and in what shape its errors go. Imports nothing
of verigym.

The body cap (``run_capped``) never buffers a body: a ``Content-Length`` above the cap gets 413 at once
(the body is never read), else the streamed chunks are counted and ``receive`` raises ``BodyTooLarge``
as soon as they pass the cap. uvicorn stops reading a connection while 64 KiB wait unread, so the rest of
a huge body never reaches memory.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ApiKey", "BodyTooLarge", "request_headers", "run_capped", "send_json"]


class ApiKey:
    """A key that never shows itself: not in a repr (an app's middleware list prints its arguments), not
    in a log line, not in an error."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value:
            raise ValueError("the API key must not be empty")
        self._value = value.encode("utf-8")

    def matches(self, token: bytes) -> bool:
        """Whether ``token`` is the key, in time independent of where they differ."""
        return hmac.compare_digest(token, self._value)

    def __repr__(self) -> str:
        return "ApiKey(***)"

    __str__ = __repr__


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once a streamed body passes the cap. An ``HTTPException``, so FastAPI's
    body reading lets it through to the app's handlers (a 413 in the app's error shape); ``run_capped``
    answers it itself when it gets that far."""

    def __init__(self, detail: str) -> None:
        super().__init__(413, detail)


def request_headers(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers by lower-case name (the first of repeated ones; ``Content-Length`` may not
    repeat with different values: h11 rejects that before the app runs)."""
    out: dict[bytes, bytes] = {}
    for name, value in scope.get("headers", ()):
        out.setdefault(bytes(name).lower(), bytes(value))
    return out


async def send_json(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A whole JSON response, sent without reading the request body."""
    data = json.dumps(body).encode("utf-8")
    head = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode("ascii")),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def run_capped(
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    headers: dict[bytes, bytes],
    limit: int,
    detail: str,
    error: Callable[[str], dict[str, Any]],
) -> None:
    """Run ``app`` on an HTTP request whose body may hold at most ``limit`` bytes; past it a 413 whose body
    is ``error(detail)`` (module doc), unless the app has already started its response."""
    try:
        length = int(headers[b"content-length"]) if b"content-length" in headers else None
    except ValueError:
        length = None
    if length is not None and length > limit:
        await send_json(send, 413, error(detail))
        return
    seen, started = 0, False

    async def bounded_receive() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(detail)
        return message

    async def watched_send(message: Message) -> None:
        nonlocal started
        started = started or message["type"] == "http.response.start"
        await send(message)

    try:
        await app(scope, bounded_receive, watched_send)
    except BodyTooLarge:
        if started:
            raise
        await send_json(send, 413, error(detail))
