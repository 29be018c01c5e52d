"""``verigym env-server``'s app: both surfaces on one FastAPI app, guarded, with an idle reaper; and the ways
to run it (a background thread for tests and benchmarks, the foreground for the CLI).

``create_app(envs, ...)`` serves ``{name: Environment}``: the OpenEnv routes (``_openenv``), the ORS routes
(``_ors``), behind ``EnvGuard`` (API key, body cap). One-line errors and the JSON nesting limit (64
levels) come from ``_errors``. The reaper closes sessions idle past ``idle_s``; it starts with the first
request on the serving loop (the shared runner turns ASGI lifespan off) and runs every
``min(idle_s / 4, 5)`` seconds.

The server runs on ``verigym._http_server``'s runner (header and body deadlines for HTTP requests, a
connection cap answered with 503) with WebSockets on (``ws=True``, messages up to ``max_body_bytes``): an
open socket has no read deadline and lives while its client keeps it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from verigym._http_server import ServerHandle, ServerLimits, serve_forever, start_in_thread
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
        self.host, self._port, self._limits = host, port, limits
        self._max_ws = int(options.get("max_body_bytes", MAX_BODY_BYTES))
        self._handle: ServerHandle | None = None

    def _running(self) -> ServerHandle:
        if self._handle is None:
            raise RuntimeError("the env-server is not started: call start() or use it in a with block")
        return self._handle

    @property
    def port(self) -> int:
        return self._running().port

    @property
    def url(self) -> str:
        return self._running().url

    def start(self, timeout_s: float = 30.0) -> EnvServer:
        """Listen (port, url and stop as every server's: ``verigym._http_server.ServerHandle``)."""
        self._handle = start_in_thread(
            self.app,
            self.host,
            self._port,
            limits=self._limits,
            ws=True,
            ws_max_bytes=self._max_ws,
            name="verigym-env-server",
            timeout_s=timeout_s,
        )
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._handle is not None:
            self._handle.stop(timeout_s)

    def __enter__(self) -> EnvServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def serve_envs(
    app: Any, host: str, port: int, max_body_bytes: int, limits: ServerLimits | None = None
) -> None:
    """Serve ``create_app``'s ``app`` in the foreground until Ctrl-C (the CLI)."""
    serve_forever(app, host, port, limits=limits, ws=True, ws_max_bytes=max_body_bytes)
