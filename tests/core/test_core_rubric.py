"""Rubric: weights, gates, penalties, group graders, and errors kept apart from zeros."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import pytest

from verigym.rubric import Grader, GroupGrader, Penalty, Rubric, to_grade
from verigym.types import ErrorInfo, Grade, Message, Task, Trajectory, Turn

TASK = Task(id="t", prompt=(Message(role="user", content="q"),), answer="4")


def traj(text: str, error: ErrorInfo | None = None) -> Trajectory:
    return Trajectory(
        task_id="t",
        prompt=list(TASK.prompt),
        turns=[Turn(source="model", messages=[Message(role="assistant", content=text)])],
        error=error,
    )


def exact(task: Task, t: Trajectory) -> bool:
    return t.final_text == task.answer


def test_to_grade_coercions() -> None:
    assert to_grade(True).score == 1.0 and to_grade(False).score == 0.0
    assert to_grade(3).score == 3.0
    assert not to_grade(math.nan).ok
    assert not to_grade(Grade(score=math.inf)).ok
    assert "expected Grade" in (to_grade("yes").error or "")


async def test_weighted_reward() -> None:
    def short(task: Task, t: Trajectory) -> float:
        return 1.0 if len(t.final_text) < 3 else 0.0

    rubric = Rubric([Grader(exact, weight=2.0), Grader(short, weight=0.5)])
    score = await rubric.score(TASK, traj("4"))
    assert score.reward == pytest.approx(2.5) and score.error is None
    assert set(score.grades) == {"exact", "short"}
    assert (await rubric.score(TASK, traj("5"))).reward == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (lambda task, t: 1 / 0, "ZeroDivisionError"),
        (lambda task, t: math.nan, "non-finite"),
        (lambda task, t: "sure", "expected Grade"),
    ],
)
async def test_failing_grader_is_an_error_not_a_zero(fn: object, reason: str) -> None:
    rubric = Rubric([Grader(exact), Grader(fn, name="bad")])  # type: ignore[arg-type]
    score = await rubric.score(TASK, traj("4"))
    assert score.reward is None
    assert score.error is not None and reason in score.error
    assert score.grades["exact"].score == 1.0 and not score.grades["bad"].ok


async def test_grader_timeout_is_an_error() -> None:
    async def slow(task: Task, t: Trajectory) -> float:
        await asyncio.sleep(5)
        return 1.0

    score = await Rubric([Grader(slow, timeout=0.05)]).score(TASK, traj("4"))
    assert score.reward is None and "timed out" in (score.error or "")


async def test_errored_trajectory_has_no_reward() -> None:
    score = await Rubric([Grader(exact)]).score(TASK, traj("4", ErrorInfo(kind="policy", message="500")))
    assert score.reward is None and score.error == "policy: 500"


async def test_gates_skip_dependent_graders() -> None:
    calls: list[str] = []

    def expensive(task: Task, t: Trajectory) -> float:
        calls.append(t.final_text)
        return 1.0

    rubric = Rubric([Grader(exact), Grader(expensive)], gates={"expensive": ["exact"]})
    passed, gated = await rubric.score_group(TASK, [traj("4"), traj("no")])
    assert passed.reward == 2.0
    assert gated.grades["expensive"].detail == "gated" and gated.reward == 0.0
    assert calls == ["4"]


def test_rubric_validates_names_and_gates() -> None:
    with pytest.raises(ValueError, match="unique"):
        Rubric([Grader(exact), Grader(exact)])
    with pytest.raises(ValueError, match="unknown grader"):
        Rubric([Grader(exact)], gates={"exact": ["missing"]})


async def test_penalty_and_its_errors_are_masked() -> None:
    def cheated(task: Task, t: Trajectory) -> bool:
        return "hack" in t.final_text

    def broken_detector(task: Task, t: Trajectory) -> float:
        raise RuntimeError("judge down")

    rubric = Rubric([Grader(exact)], penalty=Penalty(Grader(cheated), amount=2.0))
    clean, hacked = await rubric.score_group(TASK, [traj("4"), traj("hack")])
    assert clean.reward == 1.0 and clean.penalty == 0.0
    assert hacked.reward == -2.0 and hacked.penalty == 2.0
    masked = await Rubric([Grader(exact)], penalty=Penalty(Grader(broken_detector))).score(TASK, traj("4"))
    assert masked.reward == 1.0 and not masked.grades["penalty:broken_detector"].ok


async def test_group_grader_sees_every_sample() -> None:
    seen: list[int] = []

    def shortest(task: Task, ts: Sequence[Trajectory]) -> list[float]:
        seen.append(len(ts))
        best = min(len(t.final_text) for t in ts)
        return [float(len(t.final_text) == best) for t in ts]

    def wrong_count(task: Task, ts: Sequence[Trajectory]) -> list[float]:
        return [1.0]

    rubric = Rubric([GroupGrader(shortest)])
    scores = await rubric.score_group(TASK, [traj("4"), traj("four"), traj("44")])
    assert [s.reward for s in scores] == [1.0, 0.0, 0.0] and seen == [3]
    bad = await Rubric([GroupGrader(wrong_count)]).score_group(TASK, [traj("4"), traj("5")])
    assert all(s.reward is None and "returned 1 grades for 2" in (s.error or "") for s in bad)
