"""The search environment: check-env conformance, its knowledge base and its answer grader."""

from __future__ import annotations

import asyncio

import pytest

from verigym.envs.builtin.search import SearchEnv, build_kb
from verigym.envs.check import check_env
from verigym.envs.registry import EnvArgError, load_env
from verigym.types import Message, Task, Trajectory, Turn


def _reply(task: Task, text: str, state: dict | None = None) -> Trajectory:
    traj = Trajectory(task_id=task.id, prompt=list(task.prompt), state=state or {})
    traj.turns.append(Turn(source="model", messages=[Message(role="assistant", content=text)]))
    return traj


@pytest.mark.parametrize(
    ("args", "n"),
    [
        ({"level": 1}, 8),
        ({"level": 4}, 8),
    ],
)
def test_check_env_passes(args: dict, n: int) -> None:
    report = check_env(load_env("search", **args), n=n)
    assert report.ok, [f"{r.name}: {r.detail}" for r in report.failures]
    assert {r.name: r.status for r in report.results}["oracle"] == "pass"


def test_search_kb_and_grader() -> None:
    kb = build_kb(0, 30)
    assert build_kb(0, 30).page("P001") == kb.page("P001")
    assert len({e.name for e in kb.entities.values()}) == len(kb.entities)  # names unique
    assert "P003" in kb.search(kb.entities["P003"].name)
    env = SearchEnv(level=3)
    task = env.tasks(1)[0]
    grader = env.rubric.graders[0]
    right = asyncio.run(grader.grade(task, _reply(task, f"...\nAnswer: {task.answer.upper()}.")))
    wrong = asyncio.run(grader.grade(task, _reply(task, "Answer: Nobody")))
    assert (right.score, wrong.score) == (1.0, 0.0)
    with pytest.raises(EnvArgError):
        SearchEnv(level=9)
