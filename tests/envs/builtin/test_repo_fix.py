"""The repo_fix environment: check-env conformance, grading that can fail, tampering, path escapes."""

from __future__ import annotations

import asyncio
import json

import pytest

from verigym.envs.builtin.repo_fix import RepoFixEnv, run_tests_in_sandbox
from verigym.envs.check import check_env
from verigym.envs.registry import load_env
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Message, Sampling, Task, ToolCall, Trajectory, Turn


def _reply(task: Task, text: str, state: dict | None = None) -> Trajectory:
    traj = Trajectory(task_id=task.id, prompt=list(task.prompt), state=state or {})
    traj.turns.append(Turn(source="model", messages=[Message(role="assistant", content=text)]))
    return traj


@pytest.mark.parametrize(
    ("args", "n"),
    [
        ({"level": 2}, 4),
    ],
)
def test_check_env_passes(args: dict, n: int) -> None:
    report = check_env(load_env("repo_fix", **args), n=n)
    assert report.ok, [f"{r.name}: {r.detail}" for r in report.failures]
    assert {r.name: r.status for r in report.results}["oracle"] == "pass"


def test_repo_fix_grading_and_tampering() -> None:
    env = RepoFixEnv(level=1, graders="tests")  # the unit-test grader and the penalty alone
    task = env.tasks(1, seed=3)[0]
    files = dict(task.info["repo_files"])
    visible = run_tests_in_sandbox(files)
    assert any(outcome != "passed" for outcome, _ in visible.values())  # the bug shows in visible tests

    async def score(final: dict) -> tuple[float | None, dict]:
        s = await env.rubric.score(task, _reply(task, "done", {"files": final}))
        return s.reward, {k: g.score for k, g in s.grades.items()}

    assert asyncio.run(score(files))[0] == 0.0  # unchanged: FAIL_TO_PASS fails
    fixed = {**files, **task.info["fixed"]}
    assert asyncio.run(score(fixed))[0] == 1.0
    # deleting the failing visible test resolves nothing (hidden tests are put back) and is tampering
    cheat = {**files, **{p: "" for p in files if p.startswith("tests/")}}
    reward, grades = asyncio.run(score(cheat))
    assert grades["penalty:hacking"] == 1.0 and reward is not None and reward < 0
    # a fix plus a test edit: resolved but penalised to 0
    reward, _ = asyncio.run(score({**fixed, "tests/conftest.py": "import sys\n"}))
    assert reward == 0.0
    # a broken module (syntax error) fails PASS_TO_PASS too
    broken = {**files, **{p: "def oops(:\n" for p in task.info["fixed"]}}
    assert asyncio.run(score(broken))[0] == 0.0


def test_repo_fix_tools_refuse_escaping_paths() -> None:
    env = RepoFixEnv()
    task = env.tasks(1)[0]
    calls = [ToolCall(id="1", name="write_file", arguments=json.dumps({"path": "../x.py", "content": "x"}))]
    policy = ScriptedPolicy(
        lambda m: ("", calls) if not any(x.role == "tool" for x in m) else "done", name="escape"
    )
    traj = asyncio.run(env.rollout(task, policy, Sampling()))
    tool_msg = next(m for m in traj.messages if m.role == "tool")
    assert tool_msg.content.startswith("Error:") and "relative" in tool_msg.content
    assert "../x.py" not in traj.state["files"]
