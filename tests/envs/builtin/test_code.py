"""The code environment: 42 problems with hidden tests, tiers, splits, sandboxed grading."""

from __future__ import annotations

import pytest

from verigym.envs.builtin.code import PROBLEMS, CodeEnv
from verigym.envs.check import check_env
from verigym.envs.datasets import DatasetError
from verigym.envs.registry import EnvArgError, load_env
from verigym.types import Message, Trajectory, Turn


def reply(text: str) -> Trajectory:
    return Trajectory(
        task_id="t",
        prompt=[],
        turns=[Turn(source="model", messages=[Message(role="assistant", content=text)])],
    )


def test_problem_set_is_complete_and_references_pass_their_tests() -> None:
    assert len(PROBLEMS) >= 40
    assert len({p["id"] for p in PROBLEMS}) == len({p["entry_point"] for p in PROBLEMS}) == len(PROBLEMS)
    assert {p["tier"] for p in PROBLEMS} == {1, 2, 3}
    for p in PROBLEMS:  # trusted reference code: checked in-process, fast
        scope: dict[str, object] = {}
        exec(str(p["solution"]), scope)
        exec(str(p["tests"]), scope)
        assert str(p["tests"]).count("assert ") >= 3 and p["entry_point"] in str(p["prompt"])


def test_check_env_passes_in_the_sandbox() -> None:
    report = check_env(load_env("code", tier=1), n=3)
    assert report.ok, report.failures


async def test_oracle_passes_every_task_of_every_tier() -> None:
    """Every one of the 42 problems, not a sample: code-c24 (a 1,000,000-element argument) once
    failed its own reference solution on the old 1,000,000-byte reply limit."""
    env = CodeEnv()
    tasks = env.tasks(split="all")
    oracle = env.oracle_policy()
    failed = []
    for task in tasks:
        answer = f"```python\n{task.info['solution']}```"
        score = await env.rubric.score(task, reply(answer))
        if score.reward != 1.0:
            failed.append((task.id, score.error or score.grades["tests"].detail))
    assert len(tasks) == len(PROBLEMS) and oracle is not None
    assert not failed, failed


def test_tiers_and_splits() -> None:
    everything = CodeEnv().tasks(split="all")
    assert len(everything) == len(PROBLEMS)
    test, train = CodeEnv().tasks(), CodeEnv().tasks(split="train")
    assert {t.id for t in test}.isdisjoint(t.id for t in train) and len(test) + len(train) == len(PROBLEMS)
    assert all(t.info["tier"] == 3 for t in CodeEnv(tier=3).tasks(split="all"))
    assert [t.id for t in CodeEnv().tasks(seed=1)] != [t.id for t in CodeEnv().tasks(seed=2)]
    with pytest.raises(DatasetError, match="split"):
        CodeEnv().tasks(split="dev")
    with pytest.raises(EnvArgError, match="tier"):
        CodeEnv(tier=4)


async def test_partial_and_all_or_nothing_modes() -> None:
    task = next(t for t in CodeEnv().tasks(split="all") if t.info["entry_point"] == "is_leap_year")
    sloppy = "```python\ndef is_leap_year(year):\n    return year % 4 == 0\n```"  # wrong for 1900
    fraction = await CodeEnv(mode="fraction").rubric.score(task, reply(sloppy))
    assert fraction.reward == pytest.approx(0.75)
    strict = await CodeEnv().rubric.score(task, reply(sloppy))
    assert strict.reward == 0.0 and strict.error is None
    cheat = "```python\nimport sys\ndef is_leap_year(year):\n    sys.exit(0)\n```"
    assert (await CodeEnv().rubric.score(task, reply(cheat))).reward == 0.0
