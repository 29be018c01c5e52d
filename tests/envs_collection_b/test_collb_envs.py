"""search, repo_fix and rubric_writing: check-env conformance, graders that can fail, judge wiring."""

from __future__ import annotations

import asyncio
import json

import pytest

from verigym.envs.builtin.repo_fix import RepoFixEnv, run_tests_in_sandbox
from verigym.envs.builtin.rubric_writing import RubricWritingEnv
from verigym.envs.builtin.search import SearchEnv, build_kb
from verigym.envs.check import check_env
from verigym.envs.registry import EnvArgError, load_env
from verigym.policies.openai import OpenAIPolicy
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Message, Sampling, Task, ToolCall, Trajectory, Turn


def _reply(task: Task, text: str, state: dict | None = None) -> Trajectory:
    traj = Trajectory(task_id=task.id, prompt=list(task.prompt), state=state or {})
    traj.turns.append(Turn(source="model", messages=[Message(role="assistant", content=text)]))
    return traj


@pytest.mark.parametrize(
    ("name", "args", "n"),
    [
        ("search", {"level": 1}, 8),
        ("search", {"level": 4}, 8),
        ("repo_fix", {"level": 2}, 4),
        ("rubric_writing", {"level": 3}, 8),
    ],
)
def test_collb_check_env_passes(name: str, args: dict, n: int) -> None:
    report = check_env(load_env(name, **args), n=n)
    assert report.ok, [f"{r.name}: {r.detail}" for r in report.failures]
    assert {r.name: r.status for r in report.results}["oracle"] == "pass"


def test_collb_search_kb_and_grader() -> None:
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


def test_collb_repo_fix_grading_and_tampering() -> None:
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


def test_collb_repo_fix_tools_refuse_escaping_paths() -> None:
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


def test_collb_rubric_writing_judge_is_any_policy() -> None:
    always_met = ScriptedPolicy(lambda m: '{"explanation": "ok", "criteria_met": true}', name="yes-judge")
    env = RubricWritingEnv(judge=always_met)
    task = env.tasks(1)[0]
    text = " ".join(["word"] * 20)
    score = asyncio.run(env.rubric.score(task, _reply(task, text)))
    # every criterion "met" by this judge, the negative one included: (pos - 2) / pos, then + length
    pos = sum(c["points"] for c in task.info["rubric"] if c["points"] > 0)
    assert score.reward == pytest.approx(0.9 * (pos - 2) / pos + 0.1)
    stand_in = RubricWritingEnv()
    assert stand_in.judge_is_stand_in
    banned = task.info["rubric"][-1]["criterion"].split('"')[1]
    oracle_text = asyncio.run(
        stand_in.oracle_policy().complete(list(stand_in.tasks(1)[0].prompt), sampling=Sampling())
    ).text
    assert banned not in oracle_text
    remote = RubricWritingEnv(judge_base_url="http://127.0.0.1:9/v1", judge_model="judge")
    assert isinstance(remote.judge, OpenAIPolicy) and not remote.judge_is_stand_in
    with pytest.raises(EnvArgError):
        RubricWritingEnv(judge=always_met, judge_base_url="http://127.0.0.1:9/v1")
