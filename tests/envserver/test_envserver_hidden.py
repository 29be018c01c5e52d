"""``Task.info`` and ``Task.answer`` never leave ``verigym env-server``: an environment whose tasks hide
canaries (in ``info``, in the answer, in the episode's state, in a grade's detail) is driven over every
route of both surfaces, and no response body, header or WebSocket message carries a canary.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from verigym.envs.tool import ToolEnv
from verigym.envserver import EnvServer
from verigym.rubric import Grader, Rubric
from verigym.tools import State
from verigym.types import Grade, Message, Task, Trajectory

INFO, ANSWER, STATE = "canary-info-7f3a9c", "canary-answer-51d2e8", "canary-state-c4b1d0"


def _graded(task: Task, trajectory: Trajectory) -> Grade:
    right = trajectory.final_text.strip() == task.answer
    return Grade(score=float(right), detail=f"expected {task.answer}, hidden {task.info['secret']}")


def lookup(key: str, state: State) -> str:
    """Look a key up in the episode's notebook."""
    return "found" if key in state["notebook"] else "missing"


class VaultEnv(ToolEnv):
    """Tasks whose info, answer and per-episode state hold canaries."""

    name = "vault"
    description = "A task with hidden data."

    def __init__(self) -> None:
        super().__init__([lookup], rubric=Rubric([Grader(_graded, name="right")]), max_turns=3)

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        if split == "validation":
            raise ValueError("no validation split")
        prompt = (Message(role="user", content="What is the word?"),)
        return [
            Task(id=f"vault-{split}-{seed}-{i}", prompt=prompt, answer=ANSWER, info={"secret": INFO})
            for i in range(n if n is not None else 4)
        ]

    def setup_state(self, task: Task) -> dict[str, Any]:
        return {"notebook": [STATE, task.info["secret"]]}


@pytest.fixture(scope="module")
def server() -> Iterator[EnvServer]:
    with EnvServer({"vault": VaultEnv()}) as srv:
        yield srv


def _clean(text: str) -> None:
    for canary in (INFO, ANSWER, STATE):
        assert canary not in text


def test_no_route_leaks_hidden_data(server: EnvServer) -> None:
    seen: list[str] = []

    def keep(response: httpx.Response) -> httpx.Response:
        assert response.status_code == 200, response.text
        seen.append(response.text + json.dumps(dict(response.headers)))
        return response

    call = {"id": "c", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "x"}'}}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        sid = keep(http.post("/reset", json={"index": 1})).headers["x-session-id"]
        header = {"X-Session-ID": sid}
        keep(http.post("/step", json={"action": {"tool_calls": [call]}}, headers=header))
        keep(http.get("/state", headers=header))
        keep(http.get(f"/sessions/{sid}"))
        fork = keep(http.post(f"/sessions/{sid}/fork")).headers["x-session-id"]
        keep(http.post("/step", json={"action": {"content": "guess"}}, headers=header))
        keep(http.post("/step", json={"action": {"content": "guess"}}, headers={"X-Session-ID": fork}))
        keep(http.get(f"/sessions/{sid}"))
        for path in (
            "/schema",
            "/metadata",
            "/health",
            "/list_environments",
            "/vault/splits",
            "/vault/tools",
        ):
            keep(http.get(path))
        for path, body in (
            ("/vault/tasks", {"split": "test"}),
            ("/vault/num_tasks", {"split": "test"}),
            ("/vault/task", {"split": "train", "index": 2}),
            ("/vault/task_range", {"split": "test", "start": 0, "stop": 3}),
        ):
            keep(http.post(path, json=body))
        ors = {"X-Session-ID": "ors-1"}
        keep(http.post("/create", json={"split": "test", "index": 0}, headers=ors))
        keep(http.get("/vault/prompt", headers=ors))
        keep(http.get("/vault/task_tools", headers=ors))
        keep(http.post("/vault/call", json={"name": "lookup", "input": {"key": "y"}}, headers=ors))
        final = keep(
            http.post("/vault/call", json={"name": "answer", "input": {"content": "no"}}, headers=ors)
        )
        assert '"finished": true' in final.text
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        keep(http.post("/mcp", json=rpc))
    with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
        for message in (
            {"type": "reset", "data": {"index": 3}},
            {"type": "step", "data": {"tool_calls": [call]}},
            {"type": "state"},
            {"type": "mcp", "data": rpc},
            {"type": "step", "data": {"content": "guess"}},
        ):
            ws.send(json.dumps(message))
            seen.append(ws.recv())  # type: ignore[arg-type]
    assert len(seen) == 29
    assert any('"done": true' in s or '"done":true' in s for s in seen)  # the episodes did end and score
    for text in seen:
        _clean(text)


def test_grade_details_are_shared_only_when_asked() -> None:
    with (
        EnvServer({"vault": VaultEnv()}, share_grade_details=True) as srv,
        httpx.Client(base_url=srv.url) as http,
    ):
        sid = http.post("/reset", json={}).headers["x-session-id"]
        done = http.post("/step", json={"action": {"content": "guess"}}, headers={"X-Session-ID": sid}).json()
    assert ANSWER in done["observation"]["score"]["grades"]["right"]["detail"]  # a leak would be seen
