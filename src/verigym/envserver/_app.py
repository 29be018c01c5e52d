"""``verigym env-server``'s app: both surfaces on one FastAPI app, guarded, with an idle reaper; and the ways
to run it (a background thread for tests and benchmarks, the foreground for the CLI).

``create_app(envs, ...)`` serves ``{name: Environment}``: the OpenEnv routes (``_openenv``), the ORS routes
(``_ors``), behind ``EnvGuard`` (API key, body cap). One-line errors and the JSON nesting limit (64
levels) come from ``_errors``. The reaper closes sessions idle past ``idle_s``; it starts with the first
request on the serving loop (the shared runner turns ASGI lifespan off) and runs every
``min(idle_s / 4, 5)`` seconds.

The server runs on ``verigym._http_server``'s hardened HTTP protocol (header and body deadlines, a
connection cap answered with 503) with WebSockets on (``ws="websockets-sansio"``), which that module's own
runner leaves off.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from verigym._http_server import ServerHandle, ServerLimits, _protocol_class, _Server
from verigym.envs.base import Environment
from verigym.envserver._catalog import ServedEnv
from verigym.envserver._guard import EnvGuard
from verigym.envserver._openenv import add_openenv_routes
from verigym.envserver._ors import add_ors_routes
from verigym.envserver._sessions import SessionTable

__all__ = ["MAX_BODY_BYTES", "EnvServer", "create_app", "serve_envs"]

MAX_BODY_BYTES = 8 * 1024 * 1024


class _Reaper:
    """ASGI wrapper that starts the idle reaper on the serving loop with the first request."""

    def __init__(self, app: ASGIApp, table: SessionTable) -> None:
        self.app, self.table = app, table
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._task is None and scope["type"] in ("http", "websocket"):
            self._task = asyncio.get_running_loop().create_task(self._run())
        await self.app(scope, receive, send)

    async def _run(self) -> None:
        every = max(0.05, min(self.table.idle_s / 4, 5.0))
        while True:
            await asyncio.sleep(every)
            self.table.reap()


def create_app(
    envs: Mapping[str, Environment],
    *,
    api_key: str | None = None,
    max_sessions: int = 256,
    idle_s: float = 900.0,
    max_body_bytes: int = MAX_BODY_BYTES,
    share_grade_details: bool = False,
) -> Any:
    """The env-server ASGI app for ``envs`` (names as served: lower-cased; module doc). Its ``table``
    attribute is the ``SessionTable``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        served_version = version("verigym")
    except PackageNotFoundError:  # a source tree that is not installed
        served_version = "unknown"
    if max_sessions < 1 or max_body_bytes < 1 or not (idle_s > 0 and math.isfinite(idle_s)):
        raise ValueError("max_sessions, max_body_bytes and idle_s must be positive")
    served = {name.lower(): ServedEnv(name.lower(), env) for name, env in envs.items()}
    table = SessionTable(served, max_sessions=max_sessions, idle_s=idle_s, details=share_grade_details)
    # /openapi.json stays on: `openenv validate URL` reads its version and paths
    app = FastAPI(title="verigym env-server", version=served_version, docs_url=None, redoc_url=None)
    app.state.table = table

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return JSONResponse({"detail": f"{where}: {first.get('msg', 'invalid')}"}, status_code=422)

    add_openenv_routes(app, table, served_version)
    add_ors_routes(app, table)
    app.add_middleware(EnvGuard, api_key=api_key, max_body_bytes=max_body_bytes)
    wrapped = _Reaper(app, table)
    wrapped.table = table  # type: ignore[attr-defined]
    return wrapped


def _uvicorn_server(
    app: Any, host: str, port: int, limits: ServerLimits | None, max_ws_bytes: int
) -> _Server:
    from uvicorn import Config

    limits = limits or ServerLimits()
    config = Config(
        app,
        host=host,
        port=port,
        http=_protocol_class(limits),
        ws="websockets-sansio",
        ws_per_message_deflate=False,  # small JSON on a fast link: compressing costs more CPU than it saves
        ws_max_size=max_ws_bytes,
        interface="asgi3",
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_keep_alive=max(1, math.ceil(limits.keep_alive_s)),
        timeout_graceful_shutdown=5,
    )
    return _Server(config, limits)


class EnvServer:
    """An env-server on a background thread (tests, benchmarks): ``url`` is ``http://HOST:PORT``.

    ``EnvServer(envs, port=0, **create_app_kwargs)``; a context manager, or ``start()``/``stop()``.
    """

    def __init__(
        self,
        envs: Mapping[str, Environment],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: ServerLimits | None = None,
        **options: Any,
    ) -> None:
        self.app = create_app(envs, **options)
        self.table: SessionTable = self.app.table
        self.host = host
        max_ws = int(options.get("max_body_bytes", MAX_BODY_BYTES))
        server = _uvicorn_server(self.app, host, port, limits, max_ws)
        thread = threading.Thread(target=server.run, name="verigym-env-server", daemon=True)
        self._handle = ServerHandle(server, thread, host)  # port, url and stop as every server's

    @property
    def port(self) -> int:
        return self._handle.port

    @property
    def url(self) -> str:
        return self._handle.url

    def start(self, timeout_s: float = 30.0) -> EnvServer:
        server, thread = self._handle.server, self._handle.thread
        thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                raise RuntimeError(f"the env-server did not start on {self.host}")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._handle.stop(timeout_s)

    def __enter__(self) -> EnvServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def serve_envs(
    app: Any, host: str, port: int, max_body_bytes: int, limits: ServerLimits | None = None
) -> None:
    """Serve ``create_app``'s ``app`` in the foreground until Ctrl-C (the CLI)."""
    _uvicorn_server(app, host, port, limits, max_body_bytes).run()
