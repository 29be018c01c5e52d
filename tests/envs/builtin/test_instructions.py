"""The instructions environment: constraint sampling, the constructive oracle, strict vs loose."""

from __future__ import annotations

import pytest

from verigym.envs.builtin.instructions import _GROUPS, INSTRUCTION_TYPES, InstructionsEnv, compose
from verigym.envs.check import check_env
from verigym.envs.registry import EnvArgError, load_env
from verigym.graders.instructions import INSTRUCTIONS, check_instruction
from verigym.types import Message, Task, Trajectory, Turn


def reply(text: str) -> Trajectory:
    return Trajectory(
        task_id="t",
        prompt=[],
        turns=[Turn(source="model", messages=[Message(role="assistant", content=text)])],
    )


@pytest.mark.parametrize(("level", "mode"), [(1, "strict"), (4, "loose")])
def test_check_env_passes(level: int, mode: str) -> None:
    report = check_env(load_env("instructions", level=level, mode=mode), n=6)
    assert report.ok, report.failures


def test_types_exist_in_the_grader_registry_and_levels_count_constraints() -> None:
    assert set(INSTRUCTION_TYPES) <= set(INSTRUCTIONS)
    for level in (1, 2, 3, 4):
        for task in InstructionsEnv(level=level).tasks(40, seed=level):
            ids = [i["id"] for i in task.info["instructions"]]
            assert len(ids) == level == len(set(ids))
            assert all(len(set(ids) & group) <= 1 for group in _GROUPS)


def test_oracle_text_satisfies_every_constraint_on_many_tasks() -> None:
    seen: set[str] = set()
    for level in (2, 3, 4):
        for task in InstructionsEnv(level=level).tasks(60, seed=7, split="train"):
            text = compose(task)
            for item in task.info["instructions"]:
                seen.add(item["id"])
                assert check_instruction(item["id"], text, item["kwargs"]), (item, text)
    assert seen == set(INSTRUCTION_TYPES)


async def test_strict_and_loose_modes_differ_on_a_wrapped_answer() -> None:
    info = {"instructions": [{"id": "startend:end_checker", "kwargs": {"end_phrase": "Peace out."}}]}
    task = Task(id="t", prompt=(Message(role="user", content="write"),), info=info)
    answer = "Sure, here it is.\nThe text. Peace out.\nHope this helps!"
    strict = await InstructionsEnv(mode="strict").rubric.score(task, reply(answer))
    loose = await InstructionsEnv(mode="loose").rubric.score(task, reply(answer))
    assert strict.reward == 0.0 and loose.reward == pytest.approx(1.0)


async def test_partial_credit_is_instruction_level() -> None:
    env = InstructionsEnv(level=2)
    task = env.tasks(1)[0]
    text = compose(task)
    first = task.info["instructions"][0]
    broken = Task(id=task.id, prompt=task.prompt, info={**task.info, "instructions": [
        first, {"id": "keywords:existence", "kwargs": {"keywords": ["zzyzx"]}}
    ]})  # fmt: skip
    score = await env.rubric.score(broken, reply(text))
    assert score.grades["followed"].score == 0.5 and score.grades["all_followed"].score == 0.0
    assert score.reward == pytest.approx(0.15)


def test_bad_arguments() -> None:
    with pytest.raises(EnvArgError, match="mode"):
        InstructionsEnv(mode="lenient")
    with pytest.raises(EnvArgError, match="level"):
        InstructionsEnv(level=5)
