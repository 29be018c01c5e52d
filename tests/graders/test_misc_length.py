"""Length graders: DAPO soft overlong penalty by hand at every region and boundary, token cost,
the max-length gate, and token counts read from completions."""

from __future__ import annotations

import math

import pytest

from verigym.graders.length import (
    completion_lengths,
    max_length_grader,
    overlong_grader,
    soft_overlong_penalties,
    soft_overlong_penalty,
    token_cost_grader,
    token_cost_penalty,
)
from verigym.rubric import Rubric
from verigym.types import Completion, Message, Task, Trajectory, Turn, Usage

TASK = Task(id="t", prompt=(Message(role="user", content="hi"),))


def _traj(*completions: Completion) -> Trajectory:
    turns = [Turn(source="model", messages=[c.as_message()], completion=c) for c in completions]
    return Trajectory(task_id="t", prompt=list(TASK.prompt), turns=turns)


def _c(tokens: int, text: str = "x", finish: str = "stop") -> Completion:
    return Completion(text=text, usage=Usage(completion_tokens=tokens), finish_reason=finish)


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (0, 0.0),  # region 1
        (700, 0.0),  # region 1
        (800, 0.0),  # boundary L_max - L_cache: still no penalty
        (850, -0.25),  # region 2: (800 - 850) / 200
        (950, -0.75),
        (1000, -1.0),  # boundary L_max: the ramp reaches -1
        (1001, -1.0),  # region 3
        (99999, -1.0),
    ],
)
def test_soft_overlong_by_hand(length: int, expected: float) -> None:
    assert soft_overlong_penalty(length, max_len=1000, cache_len=200) == pytest.approx(expected)


def test_soft_overlong_bad_settings() -> None:
    with pytest.raises(ValueError):
        soft_overlong_penalty(1, max_len=100, cache_len=200)
    with pytest.raises(ValueError):
        soft_overlong_penalty(-1, max_len=100, cache_len=20)
    assert soft_overlong_penalty(101, max_len=100, cache_len=0) == -1.0
    assert soft_overlong_penalty(100, max_len=100, cache_len=0) == 0.0


def test_batch_form_matches_scalar() -> None:
    lengths = list(range(0, 140))
    assert soft_overlong_penalties(lengths, 100, 30) == [soft_overlong_penalty(n, 100, 30) for n in lengths]
    with pytest.raises(ValueError):
        soft_overlong_penalties([-3], 100, 30)


def test_token_cost() -> None:
    assert token_cost_penalty(250, 0.002) == pytest.approx(-0.5)
    assert token_cost_penalty(0, 1.0) == 0.0
    with pytest.raises(ValueError):
        token_cost_penalty(-1, 0.1)


async def test_overlong_grader_sums_turns_and_prefers_token_ids() -> None:
    g = overlong_grader(max_len=100, cache_len=40)
    grade = await g.grade(TASK, _traj(_c(50), _c(30)))  # total 80: (60 - 80) / 40
    assert grade.score == pytest.approx(-0.5)
    exact = Completion(text="x", completion_token_ids=tuple(range(10)), usage=Usage(completion_tokens=999))
    assert completion_lengths(_traj(exact)) == [10]
    per_max = overlong_grader(max_len=100, cache_len=40, per="max")
    assert (await per_max.grade(TASK, _traj(_c(50), _c(30)))).score == 0.0


async def test_missing_token_count_is_an_error_not_zero() -> None:
    grade = await token_cost_grader(0.01).grade(TASK, _traj(Completion(text="hello")))
    assert not grade.ok and math.isnan(grade.score)
    assert "no token count" in (grade.error or "")
    score = await Rubric([token_cost_grader(0.01)]).score(TASK, _traj(Completion(text="hello")))
    assert score.reward is None and score.error


async def test_token_cost_and_max_length_graders() -> None:
    assert (await token_cost_grader(0.01).grade(TASK, _traj(_c(30)))).score == pytest.approx(-0.3)
    gate = max_length_grader(64)
    assert (await gate.grade(TASK, _traj(_c(64)))).score == 1.0
    assert (await gate.grade(TASK, _traj(_c(65)))).score == 0.0
    truncated = await gate.grade(TASK, _traj(_c(10, finish="length")))
    assert truncated.score == 0.0 and "truncated" in truncated.detail
    lenient = max_length_grader(64, fail_truncated=False)
    assert (await lenient.grade(TASK, _traj(_c(10, finish="length")))).score == 1.0


async def test_penalty_adds_to_correctness_in_a_rubric() -> None:
    rubric = Rubric([overlong_grader(max_len=100, cache_len=20)])
    score = await rubric.score(TASK, _traj(_c(90)))  # (80 - 90) / 20
    assert score.reward == pytest.approx(-0.5)
