"""The rubric_writing environment: check-env conformance and its judge, which is any policy."""

from __future__ import annotations

import asyncio

import pytest

from verigym.envs.builtin.rubric_writing import RubricWritingEnv
from verigym.envs.check import check_env
from verigym.envs.registry import EnvArgError, load_env
from verigym.policies.openai import OpenAIPolicy
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Message, Sampling, Task, Trajectory, Turn


def _reply(task: Task, text: str, state: dict | None = None) -> Trajectory:
    traj = Trajectory(task_id=task.id, prompt=list(task.prompt), state=state or {})
    traj.turns.append(Turn(source="model", messages=[Message(role="assistant", content=text)]))
    return traj


@pytest.mark.parametrize(
    ("args", "n"),
    [
        ({"level": 3}, 8),
    ],
)
def test_check_env_passes(args: dict, n: int) -> None:
    report = check_env(load_env("rubric_writing", **args), n=n)
    assert report.ok, [f"{r.name}: {r.detail}" for r in report.failures]
    assert {r.name: r.status for r in report.results}["oracle"] == "pass"


def test_rubric_writing_judge_is_any_policy() -> None:
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
