"""``POST /sessions/{id}/fork``: a live session copied mid-episode (wordle, calc), both branches continued
differently and each graded as the local harness grades the same turns; the source untouched by the fork's
steps; an environment whose replay differs refuses the fork (409) rather than hand back another state.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest

from verigym.envs.base import MultiTurnEnv
from verigym.envs.registry import load_env
from verigym.envserver import EnvServer
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Grader, Rubric
from verigym.runner import rollout_group
from verigym.types import Grade, Message, Sampling, Task, Trajectory


class DriftingEnv(MultiTurnEnv):
    """A harness whose replies are fresh random ids: it cannot be replayed."""

    name = "drift"

    def __init__(self) -> None:
        super().__init__(rubric=Rubric([Grader(lambda t, tr: Grade(score=1.0), name="any")]), max_turns=3)

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return [Task(id=f"drift-{i}", prompt=(Message(role="user", content="go"),)) for i in range(n or 2)]

    async def respond(self, trajectory: Trajectory, state: dict[str, Any]) -> list[Message]:
        return [Message(role="user", content=uuid.uuid4().hex)]


@pytest.fixture(scope="module")
def server() -> Iterator[EnvServer]:
    envs = {"wordle": load_env("wordle"), "calc": load_env("calc"), "drift": DriftingEnv()}
    with EnvServer(envs) as srv:
        yield srv


def _local_score(env_name: str, index: int, replies: Sequence[str]) -> tuple[float | None, dict[str, float]]:
    """The reward and grades the local harness gives the same turns of the same task."""
    env = load_env(env_name)
    task = env.tasks(index + 1, seed=0, split="test")[index]
    turns = iter(replies)
    policy = ScriptedPolicy(lambda messages: next(turns), name="replay")
    ((_, score),) = asyncio.run(rollout_group(env, policy, task, samples=1, sampling=Sampling()))
    return score.reward, {k: g.score for k, g in score.grades.items()}


def _step(http: httpx.Client, sid: str, content: str) -> dict[str, Any]:
    reply = http.post("/step", json={"action": {"content": content}}, headers={"X-Session-ID": sid})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _graded(result: dict[str, Any]) -> tuple[float | None, dict[str, float]]:
    assert result["done"] is True
    return result["reward"], {k: g["score"] for k, g in result["observation"]["score"]["grades"].items()}


def test_a_forked_wordle_game_continues_two_ways_each_graded_on_its_own(server: EnvServer) -> None:
    secret = load_env("wordle").tasks(3, seed=0, split="test")[2].info["secret"]
    wrong = [
        w for w in ("about", "above", "actor", "adult", "after", "again", "agent", "agree") if w != secret
    ]
    with httpx.Client(base_url=server.url, timeout=30) as http:
        start = http.post("/reset", json={"env": "wordle", "index": 2})
        sid = start.headers["x-session-id"]
        first = _step(http, sid, f"<guess>{wrong[0]}</guess>")
        forked = http.post(f"/sessions/{sid}/fork")
        assert forked.status_code == 200, forked.text
        fid = forked.headers["x-session-id"]
        assert fid != sid
        copy = forked.json()["observation"]
        assert copy["messages"] == first["observation"]["messages"] and copy["turn"] == 1
        # branch A (the fork) solves it; branch B (the source) keeps guessing wrong words
        solved = _graded(_step(http, fid, f"<guess>{secret}</guess>"))
        result = first
        for word in wrong[1:]:
            result = _step(http, sid, f"<guess>{word}</guess>")
            if result["done"]:
                break
        missed = _graded(result)
    used = 1 + wrong[1:].index(word) + 1
    assert solved == _local_score("wordle", 2, [f"<guess>{wrong[0]}</guess>", f"<guess>{secret}</guess>"])
    assert missed == _local_score("wordle", 2, [f"<guess>{w}</guess>" for w in wrong[:used]])
    assert solved[1]["solved"] == 1.0 and missed[1]["solved"] == 0.0


def test_a_fork_after_a_tool_call_keeps_the_tool_result(server: EnvServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        start = http.post("/reset", json={"env": "calc", "index": 0}).json()["observation"]
        sid = start["session_id"]
        expr = start["messages"][-1]["content"].rstrip("=")
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "calc", "arguments": f'{{"expr": "{expr}"}}'},
        }
        after = http.post(
            "/step", json={"action": {"tool_calls": [call]}}, headers={"X-Session-ID": sid}
        ).json()
        product = after["observation"]["reply"][0]["content"]
        fid = http.post(f"/sessions/{sid}/fork").json()["observation"]["session_id"]
        right, wrong = _step(http, sid, product), _step(http, fid, "0")
    assert (right["reward"], wrong["reward"]) == (1.0, 0.0)
    assert wrong["observation"]["score"]["grades"]["tool_call_ok"]["score"] == 1.0  # the fork kept the call


def test_forks_refuse_what_they_cannot_copy(server: EnvServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        sid = http.post("/reset", json={"env": "drift"}).headers["x-session-id"]
        _step(http, sid, "hello")
        refused = http.post(f"/sessions/{sid}/fork")
        assert refused.status_code == 409
        assert "different state" in refused.json()["detail"]
        assert http.post("/sessions/nope/fork").status_code == 404
        # a fork of a session at its start (no steps) is a plain copy
        fresh = http.post("/reset", json={"env": "drift"}).headers["x-session-id"]
        assert http.post(f"/sessions/{fresh}/fork").status_code == 200
    live = server.table.live
    assert all(s.ref.env != "drift" or s.turn <= 1 for s in live.values())
