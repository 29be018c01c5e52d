"""What ``verigym serve`` asks of a client before a route runs: the API key and a bounded body.

``Guard`` is pure ASGI middleware in front of the FastAPI app; it never buffers a body itself:

- with an API key, every request except ``GET /health`` must carry ``Authorization: Bearer KEY``
  (compared in constant time with ``hmac.compare_digest``); otherwise a 401 in OpenAI's error shape.
  The key is held only in memory: it is never logged, echoed in an error or written to a file.
- a body larger than ``max_body_bytes`` gets a 413: at once when ``Content-Length`` announces it (the
  body is never read), else as soon as the streamed chunks pass the cap. uvicorn stops reading a
  connection while 64 KiB wait unread, so the rest of a huge body never reaches memory.

``ServeLimits`` holds these caps and the admission limits of ``_admission``.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from verigym.serve._wire import error_body

__all__ = ["ApiKey", "BodyTooLarge", "Guard", "ServeLimits"]

MiB = 1024 * 1024


@dataclass(frozen=True)
class ServeLimits:
    """How much one client may ask of the server (``verigym serve --max-...`` flags of these names).

    ``max_body_bytes``: the largest request body (413 past it). ``max_concurrent_requests``: requests
    being generated at once; ``max_queued_tokens``: their prompt tokens plus ``max_tokens``, times
    ``n``, summed (429 with ``Retry-After: retry_after_s`` past either; one request that alone needs
    more than ``max_queued_tokens`` can never run and gets 400).
    """

    max_body_bytes: int = 8 * MiB
    max_concurrent_requests: int = 256
    max_queued_tokens: int = 1 << 20
    retry_after_s: int = 1

    def __post_init__(self) -> None:
        for field in ("max_body_bytes", "max_concurrent_requests", "max_queued_tokens", "retry_after_s"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field} must be at least 1, got {getattr(self, field)}")


class ApiKey:
    """A bearer key that never shows itself: not in a repr (the app's middleware list prints its
    arguments), not in a log line, not in an error."""

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
    body reading lets it through to the app's handler (a 413 in OpenAI's shape); ``Guard`` answers it
    itself when it gets that far."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, _too_large(limit))


def _too_large(limit: int) -> str:
    return (
        f"the request body is larger than this server's limit of {limit} bytes "
        "(verigym serve --max-body-bytes raises it)"
    )


class Guard:
    """The API key and the body cap, in front of ``app`` (module doc)."""

    def __init__(self, app: ASGIApp, *, api_key: ApiKey | None, max_body_bytes: int) -> None:
        self.app = app
        self._key = api_key
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if self._key is not None and scope["path"] != "/health":
            problem = self._auth_problem(headers.get(b"authorization"))
            if problem:
                body = error_body(problem, "invalid_request_error", code="invalid_api_key")
                await _reply(send, 401, body, [(b"www-authenticate", b"Bearer")])
                return
        limit = self.max_body_bytes
        length = _content_length(headers.get(b"content-length"))
        if length is not None and length > limit:
            await _reply(send, 413, error_body(_too_large(limit), "invalid_request_error"))
            return
        seen, started = 0, False

        async def bounded_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, bounded_receive, watched_send)
        except BodyTooLarge:
            if started:
                raise
            await _reply(send, 413, error_body(_too_large(limit), "invalid_request_error"))

    def _auth_problem(self, header: bytes | None) -> str | None:
        """Why ``header`` does not authorize the request (None: it does)."""
        assert self._key is not None
        if header is None:
            return (
                "no API key: send it as 'Authorization: Bearer KEY' (this server was started with an API key)"
            )
        scheme, _, token = header.strip().partition(b" ")
        if scheme.lower() != b"bearer" or not self._key.matches(token.strip()):
            return "incorrect API key (send it as 'Authorization: Bearer KEY')"
        return None


def _headers(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers by lower-case name (the first of repeated ones; ``Content-Length`` may not
    repeat with different values: h11 rejects that before the app runs)."""
    out: dict[bytes, bytes] = {}
    for name, value in scope.get("headers", ()):
        out.setdefault(bytes(name).lower(), bytes(value))
    return out


def _content_length(value: bytes | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


async def _reply(
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
