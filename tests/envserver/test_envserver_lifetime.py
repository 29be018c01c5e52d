"""How long an env-server's connections live and what ending them leaves behind.

- An upgraded WebSocket has no HTTP read deadline: held idle past a (shortened) header and body deadline
  it still answers, while a slow HTTP body on the same server is still cut at the body deadline.
- A client closing its WebSocket (cleanly, mid-episode, with a reply still on its way, or by dropping the
  TCP connection) leaves the server's log free of tracebacks.
- A port is free again at once after the server on it stopped: the bind check of ``verigym env-server``
  and ``view`` (``check_listen``) and of ``serve`` (``serve.workflow.check``) sets ``SO_REUSEADDR`` as
  uvicorn does, so the
  TIME_WAIT connections a stopped server leaves do not refuse it; a port still listened on still is.
- ``verigym eval``/``select`` say ``error:`` for an unreachable server (env or model) as for a bad flag.

Timing: only causal bounds (nothing is cut before its deadline) and generous upper bounds.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner
from websockets.sync.client import ClientConnection, connect

from verigym._cli._server_opts import check_listen
from verigym._http_server import ServerLimits, start_in_thread
from verigym.cli import app
from verigym.envs.registry import load_env
from verigym.envserver import EnvServer
from verigym.serve.workflow import ServeConfig, ServeSetupError, check

DEADLINE_S = 1.0
SLACK_S = 60.0


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EnvServer, _Records]]:
    """calc on an env-server with 1 s header and body deadlines; every record its loggers write."""
    limits = ServerLimits(header_timeout_s=DEADLINE_S, body_timeout_s=DEADLINE_S)
    records = _Records()
    with EnvServer({"calc": load_env("calc")}, limits=limits) as srv:
        for name in ("uvicorn", "uvicorn.error", "verigym.http", "starlette", "fastapi"):
            logger = logging.getLogger(name)
            monkeypatch.setattr(logger, "filters", [])  # the runner's once-per-10-s traceback filter
            logger.addHandler(records)
        try:
            yield srv, records
        finally:
            for name in ("uvicorn", "uvicorn.error", "verigym.http", "starlette", "fastapi"):
                logging.getLogger(name).removeHandler(records)


def _ws(srv: EnvServer) -> ClientConnection:
    return connect(srv.url.replace("http://", "ws://") + "/ws", open_timeout=SLACK_S)


def _ask(ws: ClientConnection, kind: str, data: dict[str, object] | None = None) -> dict[str, object]:
    ws.send(json.dumps({"type": kind, "data": data or {}}))
    reply: dict[str, object] = json.loads(ws.recv(timeout=SLACK_S))
    return reply


def _problems(records: _Records) -> list[str]:
    return [
        f"{r.name} {r.levelname}: {r.getMessage()}"
        for r in records.records
        if r.exc_info or r.levelno >= logging.WARNING
    ]


def test_an_idle_websocket_outlives_the_deadlines_while_a_slow_body_is_cut(
    server: tuple[EnvServer, _Records],
) -> None:
    srv, records = server
    with _ws(srv) as ws:
        first = _ask(ws, "reset", {"seed": 3})
        assert first["type"] == "observation", first
        slow = socket.create_connection(("127.0.0.1", srv.port), timeout=SLACK_S)
        slow.sendall(b"POST /reset HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n")
        slow.sendall(b'content-length: 100\r\n\r\n{"seed"')
        sent = time.monotonic()
        assert slow.recv(1024) == b""  # the body deadline closes it (the app sees a disconnect)
        assert time.monotonic() - sent >= DEADLINE_S * 0.9
        slow.close()
        time.sleep(2.5 * DEADLINE_S - (time.monotonic() - sent))  # idle well past both deadlines
        state = _ask(ws, "state")
        assert state["type"] == "state", state
        assert state["data"]["episode_id"] is not None, state  # type: ignore[index]
        step = _ask(ws, "step", {"content": "I do not know"})
        assert step["type"] == "observation", step
    assert not _problems(records), _problems(records)


def test_clients_closing_their_websockets_leave_no_traceback(server: tuple[EnvServer, _Records]) -> None:
    srv, records = server
    with _ws(srv) as ws:  # a clean close, mid-episode
        _ask(ws, "reset", {"seed": 1})
    ws = _ws(srv)  # a step sent, the socket closed before its reply
    _ask(ws, "reset", {"seed": 2})
    ws.send(json.dumps({"type": "step", "data": {"content": "4"}}))
    ws.close()
    ws = _ws(srv)  # the TCP connection dropped without a close frame
    _ask(ws, "reset", {"seed": 3})
    ws.socket.shutdown(socket.SHUT_RDWR)  # (close() alone sends no FIN while the client's reader blocks)
    ws.close()
    with _ws(srv) as ws:  # openenv's own goodbye
        _ask(ws, "reset", {"seed": 4})
        ws.send(json.dumps({"type": "close", "data": {}}))
    deadline = time.monotonic() + SLACK_S
    while srv.table.live and time.monotonic() < deadline:  # each socket's session closes with it
        time.sleep(0.05)
    assert not srv.table.live
    with _ws(srv) as ws:  # and the server still serves
        assert _ask(ws, "reset", {"seed": 5})["type"] == "observation"
    assert not _problems(records), _problems(records)


def _stop_with_kept_alive_connections(port: int) -> None:
    """A server on ``port`` that answers kept-alive requests, then stops: it closes those connections
    first, leaving them in TIME_WAIT on ``port``."""
    handle = start_in_thread(EnvServer({"calc": load_env("calc")}).app, "127.0.0.1", port)
    clients = [httpx.Client(base_url=handle.url, timeout=SLACK_S) for _ in range(3)]
    for client in clients:
        assert client.get("/health").status_code == 200
    handle.stop()
    for client in clients:
        client.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_stopped_servers_port_passes_the_bind_check_at_once() -> None:
    port = _free_port()
    _stop_with_kept_alive_connections(port)
    check_listen("127.0.0.1", port)  # env-server's and view's; before the fix "Address already in use"
    check(ServeConfig(model="tiny", port=port))  # verigym serve's
    with start_in_thread(EnvServer({"calc": load_env("calc")}).app, "127.0.0.1", port) as again:
        assert httpx.get(f"{again.url}/health", timeout=SLACK_S).status_code == 200
        with pytest.raises(typer.Exit) as refused:  # a port still listened on is still refused
            check_listen("127.0.0.1", port)
        assert refused.value.exit_code == 2
        with pytest.raises(ServeSetupError, match="cannot listen there"):
            check(ServeConfig(model="tiny", port=port))


def _env_server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "verigym", "env-server", "calc", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + SLACK_S
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"verigym env-server did not start: {out}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)


def test_env_server_restarts_on_its_port_at_once() -> None:
    port = _free_port()
    first = _env_server(port)
    try:
        with httpx.Client(timeout=SLACK_S) as kept:  # a kept-alive connection the server closes on exit
            assert kept.get(f"http://127.0.0.1:{port}/health").status_code == 200
            first.terminate()  # uvicorn stops gracefully, then re-raises the signal
            assert first.wait(timeout=SLACK_S) in (0, -signal.SIGTERM)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    second = _env_server(port)
    second.terminate()
    assert second.wait(timeout=SLACK_S) in (0, -signal.SIGTERM)


def test_unreachable_servers_and_bad_flags_say_error_alike(tmp_path: Path) -> None:
    """The one-line error prefix is ``error:`` whichever server is unreachable and for a bad flag."""
    runner, out, gone = CliRunner(), str(tmp_path / "out"), f"http://127.0.0.1:{_free_port()}"
    cases = (
        (["eval", gone, "-n", "2", "--out", out], "cannot reach the env-server"),
        (
            ["eval", "calc", "-n", "2", "--base-url", f"{gone}/v1", "--model", "m", "--out", out],
            "cannot reach",
        ),
        (["select", gone, "-n", "2"], "cannot reach the env-server"),
        (["eval", "calc", "-n", "-1", "--out", out], "--num-tasks"),
        (["eval", "calc", "--no-such-flag"], "--no-such-flag"),
    )
    for args, word in cases:
        result = runner.invoke(app, args)
        err = result.stderr.strip()
        assert result.exit_code == 2, (args, result.output)
        assert err.startswith("error: ") and word in err and len(err.splitlines()) == 1, (args, err)
