"""repo_fix's SWE grader stack: the oracle passes every grader, the null policy none, a grader
that fails gates nothing in, and each grader's labeled suite has no false positive or negative."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from verigym.envs.builtin.repo_fix import RepoFixEnv
from verigym.envs.check import check_env
from verigym.envs.registry import EnvArgError, load_env
from verigym.types import Sampling

SUITE = Path(__file__).resolve().parents[1] / "suites" / "repo_fix_graders.jsonl"
STACK = ["unit_tests", "patch", "rollout", "behaviour", "user_experience", "task_specific"]


def test_oracle_passes_every_grader_and_null_none() -> None:
    env = RepoFixEnv(level=2, tool_variant=4)
    assert env.rubric.names == STACK
    assert all(env.rubric.gates[n] == ["unit_tests"] for n in STACK[1:])
    task = env.tasks(1, seed=11)[0]
    oracle = asyncio.run(env.rollout(task, env.oracle_policy(), Sampling()))
    score = asyncio.run(env.rubric.score(task, oracle))
    assert {n: score.grades[n].score for n in STACK} == dict.fromkeys(STACK, 1.0), score.grades
    assert score.reward == pytest.approx(1.5)
    null = asyncio.run(env.rollout(task, env.null_policy(), Sampling()))
    score = asyncio.run(env.rubric.score(task, null))
    assert score.reward == 0.0 and all(score.grades[n].detail == "gated" for n in STACK[1:])


def test_soft_graders_count_without_the_gate_and_tests_only_mode() -> None:
    env = load_env("repo_fix", hard_tests=False)
    task = env.tasks(1, seed=2)[0]
    null = asyncio.run(env.rollout(task, env.null_policy(), Sampling()))
    score = asyncio.run(env.rubric.score(task, null))
    assert (
        score.grades["patch"].score == 0.0 and score.grades["patch"].detail == "no change to the repository"
    )
    assert score.grades["rollout"].detail == "no tool calls"
    assert load_env("repo_fix", graders="tests").rubric.names == ["unit_tests"]
    try:
        load_env("repo_fix", graders="some")
    except EnvArgError as exc:
        assert "graders" in str(exc)
    else:
        raise AssertionError("graders='some' was accepted")


def test_check_env_with_the_full_stack() -> None:
    report = check_env(load_env("repo_fix", level=1), n=2)
    assert report.ok, [f"{r.name}: {r.detail}" for r in report.failures]


def test_labeled_suite_every_grader_has_no_false_verdict() -> None:
    lines = [json.loads(x) for x in SUITE.read_text().splitlines()]
    for grader in STACK:  # each grader has right and wrong episodes
        labels = {x["expect"] for x in lines if x["grader"] == grader}
        assert labels == {"pass", "fail"}, grader
    cmd = [sys.executable, "-m", "verigym", "verifier-bench", "--grader", "repo_fix"]
    out = subprocess.run(
        [*cmd, "--suite", str(SUITE), "--json", "-j", "2"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["n"] == len(lines)
    assert result["errors"] == 0 and result["false_positives"] == [] and result["false_negatives"] == [], (
        result
    )


def test_patch_grader_reads_a_diff_answer() -> None:
    """Single-turn SWE answers: the last ```diff block is the change the patch grader checks."""
    from verigym.envs.builtin._repo_fix_graders import grade_patch
    from verigym.types import Message, Task, Trajectory, Turn

    task = Task(
        id="t", prompt=(Message(role="user", content="fix"),), info={"repo_files": {"a.py": "x = 1\n"}}
    )

    def answer(text: str) -> Trajectory:
        traj = Trajectory(task_id="t", prompt=list(task.prompt))
        traj.turns.append(Turn(source="model", messages=[Message(role="assistant", content=text)]))
        return traj

    good = "```diff\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n```"
    stale = "```diff\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 5\n+x = 2\n```"
    test = "```diff\n--- /dev/null\n+++ b/tests/test_a.py\n@@ -0,0 +1 @@\n+def test_a(): pass\n```"
    assert grade_patch(task, answer(good)).score == 1.0
    assert "does not apply" in grade_patch(task, answer(stale)).detail
    assert "protected file tests/test_a.py" in grade_patch(task, answer(test)).detail
    assert grade_patch(task, answer("no diff")).detail == "no change to the repository"
