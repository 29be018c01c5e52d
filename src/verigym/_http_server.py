"""Every HTTP server verigym starts runs through here: uvicorn with deadlines and a connection cap.

uvicorn alone waits forever for a client that sends half a request line or trickles a body, and accepts
connections until the process runs out of file descriptors (then ``/health`` stops answering and the
event loop logs a traceback per failed accept). ``ServerLimits`` closes those holes:

- ``header_timeout_s``: a request's line and headers must arrive within this many seconds of the
  connection opening (or, on a kept-alive connection, of the request's first byte); else a 408 and the
  connection is closed. Trickling a byte at a time does not extend it.
- ``body_timeout_s``: the whole body must arrive within this many seconds of the headers; else the
  connection is closed (the app sees a disconnect).
- Both deadlines are for HTTP requests only: a connection upgraded to a WebSocket (``ws=True``) has none
  and lives as long as its peer keeps it; the WebSocket's own ping (every 20 s, closed when a pong does
  not come within 20 s) drops a peer that is gone.
- ``keep_alive_s``: an idle kept-alive connection is closed after this long.
- ``max_connections``: open connections past this get a 503 (``Retry-After: 1``) and are closed at
  once. It is also held under the process's file-descriptor limit (``RLIMIT_NOFILE`` less an eighth,
  at least 32, for the rest of the process), so the server sheds load before ``accept`` fails.
- ``log_interval_s``: event-loop errors (``accept`` failing with ``EMFILE`` and the like) are logged
  as one line per kind per interval, with a count of the ones left out, never a traceback each.

``listen_error(host, port)`` says whether a port can be listened on (the commands' check before they
load anything). ``start_in_thread(app, host, port, limits=...)`` runs an ASGI app on a background thread and returns a
``ServerHandle`` (``.url``, ``.port``, ``.stop()``, a context manager); ``serve_forever`` runs one in
the foreground until Ctrl-C (CLI commands). Both serve WebSockets only with ``ws=True`` (uvicorn's
websockets-sansio protocol, messages up to ``ws_max_bytes``, no per-message compression). Imports
uvicorn and h11, nothing of verigym.
"""

from __future__ import annotations

import asyncio
import logging
import math
import resource
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn import Config, Server
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "ServerHandle",
    "ServerLimits",
    "effective_max_connections",
    "listen_error",
    "serve_forever",
    "start_in_thread",
]

_log = logging.getLogger("verigym.http")

_REPLY_408 = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s"
)
_REPLY_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"retry-after: 1\r\ncontent-length: %d\r\n\r\n%s"
)
_BODY_408 = b'{"error": {"message": "the request headers did not arrive in time", "type": "timeout"}}'
_BODY_503 = b'{"error": {"message": "too many open connections; retry shortly", "type": "overloaded"}}'


@dataclass(frozen=True)
class ServerLimits:
    """Deadlines and caps for one server (module doc); every field must be positive and finite."""

    header_timeout_s: float = 30.0
    body_timeout_s: float = 120.0
    keep_alive_s: float = 5.0
    max_connections: int = 1000
    log_interval_s: float = 10.0

    def __post_init__(self) -> None:
        for field in ("header_timeout_s", "body_timeout_s", "keep_alive_s", "log_interval_s"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{field} must be a finite number of seconds, got {value!r}")
            if value <= 0:
                raise ValueError(f"{field} must be more than 0 seconds, got {value!r}")
        cap = self.max_connections
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ValueError(f"max_connections must be a whole number of at least 1, got {cap!r}")


def listen_error(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on now (the OS's words), or None when it can.

    The probe sets ``SO_REUSEADDR`` as uvicorn's own socket does: a server that just stopped on the port
    leaves connections in TIME_WAIT (about 60 s) that uvicorn listens past but a plain bind is refused
    by; a socket still listening there is refused either way."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def effective_max_connections(limits: ServerLimits) -> int:
    """``limits.max_connections``, held under the file-descriptor limit with room for the rest of the
    process (an eighth of the limit, at least 32)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return limits.max_connections
    return max(1, min(limits.max_connections, soft - max(32, soft // 8)))


class _RateLimitedLog:
    """Event-loop errors, once per kind per interval, with the count left out since: ``accept`` running
    out of descriptors (and its kin) as one line, anything else with the loop's usual traceback."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._last: dict[str, float] = {}
        self._dropped: dict[str, int] = {}
        self._lock = threading.Lock()

    def loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        kind = str(context.get("message") or "event loop error")
        dropped = self._allow(kind)
        if dropped is None:
            return
        more = f" ({dropped} more like it in the last {self.interval_s:g} s)" if dropped else ""
        exc = context.get("exception")
        if "accept" in kind or isinstance(exc, OSError):  # EMFILE and the like: no traceback each
            detail = f": {type(exc).__name__}: {exc}" if exc is not None else ""
            _log.warning("%s%s%s", kind, detail, more)
        else:
            loop.default_exception_handler({**context, "message": kind + more})

    def _allow(self, kind: str) -> int | None:
        """None to leave this one out, else how many were left out since the last one shown."""
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(kind, -math.inf) < self.interval_s:
                self._dropped[kind] = self._dropped.get(kind, 0) + 1
                return None
            self._last[kind] = now
            return self._dropped.pop(kind, 0)


class _QuietTracebacks(logging.Filter):
    """On uvicorn's error logger: a traceback of the same kind ("Exception in ASGI application") at
    most once per interval; the ones left out are counted into the next line that passes."""

    def __init__(self, interval_s: float) -> None:
        super().__init__("")
        self.interval_s = interval_s
        self._last: dict[str, float] = {}
        self._dropped: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.exc_info:
            return True
        kind, now = str(record.msg), time.monotonic()
        if now - self._last.get(kind, -math.inf) < self.interval_s:
            self._dropped[kind] = self._dropped.get(kind, 0) + 1
            return False
        self._last[kind] = now
        if dropped := self._dropped.pop(kind, 0):
            record.msg = f"{record.msg} ({dropped} more like it in the last {self.interval_s:g} s)"
        return True


def _quiet_uvicorn_tracebacks(interval_s: float) -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietTracebacks) for f in logger.filters):
        logger.addFilter(_QuietTracebacks(interval_s))


class _LimitedH11(H11Protocol):
    """uvicorn's h11 protocol with the read deadlines and the connection cap (subclassed per server by
    ``_protocol_class``, which sets the two class attributes)."""

    limits: ServerLimits
    cap: int

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._timer: asyncio.TimerHandle | None = None
        self._phase = ""  # "headers", "body", or "" (no read deadline running)
        self._shed = False
        self._upgraded = False  # a WebSocket now: no HTTP deadline ever again
        super().connection_made(transport)
        if len(self.connections) > self.cap:
            self._shed = True
            transport.write(_REPLY_503 % (len(_BODY_503), _BODY_503))
            if transport.can_write_eof():
                transport.write_eof()  # the client reads the 503, then EOF; its close ends ours
            self._timer = self.loop.call_later(1.0, transport.close)  # or at the latest in a second
            return
        self._arm("headers", self.limits.header_timeout_s)

    def data_received(self, data: bytes) -> None:
        if self._shed:
            return
        if not self._phase and self.conn.their_state is h11.IDLE:
            self._arm("headers", self.limits.header_timeout_s)  # the next request on a kept-alive connection
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()  # a pipelined request that was waiting has started

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        # The transport passes to the WebSocket protocol (which never calls back here): h11 still thinks
        # the upgrade request's body is coming, so without this the body deadline would close the socket.
        self._upgraded = True
        self._disarm()
        super().handle_websocket_upgrade(event)

    def _follow(self) -> None:
        if self._upgraded:
            return
        state = self.conn.their_state
        if state is h11.SEND_BODY and self._phase == "headers":
            self._arm("body", self.limits.body_timeout_s)
        elif state is not h11.IDLE and state is not h11.SEND_BODY:
            self._disarm()  # the whole request is in (or the connection is closing)

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._phase = phase
        self._timer = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._phase = None, ""

    def _expired(self) -> None:
        phase, self._timer, self._phase = self._phase, None, ""
        if self.transport.is_closing():
            return
        if phase == "headers" and self.conn.our_state is h11.IDLE:
            self.transport.write(_REPLY_408 % (len(_BODY_408), _BODY_408))
        self.transport.close()  # mid-body: the app sees a disconnect


def _protocol_class(limits: ServerLimits) -> type[asyncio.Protocol]:
    return type("LimitedH11", (_LimitedH11,), {"limits": limits, "cap": effective_max_connections(limits)})


class _Server(Server):
    """uvicorn's server with the loop's errors logged through ``_RateLimitedLog``."""

    def __init__(self, config: Config, limits: ServerLimits) -> None:
        super().__init__(config)
        self._errors = _RateLimitedLog(limits.log_interval_s)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().set_exception_handler(self._errors.loop_error)
        await super().serve(sockets)


_WS_MAX_BYTES = 16 * 1024 * 1024  # uvicorn's own default


def _server(
    app: Any,
    host: str,
    port: int,
    limits: ServerLimits | None,
    log_level: str,
    backlog: int,
    graceful_s: float,
    ws: bool = False,
    ws_max_bytes: int = _WS_MAX_BYTES,
) -> _Server:
    limits = limits or ServerLimits()
    if isinstance(ws_max_bytes, bool) or not isinstance(ws_max_bytes, int) or ws_max_bytes < 1:
        raise ValueError(f"ws_max_bytes must be a whole number of at least 1, got {ws_max_bytes!r}")
    config = Config(
        app,
        host=host,
        port=port,
        http=_protocol_class(limits),
        ws="websockets-sansio" if ws else "none",
        ws_max_size=ws_max_bytes,
        ws_per_message_deflate=False,  # small JSON on a fast link: compressing costs more CPU than it saves
        interface="asgi3",  # every app here is ASGI 3 (a bound method is not detected as one)
        lifespan="off",
        log_level=log_level,
        access_log=False,
        timeout_keep_alive=max(1, math.ceil(limits.keep_alive_s)),
        timeout_graceful_shutdown=max(1, math.ceil(graceful_s)),
        backlog=backlog,
    )
    _quiet_uvicorn_tracebacks(limits.log_interval_s)  # after Config, which (re)configures logging
    return _Server(config, limits)


class ServerHandle:
    """A server running on a background thread (``start_in_thread``); ``url`` is ``http://HOST:PORT``."""

    def __init__(self, server: Server, thread: threading.Thread, host: str) -> None:
        self.server, self.thread, self.host = server, thread, host

    @property
    def port(self) -> int:
        return int(self.server.servers[0].sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop serving and join the thread (open requests get ``timeout_s`` to finish)."""
        self.server.should_exit = True
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(timeout_s)

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def start_in_thread(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    limits: ServerLimits | None = None,
    ws: bool = False,
    ws_max_bytes: int = _WS_MAX_BYTES,
    name: str = "verigym-http",
    log_level: str = "warning",
    backlog: int = 2048,
    graceful_s: float = 5.0,
    timeout_s: float = 30.0,
) -> ServerHandle:
    """Serve ``app`` on ``host:port`` (0: a free port) on a daemon thread; returns once it listens.

    ``ws``: serve WebSockets too (messages up to ``ws_max_bytes``). ``graceful_s``: how long ``stop()``
    lets open requests finish. Raises ``RuntimeError`` when it does not start within ``timeout_s`` (the
    port taken, say).
    """
    server = _server(app, host, port, limits, log_level, backlog, graceful_s, ws, ws_max_bytes)
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the server did not start on {host}:{port}")
        time.sleep(0.01)
    return ServerHandle(server, thread, host)


def serve_forever(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    limits: ServerLimits | None = None,
    ws: bool = False,
    ws_max_bytes: int = _WS_MAX_BYTES,
    log_level: str = "warning",
    backlog: int = 2048,
) -> None:
    """Serve ``app`` in the foreground until interrupted (Ctrl-C or SIGTERM stop it gracefully);
    ``ws`` and ``ws_max_bytes`` as in ``start_in_thread``."""
    _server(app, host, port, limits, log_level, backlog, 5.0, ws, ws_max_bytes).run()
