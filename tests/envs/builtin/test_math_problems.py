"""The math environment: templates with exact answers, GSM8K/MATH file loaders, three harnesses."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from verigym.envs.builtin._math_templates import TEMPLATES, counting, probability
from verigym.envs.builtin.math_problems import MathEnv, load_math_file, python
from verigym.envs.check import check_env
from verigym.envs.datasets import DatasetError
from verigym.envs.registry import EnvArgError, load_env
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.types import Message, Sampling, ToolCall, Trajectory, Turn


def reply(text: str) -> Trajectory:
    return Trajectory(
        task_id="t",
        prompt=[],
        turns=[Turn(source="model", messages=[Message(role="assistant", content=text)])],
    )


@pytest.mark.parametrize("harness", ["single", "python_tool", "self_check"])
def test_check_env_passes_under_each_harness(harness: str) -> None:
    report = check_env(load_env("math", harness=harness, level=3), n=4 if harness == "single" else 2)
    assert report.ok, report.failures


def test_levels_topics_and_exact_answers() -> None:
    for level in (1, 2, 3, 4):
        for topic in TEMPLATES:
            question, answer = TEMPLATES[topic](random.Random(level), level)
            assert question and answer and "." not in answer  # exact: integers, fractions, pi
    assert counting(random.Random(0), 3)[1] in {"60", "180", "420", "1260", "120", "45360", "140"}
    q, a = probability(random.Random(1), 3)
    n = int(q.split("rolled ")[1].split()[0])
    assert a == {2: "\\frac{11}{36}", 3: "\\frac{91}{216}"}[n]
    env = MathEnv(topics="geometry,counting")
    assert env.topics == ("geometry", "counting")
    with pytest.raises(EnvArgError, match="topic"):
        MathEnv(topics=["calculus"])
    with pytest.raises(EnvArgError, match="harness"):
        MathEnv(harness="chain")


async def test_grader_accepts_equivalent_and_rejects_wrong_answers() -> None:
    env = MathEnv(level=4, topics="geometry")
    task = env.tasks(1)[0]
    assert "\\pi" in (task.answer or "")
    right = await env.rubric.score(task, reply(f"So the area is \\boxed{{{task.answer}}}."))
    wrong = await env.rubric.score(task, reply("\\boxed{16}"))
    assert right.reward == 1.0 and wrong.reward == 0.0


def test_gsm8k_and_math_files(tmp_path: Path) -> None:
    gsm = tmp_path / "gsm.jsonl"
    rows = [
        {"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = 7\n#### 7"},
        {
            "question": "A farm sells 1,200 eggs a day. How many in 2 days?",
            "answer": "1200*2=2400\n#### 2,400",
        },
    ]
    gsm.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    tasks = load_math_file(gsm)
    assert [t.answer for t in tasks] == ["7", "2400"]
    assert tasks[0].info["solution"].endswith("#### 7") and "\\boxed{}" in tasks[0].prompt[0].content
    hendrycks = tmp_path / "math.jsonl"
    rows2 = [
        {
            "problem": "What is $1/2 + 1/4$?",
            "solution": "We get $\\boxed{\\frac{3}{4}}$.",
            "level": "Level 1",
        },
        {"problem": "Solve $x+1=3$.", "solution": "So $x=2$.", "answer": "2", "id": "m2"},
    ]
    hendrycks.write_text("\n".join(json.dumps(r) for r in rows2))
    env = MathEnv(path=str(hendrycks))
    tasks2 = env.tasks()
    assert [t.answer for t in tasks2] == ["\\frac{3}{4}", "2"] and tasks2[1].id == "m2"
    report = check_env(env, n=2)
    assert report.ok, report.failures
    with pytest.raises(DatasetError, match="only the 'test' split"):
        env.tasks(split="train")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"question": "q", "answer": "no marker"}', "must end with '#### <final answer>'"),
        ('{"problem": "p", "solution": "no box"}', "no \\\\boxed"),
        ('{"prompt": "p"}', "expected fields question/answer"),
        ("{not json", "invalid JSON"),
    ],
)
def test_malformed_rows_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "q", "answer": "#### 1"}\n' + line + "\n")
    with pytest.raises(DatasetError, match=rf"bad.jsonl:2: .*{message}"):
        MathEnv(path=str(path)).tasks()


def test_python_tool_runs_in_the_sandbox() -> None:
    assert python("from fractions import Fraction\nprint(Fraction(1, 3) + Fraction(1, 6))").strip() == "1/2"
    assert "exit code 1" in python("raise SystemExit(1)")
    assert "ZeroDivisionError" in python("1/0")


async def test_self_check_grades_the_second_answer() -> None:
    env = MathEnv(harness="self_check", level=1)
    task = env.tasks(1)[0]

    def fix_it(messages: Sequence[Message]) -> Reply:
        return "\\boxed{0}" if len(messages) == 1 else f"Oops. \\boxed{{{task.answer}}}"

    traj = await env.rollout(task, ScriptedPolicy(fix_it), Sampling())
    assert [t.source for t in traj.turns] == ["model", "env", "model"]
    assert "Check your solution" in traj.turns[1].messages[0].content
    assert (await env.rubric.score(task, traj)).reward == 1.0


async def test_python_harness_feeds_tool_output_back() -> None:
    env = MathEnv(harness="python_tool", level=1)
    task = env.tasks(1)[0]

    def use_tool(messages: Sequence[Message]) -> Reply:
        tool_out = [m.content for m in messages if m.role == "tool"]
        if not tool_out:
            return "", [ToolCall(id="1", name="python", arguments=json.dumps({"code": "print(6 * 7)"}))]
        return f"The tool printed {tool_out[0].strip()}, so \\boxed{{{tool_out[0].strip()}}}"

    traj = await env.rollout(task, ScriptedPolicy(use_tool), Sampling())
    assert traj.turns[1].messages[0].content.strip() == "42" and traj.stop_reason == "done"
    assert env.tool_schemas() and MathEnv().tool_schemas() is None


def test_tool_variant_only_with_the_python_harness() -> None:
    with pytest.raises(EnvArgError, match="tool_variant"):
        MathEnv(tool_variant=1)
    env = MathEnv(harness="python_tool", tool_variant=1)
    assert "python" not in [t.name for t in env.tools]
