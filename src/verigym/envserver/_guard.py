"""What ``verigym env-server`` asks of a client before a route runs: the API key and a bounded body.

Pure ASGI middleware built from ``verigym._asgi_guard``'s pieces (as ``verigym serve``'s guard is), for
both clients' ways of sending a key: with an API key set, every request except ``GET /health`` (and every
WebSocket upgrade) must carry it as ``Authorization: Bearer KEY`` (openenv's clients, which send their
headers on the upgrade) or ``X-API-Key: KEY`` (ors-sdk's client); keys are compared in constant time and
never logged or echoed. A wrong key gets 401 (a WebSocket is closed with 1008 before it is accepted). A
body larger than ``max_body_bytes`` gets 413: at once when ``Content-Length`` announces it, else as soon
as the streamed chunks pass the cap.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from verigym._asgi_guard import ApiKey, request_headers, run_capped, send_json

__all__ = ["EnvGuard"]


class EnvGuard:
    """The API key and the body cap in front of ``app`` (module doc)."""

    def __init__(self, app: ASGIApp, *, api_key: str | None, max_body_bytes: int) -> None:
        self.app = app
        self._key = None if api_key is None else ApiKey(api_key)
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
        headers = request_headers(scope)
        if self._key is not None and scope["path"] != "/health" and not self._authorized(headers):
            if scope["type"] == "websocket":
                await send(
                    {"type": "websocket.close", "code": 1008, "reason": "incorrect or missing API key"}
                )
                return
            await send_json(
                send,
                401,
                _detail(
                    "incorrect or missing API key: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'"
                ),
                [(b"www-authenticate", b"Bearer")],
            )
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        await run_capped(
            self.app,
            scope,
            receive,
            send,
            headers=headers,
            limit=limit,
            detail=f"the request body is larger than this server's limit of {limit} bytes "
            "(--max-body-bytes raises it)",
            error=_detail,
        )


def _detail(message: str) -> dict[str, Any]:
    """An error body in FastAPI's shape, as the routes' errors are."""
    return {"detail": message}
