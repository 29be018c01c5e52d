"""The remote client on an OpenEnv server that is not verigym's: a stand-in for openenv 0.10's server
serving its ``openenv init`` template (the echo environment), written from openenv's wire shapes
(``WS /ws`` ``{"type": "reset"|"step", "data"}`` → ``{"type": "observation", "data": {observation,
reward, done}}``, ``GET /schema``, ``GET /metadata``; no task API). The real one runs in the bench venv
(``benchmarks/envserver_interop.py``): openenv cannot share the main venv.

The client maps the observation to one user message (its one text field), the model's reply to the
action's one string field, adds up the step rewards, and makes tasks from seeded resets.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, WebSocket, WebSocketDisconnect

import verigym
from verigym.envs.registry import load_env
from verigym.eval.store import load_records
from verigym.policies.scripted import ScriptedPolicy

ACTION = {
    "title": "EchoAction",
    "type": "object",
    "properties": {"metadata": {"type": "object"}, "message": {"type": "string"}},
    "required": ["message"],
}


def echo_app(resets: list[dict[str, Any]]) -> FastAPI:
    app = FastAPI()

    @app.get("/schema")
    async def schema() -> dict[str, Any]:
        return {"action": ACTION, "observation": {"type": "object"}, "state": {"type": "object"}}

    @app.get("/metadata")
    async def metadata() -> dict[str, Any]:
        return {"name": "EchoEnvironment", "description": "echoes"}

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.websocket("/ws")
    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        try:
            while True:
                message = json.loads(await socket.receive_text())
                if message["type"] == "close":
                    break
                if message["type"] == "reset":
                    resets.append(message["data"])
                    observation = {"echoed_message": "Echo environment ready!", "message_length": 0}
                    data = {"observation": observation, "reward": 0.0, "done": False}
                else:
                    text = message["data"]["message"]
                    observation = {"echoed_message": text, "message_length": len(text)}
                    data = {"observation": observation, "reward": min(len(text) * 0.1, 1.0), "done": False}
                await socket.send_text(json.dumps({"type": "observation", "data": data}))
        except WebSocketDisconnect:
            pass

    return app


@pytest.fixture()
def echo() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The stand-in on uvicorn with WebSockets, as openenv serves (its ``uvicorn server.app:app``)."""
    resets: list[dict[str, Any]] = []
    config = uvicorn.Config(
        echo_app(resets), host="127.0.0.1", port=0, ws="websockets-sansio", log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < end, "the echo server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", resets
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_stock_openenv_environment_is_evaluated_with_its_step_rewards(
    echo: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, resets = echo
    env = load_env(url, max_turns=2)
    assert env.protocol == "openenv" and not env.info.verigym and env.action_field == "message"  # type: ignore[attr-defined]
    tasks = env.tasks(6, seed=4)
    assert [t.id for t in tasks] == [f"test-4-{i}" for i in range(6)] and env.tasks(6, seed=4) == tasks
    talker = ScriptedPolicy(lambda messages: "hi" if len(messages) == 1 else "hello world!", name="talker")
    run = verigym.evaluate(env, talker, out=tmp_path / "run", num_tasks=6, seed=4)
    assert run.summary["n_errors"] == 0 and run.summary["reward_mean"] == pytest.approx(0.2 + 1.0)
    record = load_records(run.results_file)[0]
    assert record.trajectory.prompt[0].content == "Echo environment ready!"  # its one text field
    env_turns = [t.messages[0].content for t in record.trajectory.turns if t.source == "env"]
    assert env_turns == ["hi", "hello world!"] and record.trajectory.stop_reason == "max_turns"
    assert sorted(r["seed"] for r in resets) == sorted(t.info["remote"]["reset_seed"] for t in tasks)


def test_a_server_without_websockets_or_http_sessions_errors_saying_so(tmp_path: Path) -> None:
    from verigym._http_server import start_in_thread

    handle = start_in_thread(echo_app([]), name="no-ws")  # verigym's runner: no WebSocket library in use
    try:
        env = load_env(handle.url)
        run = verigym.evaluate(env, ScriptedPolicy(lambda m: "hi"), out=tmp_path / "run", num_tasks=2)
    finally:
        handle.stop()
    assert run.summary["n_errors"] == 2 and run.summary["errors_by_kind"] == {"env_server": 2}
    (record, _) = load_records(run.results_file)
    assert (
        record.error is not None
        and "no WebSocket (HTTP 404), and POST /reset: HTTP 404" in record.error.message
    )
