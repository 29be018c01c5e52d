"""The arithmetic environment: levels, short prompts, exact answer checking, oracle and null."""

from __future__ import annotations

import pytest

from verigym.envs.builtin.arithmetic import LEVELS, ArithmeticEnv, evaluate, parse_integer
from verigym.envs.registry import EnvArgError
from verigym.types import Message, Sampling, Trajectory, Turn


def reply(text: str) -> Trajectory:
    return Trajectory(
        task_id="t",
        prompt=[],
        turns=[Turn(source="model", messages=[Message(role="assistant", content=text)])],
    )


def test_level_one_is_short_two_digit_addition() -> None:
    env = ArithmeticEnv()
    tasks = env.tasks(50, seed=0)
    assert env.system_prompt is None
    for task in tasks:
        (msg,) = task.prompt
        a, b = msg.content.removesuffix("=").split("+")
        assert msg.role == "user" and msg.content.endswith("=") and len(msg.content) == 6
        assert 10 <= int(a) <= 99 and 10 <= int(b) <= 99
        assert task.answer == str(int(a) + int(b)) and task.info == {}


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_levels_and_answers_are_exact(level: int) -> None:
    _digits, terms, ops = LEVELS[level]
    for task in ArithmeticEnv(level=level).tasks(30, seed=level):
        text = task.prompt[0].content.removesuffix("=")
        assert eval(text) == int(task.answer or "")
        assert sum(c in "+-*" for c in text) == terms - 1
        assert set(c for c in text if not c.isdigit()) <= set(ops)


def test_overrides_and_verbose() -> None:
    env = ArithmeticEnv(level=1, digits=1, terms=4, ops="*")
    prompt = env.tasks(1)[0].prompt[0].content
    assert len(prompt.removesuffix("=").split("*")) == 4
    verbose = ArithmeticEnv(verbose=True).tasks(1)[0].prompt[0].content
    assert verbose.startswith("Compute ") and "\\boxed{}" in verbose
    assert evaluate([2, 3, 4, 5], ["+", "*", "-"]) == 9


def test_splits_are_disjoint_and_seeded() -> None:
    env = ArithmeticEnv()
    test = {t.prompt[0].content for t in env.tasks(300, seed=0)}
    train = {t.prompt[0].content for t in env.tasks(1000, seed=0, split="train")}
    assert not test & train
    assert env.tasks(10, seed=1) != env.tasks(10, seed=2)
    assert len(env.tasks()) == 1000


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("46", 46),
        ("12+34=46", 46),
        ("12-34=-22", -22),
        ("<think>maybe 45</think> 46", 46),
        ("<think>46", None),
        (r"I get 45 then \boxed{46}. Check: 47", 46),
        ("Steps 1, 2.\nAnswer: 1,234.", 1234),
        ("46.0", 46),
        ("46.5", None),
        ("−7", -7),
        ("no idea", None),
    ],
)
def test_parse_integer(text: str, value: int | None) -> None:
    assert parse_integer(text) == value


async def test_grader_oracle_and_null() -> None:
    env = ArithmeticEnv(level=4)
    tasks = env.tasks(20, seed=5)
    task = tasks[0]
    right = await env.rubric.score(task, reply(f"\\boxed{{{task.answer}}}"))
    wrong = await env.rubric.score(task, reply(str(int(task.answer or "0") + 1)))
    assert right.reward == 1.0 and wrong.reward == 0.0 and "expected" in wrong.grades["correct"].detail
    for policy, expected in ((env.oracle_policy(), 1.0), (env.null_policy(), 0.0)):
        for t in tasks:
            traj = await env.rollout(t, policy, Sampling())
            assert (await env.rubric.score(t, traj)).reward == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"level": 0}, "level must be"),
        ({"digits": "3"}, "digits must be"),
        ({"terms": 1}, "terms must be"),
        ({"ops": "+/"}, "ops must be"),
        ({"verbose": "yes"}, "verbose must be"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(EnvArgError, match=message):
        ArithmeticEnv(**kwargs)  # type: ignore[arg-type]
