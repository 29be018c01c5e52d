"""The bfcl environment and the tool-call grader's BFCL mode, on rows copied from bfcl-eval's data."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from verigym.envs.builtin.bfcl import BfclEnv, bfcl_data_dir, load_bfcl, oracle_calls, to_openai_tool
from verigym.envs.check import check_env
from verigym.envs.datasets import DatasetError
from verigym.envs.registry import EnvArgError, load_env
from verigym.graders.toolcall import Call, bfcl_string, match_any, toolcall_grader
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Sampling, Task, ToolCall

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "bfcl" / "BFCL_sample.json"


def task(task_id: str) -> Task:
    return next(t for t in load_bfcl(FIXTURE) if t.id == task_id)


def verdict(t: Task, calls: list[Call], strings: str = "bfcl") -> bool:
    return match_any(calls, t.info["answers"], t.info["functions"], strings=strings).ok


def gold(t: Task) -> list[Call]:
    return [Call(c.name, c.parsed_arguments()) for c in oracle_calls(t)]


def test_check_env_passes_on_the_fixture() -> None:
    report = check_env(load_env("bfcl", path=str(FIXTURE)), n=10)
    assert report.ok, report.failures
    details = {r.name: r.detail for r in report.results}
    assert "1.000" in details["oracle"] and "0.000" in details["null"]


def test_every_gold_answer_is_accepted_through_a_rollout() -> None:
    env = BfclEnv(path=str(FIXTURE))
    tasks = env.tasks()
    oracle = env.oracle_policy()

    async def run() -> list[float | None]:
        trajs = await asyncio.gather(*(env.rollout(t, oracle, Sampling()) for t in tasks))
        return [(await env.rubric.score(t, tr)).reward for t, tr in zip(tasks, trajs, strict=True)]

    assert asyncio.run(run()) == [1.0] * len(tasks)


def test_bfcl_strings_ignore_punctuation_and_case_strict_does_not() -> None:
    t = task("simple_python_187")
    call = [Call("get_current_weather", {"location": "seattle washington"})]
    assert verdict(t, call, "bfcl")
    assert not verdict(t, call, "strict")
    assert bfcl_string("Seattle, WA") == bfcl_string("seattle wa") == "seattlewa"
    assert not verdict(t, [Call("get_current_weather", {"location": "Portland"})], "bfcl")


def test_variable_reference_string_for_an_array_parameter() -> None:
    t = task("parallel_multiple_21")
    calls = gold(t)
    assert verdict(t, calls)
    assert any(c.arguments.get("x") == "data['sales']" for c in calls)
    wrong = [Call(c.name, {**c.arguments, "x": "data['other']"}) if "x" in c.arguments else c for c in calls]
    assert not verdict(t, wrong)


def test_strings_in_an_integer_array_answer() -> None:
    t = task("parallel_multiple_94")
    calls = gold(t)
    assert verdict(t, calls)
    assert any(
        c.arguments.get("elements") == ["apple", "banana", "cherry", "date", "elderberry"] for c in calls
    )


def test_parallel_calls_match_in_any_order() -> None:
    t = task("parallel_178")
    calls = gold(t)
    assert verdict(t, list(reversed(calls)))  # BFCL's greedy matcher rejects this order
    assert not verdict(t, calls[:-1])
    assert not verdict(t, [*calls, calls[0]])


def test_nested_dict_answers_and_wrong_values() -> None:
    t = task("simple_python_89")
    (call,) = gold(t)
    assert verdict(t, [call])
    conditions = dict(call.arguments["conditions"], department="History")
    assert not verdict(t, [Call(call.name, {**call.arguments, "conditions": conditions})])


def test_tools_use_safe_names_and_json_schema_types() -> None:
    t = task("parallel_multiple_21")
    names = [tool["function"]["name"] for tool in t.info["tools"]]
    assert all("." not in n for n in names)
    assert t.info["bfcl_names"]  # safe name -> BFCL name
    doc = {"name": "a.b", "parameters": {"type": "dict", "properties": {"x": {"type": "float"},
           "t": {"type": "tuple", "items": {"type": "any"}}}}}  # fmt: skip
    schema = to_openai_tool(doc)["function"]
    assert schema["name"] == "a_b"
    assert schema["parameters"]["type"] == "object"
    assert schema["parameters"]["properties"]["x"]["type"] == "number"
    assert schema["parameters"]["properties"]["t"] == {"type": "array", "items": {}}


def test_each_episode_offers_its_own_tools() -> None:
    env = BfclEnv(path=str(FIXTURE))
    t = env.tasks()[0]
    seen: list[object] = []

    class Spy(ScriptedPolicy):
        async def complete(self, messages, *, tools=None, sampling):  # type: ignore[no-untyped-def]
            seen.append(tools)
            return await super().complete(messages, tools=tools, sampling=sampling)

    spy = Spy(lambda m: ("", [ToolCall(id="1", name="x", arguments="{not json")]))
    traj = asyncio.run(env.rollout(t, spy, Sampling()))
    assert seen == [t.info["tools"]]
    score = asyncio.run(env.rubric.score(t, traj))
    assert score.reward == 0.0 and score.error is None  # malformed arguments are the model's failure


def test_bad_arguments_and_data_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(EnvArgError, match="category must be one of"):
        BfclEnv(category="java")
    with pytest.raises(EnvArgError, match="is not a file"):
        BfclEnv(path=str(tmp_path / "missing.json"))
    bad = tmp_path / "q.json"
    bad.write_text(json.dumps({"id": "a", "question": "hi", "function": []}) + "\n")
    with pytest.raises(DatasetError, match=r"q.json:1: field 'question'"):
        load_bfcl(bad, answers=None)
    bad.write_text(
        json.dumps({"id": "a", "question": [[{"role": "user", "content": "x"}]], "function": []}) + "\n"
    )
    with pytest.raises(DatasetError, match="no answer for id 'a'"):
        load_bfcl(bad)
    with pytest.raises(ValueError, match="strings must be one of"):
        toolcall_grader(strings="loose")


def test_default_data_comes_from_bfcl_eval_when_installed() -> None:
    if bfcl_data_dir() is None:
        with pytest.raises(EnvArgError, match="bfcl-eval is not installed"):
            BfclEnv()
    else:
        assert len(BfclEnv(category="parallel").tasks()) == 200
