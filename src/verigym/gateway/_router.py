"""The gateway's routing middleware: which session a request belongs to, and SDK retries answered from
the record (``docs/gateway.md`` is the contract).

A request names its session by any of three carriers: the path prefix ``/sessions/{id}`` (stripped
before routing, so ``/sessions/{id}/v1/chat/completions`` is ``/v1/chat/completions``), the
``X-Session-ID`` header, or the session's key as the API key (``Authorization: Bearer KEY`` or
Anthropic's ``x-api-key``). A key that is no session's key is ignored (clients always send some key);
carriers that name different sessions get a 400; no session, or one this gateway never opened, a 401;
a session that was closed, a 409. ``GET /health`` needs no session.

A ``POST`` to a sampling route (``/v1/chat/completions``, ``/v1/responses``, ``/v1/messages``) is keyed
by (method, path, sha256 of the body) within its session. A 2xx reply that recorded a call is kept whole
(status, headers, body, streamed or not) until the session closes; a request with the same key and
``x-stainless-retry-count`` > 0 gets those bytes again without sampling (the first attempt still running
is waited for), and the calls it recorded count one more ``replayed``. A retry with nothing kept samples.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from verigym._asgi_guard import request_headers, send_json
from verigym.gateway._recording import CURRENT, Call
from verigym.gateway._sessions import Dialect, Sessions, Stored
from verigym.serve.wiring import ApiError, anthropic_error, error_body

__all__ = ["SAMPLING_ROUTES", "SessionRouter"]

SAMPLING_ROUTES: dict[str, Dialect] = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
}
_PREFIX = "/sessions/"

ReplyKey = tuple[str, str, bytes]


class SessionRouter:
    """Resolves each request's session (module doc) and sets ``CURRENT`` for the handler."""

    def __init__(self, app: ASGIApp, *, sessions: Sessions) -> None:
        self.app = app
        self.sessions = sessions
        self._running: dict[tuple[str, ReplyKey], asyncio.Event] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope["path"])
        named_by_path = None
        if path.startswith(_PREFIX):
            named_by_path, slash, rest = path[len(_PREFIX) :].partition("/")
            path = slash + rest or "/"
            scope = {**scope, "path": path, "raw_path": path.encode("utf-8")}
        if path == "/health":
            await self.app(scope, receive, send)
            return
        anthropic = path.startswith("/v1/messages")
        try:
            sid = self._resolve(named_by_path, request_headers(scope))
        except ApiError as exc:
            await _error(send, exc, anthropic)
            return
        dialect = SAMPLING_ROUTES.get(path)
        call = Call(sid, dialect or "chat")
        token = CURRENT.set(call)
        try:
            if dialect is None or scope["method"] != "POST":
                await self.app(scope, receive, send)
            else:
                await self._sampling(scope, receive, send, call)
        finally:
            CURRENT.reset(token)

    def _resolve(self, by_path: str | None, headers: dict[bytes, bytes]) -> str:
        """The id of the open session the request names (module doc), else the ``ApiError`` to answer."""
        named: list[tuple[str, str]] = []
        if by_path is not None:
            named.append(("the URL path /sessions/{id}", by_path))
        if b"x-session-id" in headers:
            named.append(("the X-Session-ID header", headers[b"x-session-id"].decode("latin-1").strip()))
        for carrier, key in _keys(headers):
            found = self.sessions.by_key(key)
            if found is not None:
                named.append((carrier, found[0]))
                break
        ids = {sid for _, sid in named}
        if len(ids) > 1:
            (first, a), (second, b) = named[0], next(n for n in named[1:] if n[1] != named[0][1])
            where = f"{first} names {a!r}" if "key" not in first else "the API key names another session"
            other = f"{second} names {b!r}" if "key" not in second else "the API key names another"
            raise _fail(
                400, f"the request names two sessions: {where}, {other}; send one", "session_mismatch"
            )
        if not named:
            raise _fail(
                401,
                "no session: send the rollout's key as the API key (Authorization: Bearer KEY or "
                "x-api-key), use its base URL .../sessions/{id}/v1, or send an X-Session-ID header",
                "unknown_session",
            )
        carrier, sid = named[0]
        state = self.sessions.state(sid)
        if state == "unknown":
            raise _fail(
                401,
                f"unknown session {sid!r} (from {carrier}): this gateway never opened it",
                "unknown_session",
            )
        if state == "ended":
            raise _fail(
                409,
                f"session {sid!r} has ended: its rollout is over, so the gateway takes no more calls for it",
                "session_ended",
            )
        return sid

    async def _sampling(self, scope: Scope, receive: Receive, send: Send, call: Call) -> None:
        """A sampling call: replayed from the record when it is a retry of a kept reply (module doc)."""
        body, replay = await _read_body(receive)
        key: ReplyKey = (str(scope["method"]), str(scope["path"]), hashlib.sha256(body).digest())
        slot = (call.session, key)
        if _retry_count(request_headers(scope)) > 0:
            if slot in self._running:
                await self._running[slot].wait()
            stored = self.sessions.stored(call.session, key)
            if stored is not None:
                self.sessions.replayed(call.session, stored.indices)
                await send(
                    {"type": "http.response.start", "status": stored.status, "headers": stored.headers}
                )
                await send({"type": "http.response.body", "body": stored.body, "more_body": False})
                return
        done = asyncio.Event()
        owner = self._running.setdefault(slot, done) is done
        head: dict[str, Any] = {}
        chunks: list[bytes] = []
        finished = False

        async def capture(message: Message) -> None:
            nonlocal finished
            if message["type"] == "http.response.start":
                head.update(status=int(message["status"]), headers=list(message.get("headers", [])))
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))
                finished = not message.get("more_body", False)
            await send(message)

        try:
            await self.app(scope, replay, capture)
        finally:
            if finished and call.indices and 200 <= head.get("status", 0) < 300:
                self.sessions.store(
                    call.session, key, Stored(head["status"], head["headers"], b"".join(chunks), call.indices)
                )
            if owner:
                del self._running[slot]
                done.set()


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The whole request body, and a ``receive`` that hands it to the app and then waits as ``receive``
    does (for the disconnect)."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left before sending its body
            body = b"".join(parts)
            break
        parts.append(bytes(message.get("body", b"")))
        if not message.get("more_body", False):
            body = b"".join(parts)
            break
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


def _keys(headers: dict[bytes, bytes]) -> list[tuple[str, bytes]]:
    out = []
    scheme, _, token = headers.get(b"authorization", b"").strip().partition(b" ")
    if scheme.lower() == b"bearer" and token.strip():
        out.append(("the API key (Authorization: Bearer)", token.strip()))
    if headers.get(b"x-api-key", b"").strip():
        out.append(("the API key (x-api-key)", headers[b"x-api-key"].strip()))
    return out


def _retry_count(headers: dict[bytes, bytes]) -> int:
    try:
        return int(headers.get(b"x-stainless-retry-count", b"0"))
    except ValueError:
        return 0


def _fail(status: int, message: str, code: str) -> ApiError:
    headers = {"x-should-retry": "false"}
    if status == 401:
        headers["www-authenticate"] = "Bearer"
    type_ = {401: "authentication_error", 409: "conflict_error"}.get(status, "invalid_request_error")
    return ApiError(status, message, type_=type_, code=code, headers=headers)


async def _error(send: Send, exc: ApiError, anthropic: bool) -> None:
    body = anthropic_error(exc) if anthropic else error_body(str(exc), exc.type, exc.param, exc.code)
    headers = [(k.encode("ascii"), v.encode("ascii")) for k, v in (exc.headers or {}).items()]
    await send_json(send, exc.status, body, headers)
