"""MultiTurnEnv / SingleTurnEnv: each limit is its own stop reason; failures are errors, not answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verigym.envs.base import MultiTurnEnv, SingleTurnEnv
from verigym.policies.base import PolicyError
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Message, Sampling, Task, Trajectory

TASK = Task(id="t", prompt=(Message(role="user", content="count with me"),))


class Echo(MultiTurnEnv):
    """Answers every model turn with 'go on' and stops when the model says 'stop'."""

    def __init__(self, crash: bool = False, **kw: Any) -> None:
        super().__init__(system_prompt="sys", **kw)
        self.crash = crash

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return [TASK]

    def setup_state(self, task: Task) -> dict[str, Any]:
        return {"replies": 0}

    async def respond(self, trajectory: Trajectory, state: dict[str, Any]) -> list[Message]:
        if self.crash:
            raise KeyError("db")
        state["replies"] += 1
        return [Message(role="user", content="go on")]

    async def done(self, trajectory: Trajectory, state: dict[str, Any]) -> bool:
        return trajectory.final_text == "stop"


class One(SingleTurnEnv):
    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return [TASK]


def talker(stop_after: int = 100, words: int = 1) -> ScriptedPolicy:
    def reply(messages: Sequence[Message]) -> str:
        turns = sum(m.role == "assistant" for m in messages)
        return "stop" if turns >= stop_after else " ".join(["word"] * words)

    return ScriptedPolicy(reply)


async def test_done_and_state_and_system_prompt() -> None:
    traj = await Echo().rollout(TASK, talker(stop_after=2), Sampling())
    assert traj.stop_reason == "done" and traj.error is None
    assert traj.prompt[0] == Message(role="system", content="sys")
    assert [t.source for t in traj.turns] == ["model", "env", "model", "env", "model"]
    assert traj.state == {"replies": 2} and traj.wall_s > 0


async def test_limits_have_distinct_stop_reasons() -> None:
    assert (await Echo(max_turns=3).rollout(TASK, talker(), Sampling())).stop_reason == "max_turns"
    budget = await Echo(max_total_tokens=5).rollout(TASK, talker(words=2), Sampling())
    assert budget.stop_reason == "max_tokens" and len(budget.completions) == 3
    slow = ScriptedPolicy(lambda m: "more", delay_s=0.05)
    assert (await Echo(timeout_s=0.12).rollout(TASK, slow, Sampling())).stop_reason == "timeout"
    cut = await One().rollout(TASK, talker(words=10), Sampling(max_tokens=3))
    assert cut.stop_reason == "length" and cut.final_text == "word word word"


async def test_failures_are_errors_not_answers() -> None:
    def down(messages: Sequence[Message]) -> str:
        raise PolicyError("http", "503 from server", retryable=True)

    failed = await One().rollout(TASK, ScriptedPolicy(down), Sampling())
    assert failed.stop_reason == "error" and failed.error is not None
    assert (failed.error.kind, failed.error.message) == ("http", "503 from server")
    crashed = await Echo(crash=True).rollout(TASK, talker(), Sampling())
    assert crashed.stop_reason == "error" and crashed.error is not None
    assert crashed.error.kind == "environment" and "KeyError" in crashed.error.message
