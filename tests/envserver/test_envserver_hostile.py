"""Hostile clients against ``verigym env-server``: wrong or missing keys, malformed and huge bodies, deep
nesting, unknown sessions, steps after the end, concurrent steps on one session, a full server, and
garbage over the WebSocket. Each gets its one-line error and status; the server keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from verigym.envs.registry import load_env
from verigym.envs.tool import ToolEnv
from verigym.envserver import EnvServer
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Message, Task

KEY = "s3cret-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


async def slow(seconds: float) -> str:
    """Wait, then answer."""
    await asyncio.sleep(seconds)
    return "waited"


class SlowEnv(ToolEnv):
    """One tool that takes its time (to catch two steps of one session at once)."""

    name = "slow"

    def __init__(self) -> None:
        super().__init__(
            [slow], rubric=Rubric([Grader(lambda t, tr: Grade(score=1.0), name="any")]), max_turns=4
        )

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return [Task(id=f"slow-{i}", prompt=(Message(role="user", content="wait"),)) for i in range(n or 3)]


@pytest.fixture(scope="module")
def server() -> Iterator[EnvServer]:
    envs = {"calc": load_env("calc"), "slow": SlowEnv()}
    with EnvServer(envs, api_key=KEY, max_sessions=4, max_body_bytes=16_384) as srv:
        yield srv


@pytest.fixture
def http(server: EnvServer) -> Iterator[httpx.Client]:
    server.table.close_all()
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client:
        yield client


def _detail(response: httpx.Response) -> str:
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and "Traceback" not in detail
    return detail


def test_keys(server: EnvServer) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as bare:
        assert bare.get("/health").status_code == 200  # open, for load balancers
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"X-API-Key": "wrong"},
            {"Authorization": KEY},
        ):
            for method, path in (("POST", "/reset"), ("GET", "/list_environments"), ("POST", "/mcp")):
                reply = bare.request(method, path, headers=headers, json={})
                assert reply.status_code == 401
                assert KEY not in reply.text and "API key" in _detail(reply)
        assert bare.get("/list_environments", headers={"X-API-Key": KEY}).json() == ["calc", "slow"]
    with pytest.raises(InvalidStatus):  # closed before the handshake completes
        connect(
            f"ws://127.0.0.1:{server.port}/ws", additional_headers={"Authorization": "Bearer wrong"}
        ).recv()
    with connect(f"ws://127.0.0.1:{server.port}/ws", additional_headers=AUTH) as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        assert json.loads(ws.recv())["type"] == "observation"


def test_malformed_bodies(http: httpx.Client) -> None:
    assert http.post("/reset", content=b"{not json").status_code == 422
    assert "not valid JSON" in _detail(http.post("/reset", content=b"{not json"))
    assert "JSON object" in _detail(http.post("/reset", json=[1, 2]))
    for body, field in (
        ({"seed": -1}, "seed"),
        ({"seed": "zero"}, "seed"),
        ({"split": "dev"}, "split"),
        ({"index": 10**6}, "index"),
        ({"task_id": 5}, "task_id"),
        ({"sampling": {"temperature": "hot"}}, "sampling.temperature"),
    ):
        reply = http.post("/reset", json=body)
        assert reply.status_code == 422 and field in _detail(reply), (body, reply.text)
    assert http.post("/reset", json={"env": "nope"}).status_code == 404
    sid = http.post("/reset", json={}).headers["x-session-id"]
    header = {"X-Session-ID": sid}
    for action, field in (
        ("text", "action must be a JSON object"),
        ({"content": 5}, "action.content"),
        ({"tool_calls": "calc"}, "action.tool_calls"),
        ({"tool_calls": [{"function": {}}]}, "action.tool_calls[0]"),
        ({"finish_reason": "bored"}, "action.finish_reason"),
        ({"usage": {"completion_tokens": -3}}, "action.usage.completion_tokens"),
        ({"contents": "hi"}, "unknown field"),
    ):
        reply = http.post("/step", json={"action": action}, headers=header)
        assert reply.status_code == 422 and field in _detail(reply), (action, reply.text)
    assert http.post("/step", json={"no_action": 1}, headers=header).status_code == 422
    assert "X-Session-ID" in _detail(http.post("/step", json={"action": {"content": "1"}}))
    # none of it took a turn
    assert http.get("/state", headers=header).json()["step_count"] == 0
    assert http.post("/mcp", content=b"]]").json()["error"]["code"] == -32700
    assert http.post("/mcp", json={"method": "tools/list"}).json()["error"]["code"] == -32600
    assert http.post("/create", json={"split": "test"}, headers={"X-Session-ID": "x"}).status_code == 422
    assert http.post("/create", json={"split": "test", "index": 0}).status_code == 400  # no X-Session-ID
    odd = {"X-Session-ID": "x" * 500}
    assert "X-Session-ID" in _detail(http.post("/create", json={"split": "test", "index": 0}, headers=odd))


def test_unknown_sessions(http: httpx.Client) -> None:
    ghost = {"X-Session-ID": "ghost"}
    assert http.post("/step", json={"action": {"content": "1"}}, headers=ghost).status_code == 404
    assert http.get("/state", headers=ghost).status_code == 404
    assert http.post("/sessions/ghost/fork").status_code == 404
    assert http.delete("/sessions/ghost").status_code == 404
    assert http.post("/ping", headers=ghost).status_code == 404
    assert http.get("/calc/prompt", headers=ghost).status_code == 404
    assert http.post("/calc/call", json={"name": "calc", "input": {}}, headers=ghost).status_code == 404


def test_huge_and_deep_bodies(http: httpx.Client) -> None:
    huge = b'{"seed": 0, "pad": "' + b"x" * 40_000 + b'"}'
    reply = http.post("/reset", content=huge)
    assert reply.status_code == 413 and "16384" in _detail(reply)

    def chunks() -> Iterator[bytes]:  # no Content-Length: caught as it streams
        yield b'{"pad": "'
        for _ in range(40):
            yield b"y" * 1024
        yield b'"}'

    assert http.post("/reset", content=chunks()).status_code == 413
    deep = b'{"a": ' * 200 + b"1" + b"}" * 200
    reply = http.post("/reset", content=deep)
    assert reply.status_code == 422 and "nested" in _detail(reply)
    rpc = b'{"jsonrpc": "2.0", "method": "tools/list", "params": ' + b"[" * 500 + b"]" * 500 + b"}"
    assert http.post("/mcp", content=rpc).json()["error"]["code"] == -32700
    assert http.get("/health").status_code == 200


def test_steps_after_the_end_and_at_once(http: httpx.Client) -> None:
    sid = http.post("/reset", json={"env": "calc"}).headers["x-session-id"]
    header = {"X-Session-ID": sid}
    assert http.post("/step", json={"action": {"content": "1"}}, headers=header).json()["done"] is True
    late = http.post("/step", json={"action": {"content": "2"}}, headers=header)
    assert late.status_code == 409 and "done" in _detail(late)
    # two steps of one session at once: one runs, the other is refused (never queued behind it)
    sid = http.post("/reset", json={"env": "slow"}).headers["x-session-id"]
    call = {"id": "c", "type": "function", "function": {"name": "slow", "arguments": '{"seconds": 0.6}'}}
    replies: list[httpx.Response] = []

    def step() -> None:
        replies.append(
            http.post("/step", json={"action": {"tool_calls": [call]}}, headers={"X-Session-ID": sid})
        )

    threads = [threading.Thread(target=step) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status_code for r in replies) == [200, 409]
    assert "already running" in _detail(next(r for r in replies if r.status_code == 409))
    assert http.get("/state", headers={"X-Session-ID": sid}).json()["step_count"] == 1
    assert http.post(f"/sessions/{sid}/fork").status_code == 200
    # a session closed while its step runs: the step is answered (409), not left hanging
    replies.clear()
    waiting = threading.Thread(target=step)
    waiting.start()
    while http.get(f"/sessions/{sid}").status_code == 200 and not server_busy(http, sid):
        pass
    assert http.delete(f"/sessions/{sid}").status_code == 200
    waiting.join(timeout=10)
    assert not waiting.is_alive() and replies[0].status_code == 409 and "closed" in _detail(replies[0])


def server_busy(http: httpx.Client, sid: str) -> bool:
    """Whether the session's step has started (its turn count moved on)."""
    return bool(http.get("/state", headers={"X-Session-ID": sid}).json()["step_count"] == 2)


def test_a_full_server_says_when_to_retry(server: EnvServer, http: httpx.Client) -> None:
    sids = [http.post("/reset", json={}).headers["x-session-id"] for _ in range(4)]
    full = http.post("/reset", json={})
    assert full.status_code == 429 and full.headers["retry-after"] == "1" and "full" in _detail(full)
    assert (
        http.post("/create", json={"split": "test", "index": 0}, headers={"X-Session-ID": "o"}).status_code
        == 429
    )
    assert http.post(f"/sessions/{sids[0]}/fork").status_code == 429
    with connect(f"ws://127.0.0.1:{server.port}/ws", additional_headers=AUTH) as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        refused = json.loads(ws.recv())
        assert refused["data"]["code"] == "CAPACITY_REACHED"
        with pytest.raises(ConnectionClosed):
            ws.recv()
    http.delete(f"/sessions/{sids[0]}")
    assert http.post("/reset", json={}).status_code == 200


def test_garbage_over_the_websocket(server: EnvServer) -> None:
    server.table.close_all()

    def ask(ws: Any, raw: str) -> dict[str, Any]:
        ws.send(raw)
        return dict(json.loads(ws.recv()))

    with connect(f"ws://127.0.0.1:{server.port}/ws", additional_headers=AUTH) as ws:
        assert ask(ws, "{oops")["data"]["code"] == "INVALID_JSON"
        assert ask(ws, "[1]")["data"]["code"] == "VALIDATION_ERROR"
        assert ask(ws, json.dumps({"type": "dance"}))["data"]["code"] == "UNKNOWN_TYPE"
        assert (
            ask(ws, json.dumps({"type": "step", "data": {"content": "1"}}))["data"]["code"]
            == "EXECUTION_ERROR"
        )
        assert (
            ask(ws, json.dumps({"type": "reset", "data": {"seed": -4}}))["data"]["code"] == "VALIDATION_ERROR"
        )
        assert ask(ws, "[" * 300 + "]" * 300)["data"]["code"] in ("INVALID_JSON", "VALIDATION_ERROR")
        assert ask(ws, json.dumps({"type": "reset", "data": {}}))["type"] == "observation"
        assert (
            ask(ws, json.dumps({"type": "step", "data": {"content": 7}}))["data"]["code"]
            == "VALIDATION_ERROR"
        )
        done = ask(ws, json.dumps({"type": "step", "data": {"content": "1"}}))
        assert done["data"]["done"] is True
        late = ask(ws, json.dumps({"type": "step", "data": {"content": "1"}}))
        assert late["data"]["code"] == "EXECUTION_ERROR" and "done" in late["data"]["message"]
        ws.send("x" * 20_000)  # past the message cap: the server closes the socket
        with pytest.raises(ConnectionClosed):
            ws.recv()
    assert not server.table.live  # the socket's session went with it
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:  # not even HTTP
        raw.sendall(b"\x00\xff garbage\r\n\r\n")
        raw.recv(1024)
    with httpx.Client(base_url=server.url, timeout=10) as bare:
        assert bare.get("/health").status_code == 200
