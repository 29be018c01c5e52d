"""The calc environment: a product only a tool call can give, graded on the copied tool result;
``tool_call_ok`` (weight 0) tells a well-formed call on the asked expression from everything else."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from verigym.envs.builtin.calc import CalcEnv, calc
from verigym.envs.check import check_env
from verigym.envs.registry import EnvArgError, load_env
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.types import Message, Sampling, Score, Task, ToolCall


def play(env: CalcEnv, task: Task, policy: Policy) -> Score:
    async def go() -> Score:
        trajectory = await env.rollout(task, policy, Sampling(max_tokens=64))
        return await env.rubric.score(task, trajectory)

    return asyncio.run(go())


def scripted(first: Reply, answer: str | None = None) -> Policy:
    def fn(messages: Sequence[Message]) -> Reply:
        tool = next((m.content for m in reversed(messages) if m.role == "tool"), None)
        if tool is None:
            return first
        return tool if answer is None else answer

    return ScriptedPolicy(fn)


def call(expr: object, name: str = "calc") -> tuple[str, list[ToolCall]]:
    return "", [ToolCall(id="c", name=name, arguments=json.dumps({"expr": expr}))]


@pytest.mark.parametrize("kwargs", [{}, {"schema": "brief"}, {"verbose": True, "digits": 2}])
def test_check_env_passes(kwargs: dict[str, object]) -> None:
    report = check_env(CalcEnv(**kwargs))  # type: ignore[arg-type]
    assert report.ok, report.failures


def test_tasks_are_short_three_digit_products() -> None:
    for task in CalcEnv(schema="brief").tasks(30, seed=1):
        (msg,) = task.prompt
        a, b = msg.content.removesuffix("=").split("*")
        assert len(msg.content) == 8 and 100 <= int(a) <= 999 and 100 <= int(b) <= 999
        assert task.answer == str(int(a) * int(b))
    assert CalcEnv(schema="brief").tool_schemas() == [{"name": "calc"}]
    (full,) = CalcEnv().tool_schemas() or []
    assert full["function"]["name"] == "calc" and "expr" in full["function"]["parameters"]["properties"]


def test_calc_tool() -> None:
    assert calc("417*823") == "343191" and calc("2+3*4") == "14"
    with pytest.raises(ValueError):
        calc("__import__('os')")


def test_grades() -> None:
    env = CalcEnv()
    task = env.tasks(1, seed=0)[0]
    expr = task.prompt[0].content.removesuffix("=")

    def grades(policy: Policy) -> tuple[float, float]:
        s = play(env, task, policy)
        assert s.error is None
        return s.grades["correct"].score, s.grades["tool_call_ok"].score

    assert grades(env.oracle_policy()) == (1.0, 1.0)
    assert play(env, task, env.oracle_policy()).reward == 1.0  # tool_call_ok has weight 0
    assert grades(ScriptedPolicy(lambda m: task.answer or "")) == (0.0, 0.0)  # right, but no tool call
    assert grades(scripted(call(expr), answer="1")) == (0.0, 1.0)  # a good call, a wrong copy
    assert grades(scripted(call("1*1"), answer=task.answer)) == (0.0, 0.0)  # not the asked expression
    assert grades(scripted(call(expr, name="calculator"))) == (0.0, 0.0)  # unknown tool
    assert grades(scripted(call("12 times 3"))) == (0.0, 0.0)  # the tool rejects it
    assert grades(scripted(("see: " + call(expr)[0], call(expr)[1]))) == (1.0, 0.0)  # text beside it
    malformed = (
        f'<tool_call>{{"name": "calc", "arguments": {{"expr": "{expr}"}}</tool_call>'  # one brace short
    )
    assert grades(ScriptedPolicy(lambda m: malformed)) == (0.0, 0.0)


def test_null_scores_zero_and_bad_args_are_one_line() -> None:
    env = load_env("calc")
    task = env.tasks(1)[0]
    null = env.null_policy()
    assert null is not None and play(env, task, null).reward == 0.0  # type: ignore[arg-type]
    with pytest.raises(EnvArgError, match="schema"):
        load_env("calc", schema="tiny")
    with pytest.raises(EnvArgError, match="digits"):
        load_env("calc", digits=0)


def test_held_out_eval_reports_each_graders_mean() -> None:
    from verigym.train._model import evaluate

    env = CalcEnv(schema="brief")
    oracle, null = env.oracle_policy(), env.null_policy()
    assert oracle is not None and null is not None
    tasks = env.tasks(5)
    good = asyncio.run(evaluate(env, oracle, tasks, sampling=Sampling(max_tokens=64)))
    bad = asyncio.run(evaluate(env, null, tasks, sampling=Sampling(max_tokens=64)))
    assert good["grader/correct"] == good["grader/tool_call_ok"] == good["pass_at_1"] == 1.0
    assert bad["grader/correct"] == bad["grader/tool_call_ok"] == bad["pass_at_1"] == 0.0
