"""``Gateway``: the run's one local server for all its rollouts, on a background thread.

The app is ``verigym serve``'s wiring (its error bodies, ``/health``, ``/v1/models``,
``/v1/chat/completions`` and the dialect routes ``/v1/responses``, ``/v1/messages`` and
``/v1/messages/count_tokens``) over a ``RecordingHandler``, behind the ``SessionRouter`` (which session,
retries) and serve's ``Guard`` (the body cap). Text completions and the weight endpoints are not served.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from verigym._http_server import ServerHandle, ServerLimits, start_in_thread
from verigym.gateway._mcp import SessionTools, add_mcp_route
from verigym.gateway._policy_app import create_policy_app
from verigym.gateway._recording import RecordingHandler
from verigym.gateway._router import SessionRouter
from verigym.gateway._sessions import RecordedCall, Session, Sessions
from verigym.policies.base import Policy
from verigym.policies.local import LocalPolicy
from verigym.serve.wiring import (
    ChatRequest,
    Guard,
    ServeLimits,
    add_dialect_routes,
    add_error_handlers,
    disconnect,
)
from verigym.types import Sampling, Task

__all__ = ["Gateway", "create_gateway_app"]


def create_gateway_app(
    policy: LocalPolicy,
    sessions: Sessions,
    *,
    name: str | None = None,
    default_max_tokens: int = 512,
    limits: ServeLimits | None = None,
) -> FastAPI:
    """The gateway's ASGI app over ``policy``, recording into ``sessions`` (module doc)."""
    limits = limits or ServeLimits()
    handler = RecordingHandler(policy, name or policy.name, default_max_tokens, limits, sessions)
    app = FastAPI(title="verigym gateway", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.handler = handler
    app.add_middleware(SessionRouter, sessions=sessions)
    app.add_middleware(Guard, api_key=None, max_body_bytes=limits.max_body_bytes)  # outermost

    add_error_handlers(app)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        names = [(handler.name, None)] + [(a, handler.name) for a in policy.adapters]
        data = [
            {
                "id": n,
                "object": "model",
                "created": handler.created,
                "owned_by": "verigym",
                "root": n,
                "parent": p,
            }
            for n, p in names
        ]
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(req: ChatRequest, request: Request) -> dict[str, Any] | StreamingResponse:
        return await handler.chat(req, disconnect(request))

    add_dialect_routes(app, handler)
    return app


class Gateway:
    """One local server for all rollouts of a run (``docs/gateway.md``).

    ``open`` a ``Session`` per rollout and hand its URL or key to the agent; every call it makes is
    sampled from ``policy`` (with the session's ``Sampling``, when given) and recorded; ``close`` ends
    the session and returns its ``RecordedCall`` list. ``port=0`` picks a free port; ``server_limits``:
    the connection's read deadlines and cap (``verigym._http_server``). Use as a context manager, or
    call ``start()``/``stop()``.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        default_max_tokens: int = 512,
        name: str | None = None,
        limits: ServeLimits | None = None,
        server_limits: ServerLimits | None = None,
    ) -> None:
        self.policy = policy
        self.sessions = Sessions()
        if isinstance(policy, LocalPolicy):
            self.app = create_gateway_app(
                policy, self.sessions, name=name, default_max_tokens=default_max_tokens, limits=limits
            )
        else:  # a served model or a scripted policy: Chat Completions through ``Policy.complete``
            self.app = create_policy_app(policy, self.sessions, name=name)
            self.app.add_middleware(SessionRouter, sessions=self.sessions)
            self.app.add_middleware(
                Guard, api_key=None, max_body_bytes=(limits or ServeLimits()).max_body_bytes
            )
        add_mcp_route(self.app, self.sessions)  # a session's env tools at /sessions/{id}/mcp
        self.host, self._port, self.server_limits = host, port, server_limits
        self._handle: ServerHandle | None = None

    @property
    def port(self) -> int:
        if self._handle is not None:
            return self._handle.port
        if self._port:
            return self._port
        raise RuntimeError("the gateway has no port yet: start() it first")

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (no ``/v1``: a session's URLs add their own)."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> Gateway:
        self._handle = start_in_thread(
            self.app,
            self.host,
            self._port,
            limits=self.server_limits,
            name="verigym-gateway",
            timeout_s=timeout_s,
        )
        return self

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.stop()

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def open(
        self,
        sampling: Sampling | None = None,
        *,
        session_id: str | None = None,
        task: Task | None = None,
        tools: SessionTools | None = None,
    ) -> Session:
        """A new session (a fresh id unless ``session_id`` is given, and a fresh secret key). ``sampling``
        overrides each call's temperature, top_p, top_k and seed (``seed + call index``) and caps its
        max_tokens; None: calls are sampled as sent. Raises ``ValueError`` for an id used before, and
        ``RuntimeError`` before ``start()`` when the port is still to be picked (``port=0``). ``task``: the
        episode's task, which a policy that is not an in-process model sees as ``episode_task()``.
        ``tools``: the rollout's environment tools, served as an MCP server at ``Session.mcp_url``
        (``_mcp``); None: that URL answers 404."""
        return self.sessions.open(self.url, sampling, session_id, task, tools)

    def close(self, session_id: str) -> list[RecordedCall]:
        """End the session: its calls in order; later calls get a 409. ``KeyError`` if not open."""
        return self.sessions.close(session_id)

    def calls(self, session_id: str) -> list[RecordedCall]:
        """The session's calls so far, in order (it stays open). ``KeyError`` if not open."""
        return self.sessions.calls(session_id)
