"""What ``verigym env-server`` asks of a client before a route runs: the API key and a bounded body.

Pure ASGI middleware, as ``verigym serve``'s guard, for both clients' ways of sending a key: with an API
key set, every request except ``GET /health`` (and every WebSocket upgrade) must carry it as
``Authorization: Bearer KEY`` (openenv's clients, which send their headers on the upgrade) or
``X-API-Key: KEY`` (ors-sdk's client); keys are compared in constant time and never logged or echoed. A
wrong key gets 401 (a WebSocket is closed with 1008 before it is accepted). A body larger than
``max_body_bytes`` gets 413: at once when ``Content-Length`` announces it, else as soon as the streamed
chunks pass the cap.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["EnvGuard", "TooLarge"]


class TooLarge(HTTPException):
    """A streamed body passed the cap. An ``HTTPException``, so a route reading the body answers it as a
    413 with FastAPI's ``{"detail"}``; the guard answers it itself when it gets that far."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, _too_large(limit))


class _Key:
    """A key that never shows itself (not in a repr, a log line or an error)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value:
            raise ValueError("the API key must not be empty")
        self._value = value.encode("utf-8")

    def matches(self, token: bytes) -> bool:
        return hmac.compare_digest(token, self._value)

    def __repr__(self) -> str:
        return "_Key(***)"


class EnvGuard:
    """The API key and the body cap in front of ``app`` (module doc)."""

    def __init__(self, app: ASGIApp, *, api_key: str | None, max_body_bytes: int) -> None:
        self.app = app
        self._key = None if api_key is None else _Key(api_key)
        self.max_body_bytes = max_body_bytes

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        assert self._key is not None
        bearer = headers.get(b"authorization")
        if bearer is not None:
            scheme, _, token = bearer.strip().partition(b" ")
            if scheme.lower() == b"bearer" and self._key.matches(token.strip()):
                return True
        other = headers.get(b"x-api-key")
        return other is not None and self._key.matches(other.strip())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", ()):
            headers.setdefault(bytes(name).lower(), bytes(value))
        if self._key is not None and scope["path"] != "/health" and not self._authorized(headers):
            if scope["type"] == "websocket":
                await send(
                    {"type": "websocket.close", "code": 1008, "reason": "incorrect or missing API key"}
                )
                return
            await _reply(
                send,
                401,
                "incorrect or missing API key: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
                [(b"www-authenticate", b"Bearer")],
            )
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        try:
            length = int(headers[b"content-length"]) if b"content-length" in headers else None
        except ValueError:
            length = None
        if length is not None and length > limit:
            await _reply(send, 413, _too_large(limit))
            return
        seen, started = 0, False

        async def bounded_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise TooLarge(limit)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, bounded_receive, watched_send)
        except TooLarge:
            if started:
                raise
            await _reply(send, 413, _too_large(limit))


def _too_large(limit: int) -> str:
    return (
        f"the request body is larger than this server's limit of {limit} bytes (--max-body-bytes raises it)"
    )


async def _reply(
    send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body: dict[str, Any] = {"detail": detail}
    data = json.dumps(body).encode("utf-8")
    head = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode("ascii")),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data, "more_body": False})
