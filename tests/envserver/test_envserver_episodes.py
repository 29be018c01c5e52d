"""Episodes on ``verigym env-server`` end as the local harness ends them: an environment that raises and a
rubric that cannot score are errors with their reason and no reward (never a 0); the harness's limits end
an episode with their stop reason; and 64 sessions at once each get their own episode.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from verigym.envs.base import MultiTurnEnv
from verigym.envs.registry import load_env
from verigym.envserver import EnvServer
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Message, Task, Trajectory


def _broken_grader(task: Task, trajectory: Trajectory) -> Grade:
    raise RuntimeError("judge unreachable")


class FragileEnv(MultiTurnEnv):
    """Answers 'again' until the model says 'crash' (the harness raises) or 'stop'."""

    name = "fragile"

    def __init__(self, *, broken_rubric: bool = False) -> None:
        grader = _broken_grader if broken_rubric else (lambda t, tr: Grade(score=1.0))
        super().__init__(rubric=Rubric([Grader(grader, name="g")]), max_turns=3, max_total_tokens=50)

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return [
            Task(id=f"fragile-{i}", prompt=(Message(role="user", content="talk"),)) for i in range(n or 4)
        ]

    async def respond(self, trajectory: Trajectory, state: dict[str, Any]) -> list[Message]:
        if trajectory.final_text == "crash":
            raise ValueError("the harness fell over")
        return [Message(role="user", content="again")]

    async def done(self, trajectory: Trajectory, state: dict[str, Any]) -> bool:
        return trajectory.final_text == "stop"


@pytest.fixture(scope="module")
def server() -> Iterator[EnvServer]:
    envs = {"fragile": FragileEnv(), "unscored": FragileEnv(broken_rubric=True), "calc": load_env("calc")}
    with EnvServer(envs, max_sessions=128) as srv:
        yield srv


def _play(http: httpx.Client, env: str, turns: list[dict[str, Any]]) -> dict[str, Any]:
    reply = http.post("/reset", json={"env": env})
    sid = reply.headers["x-session-id"]
    result: dict[str, Any] = reply.json()
    for action in turns:
        result = http.post("/step", json={"action": action}, headers={"X-Session-ID": sid}).json()
    return result


def test_errors_are_not_zeros(server: EnvServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        crashed = _play(http, "fragile", [{"content": "crash"}])
        unscored = _play(http, "unscored", [{"content": "stop"}])
        fine = _play(http, "fragile", [{"content": "stop"}])
    assert crashed["done"] is True and crashed["reward"] is None
    obs = crashed["observation"]
    assert obs["stop_reason"] == "error"
    assert obs["error"]["kind"] == "environment" and "the harness fell over" in obs["error"]["message"]
    assert unscored["done"] is True and unscored["reward"] is None
    assert unscored["observation"]["error"]["kind"] == "grader"
    grade = unscored["observation"]["score"]["grades"]["g"]
    assert grade["score"] is None and "judge unreachable" in grade["error"]
    assert (fine["reward"], fine["observation"]["error"]) == (1.0, None)


def test_the_harness_limits_end_episodes(server: EnvServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        long = _play(http, "fragile", [{"content": "more"}] * 3)
        spent = _play(http, "fragile", [{"content": "more", "usage": {"completion_tokens": 60}}])
        first = http.post("/reset", json={"env": "fragile"}).json()["observation"]
        budget = _play(http, "fragile", [{"content": "more", "usage": {"completion_tokens": 30}}])
    assert (long["done"], long["observation"]["stop_reason"], long["observation"]["turn"]) == (
        True,
        "max_turns",
        3,
    )
    assert (spent["done"], spent["observation"]["stop_reason"]) == (True, "max_tokens")
    assert first["sampling"]["max_tokens"] == 50  # the episode's token budget caps the turn
    assert budget["observation"]["sampling"]["max_tokens"] == 20  # 50 less the 30 spent


def test_sixty_four_sessions_at_once(server: EnvServer) -> None:
    async def episode(i: int) -> tuple[str, float | None]:
        async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"env": "calc", "index": i}}))
            obs = json.loads(await ws.recv())["data"]["observation"]
            a, b = obs["messages"][-1]["content"].rstrip("=").split("*")
            call = {
                "id": "c",
                "type": "function",
                "function": {"name": "calc", "arguments": json.dumps({"expr": f"{a}*{b}"})},
            }
            await ws.send(json.dumps({"type": "step", "data": {"tool_calls": [call]}}))
            result = json.loads(await ws.recv())["data"]
            await asyncio.sleep(0.01 * (i % 5))  # interleave
            await ws.send(
                json.dumps(
                    {"type": "step", "data": {"content": result["observation"]["reply"][0]["content"]}}
                )
            )
            done = json.loads(await ws.recv())["data"]
            return done["observation"]["task_id"], done["reward"]

    async def run() -> list[tuple[str, float | None]]:
        return list(await asyncio.gather(*(episode(i) for i in range(64))))

    results = asyncio.run(run())
    assert [r[0] for r in results] == [t.id for t in load_env("calc").tasks(64, seed=0, split="test")]
    assert all(r[1] == 1.0 for r in results)
    assert not [s for s in server.table.live.values() if s.ref.env == "calc"]  # each closed with its socket
