"""Rubric judge: scoring by points and trees, verdict parsing, retries, errors, cache, agreement."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from verigym.graders.judge import (
    JudgeCache,
    evaluate_judge,
    judge_agreement,
    judge_grader,
    parse_rubric,
    parse_verdict,
    quoted_phrase_verdict,
    score_node,
)
from verigym.policies.base import PolicyError
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Rubric
from verigym.types import Completion, Message, Task, Trajectory, Turn

RUBRIC = [
    {"criterion": 'Says "hello"', "points": 4},
    {"criterion": 'Says "goodbye"', "points": 6},
    {"criterion": 'Is "rude" (undesirable)', "points": -5},
]
TASK = Task(id="t", prompt=(Message(role="user", content="greet me"),), info={"rubric": RUBRIC})


def _traj(text: str) -> Trajectory:
    c = Completion(text=text)
    return Trajectory(
        task_id="t",
        prompt=list(TASK.prompt),
        turns=[Turn(source="model", messages=[c.as_message()], completion=c)],
    )


def test_points_negative_and_clipping() -> None:
    node = parse_rubric(RUBRIC)
    assert score_node(node, [True, True, False]) == 1.0
    assert score_node(node, [True, False, False]) == pytest.approx(0.4)
    assert score_node(node, [True, True, True]) == pytest.approx(0.5)  # (4 + 6 - 5) / 10
    assert score_node(node, [True, False, True]) == 0.0  # clipped from -0.1
    with pytest.raises(ValueError, match="positive points"):
        parse_rubric([{"criterion": "bad", "points": -1}])
    with pytest.raises(ValueError, match="criterion"):
        parse_rubric([{"points": 1}])


def test_hierarchical_weighted_mean() -> None:
    tree = parse_rubric(
        {"children": [
            {"weight": 3, "sub_tasks": [{"requirements": "a", "weight": 1}, {"requirements": "b", "weight": 3}]},
            {"weight": 1, "criteria": [{"criterion": "c", "points": 2}, {"criterion": "d", "points": 2}]},
        ]}
    )  # fmt: skip
    assert [c.text for c in tree.leaves()] == ["a", "b", "c", "d"]
    # child 1: (1*1 + 3*0)/4 = 0.25 ; child 2: 2/4 = 0.5 ; parent: (3*0.25 + 1*0.5)/4
    assert score_node(tree, [True, False, True, False]) == pytest.approx(0.3125)


@pytest.mark.parametrize(
    ("text", "met"),
    [
        ('{"explanation": "ok", "criteria_met": true}', True),
        ('```json\n{"explanation": "no", "criteria_met": false}\n```', False),
        ('Thinking... {"criteria_met": "true"} done', True),
        ('{"met": "no"}', False),
        ("criteria_met: false", False),
        ("yes it is", None),
        ('{"criteria_met": "perhaps"}', None),
        ('{"criteria_met": true} {"criteria_met": false}', None),
    ],
)
def test_parse_verdict(text: str, met: bool | None) -> None:
    verdict = parse_verdict(text)
    assert (verdict.met if verdict else None) == met


async def test_grader_with_scripted_judge_and_cache(tmp_path: Path) -> None:
    judge = ScriptedPolicy(quoted_phrase_verdict)
    cache = JudgeCache(tmp_path / "cache.jsonl")
    g = judge_grader(judge, cache=cache)
    grade = await g.grade(TASK, _traj("Hello and goodbye!"))
    assert grade.score == 1.0 and judge.calls == 3
    detail = json.loads(grade.detail)
    assert [d["met"] for d in detail] == [True, True, False]
    again = await g.grade(TASK, _traj("Hello and goodbye!"))
    assert again.score == 1.0 and judge.calls == 3 and cache.hits == 3
    reloaded = JudgeCache(tmp_path / "cache.jsonl")
    assert len(reloaded) == 3
    other = await g.grade(TASK, _traj("Hello, you rude person."))
    assert other.score == 0.0 and judge.calls == 6  # (4 - 5) / 10 clipped


async def test_garbage_judge_is_an_error_after_one_retry() -> None:
    judge = ScriptedPolicy(lambda messages: "I would say it is fine.")
    grade = await judge_grader(judge, RUBRIC, concurrency=1).grade(TASK, _traj("hello"))
    assert not grade.ok and "unparseable" in (grade.error or "")
    assert judge.calls == 6  # 3 criteria x (1 try + 1 retry)
    score = await Rubric([judge_grader(judge, RUBRIC)]).score(TASK, _traj("hello"))
    assert score.reward is None and score.error  # an error, never a zero


async def test_retry_recovers_from_one_garbage_reply() -> None:
    replies = iter(["garbage", '{"criteria_met": true}'])
    judge = ScriptedPolicy(lambda messages: next(replies))
    grade = await judge_grader(judge, [{"criterion": "x", "points": 1}]).grade(TASK, _traj("hi"))
    assert grade.ok and grade.score == 1.0 and judge.calls == 2


async def test_timeout_and_failed_requests_are_errors() -> None:
    async def slow(messages: Sequence[Message]) -> str:
        await asyncio.sleep(5)
        return '{"criteria_met": true}'

    grade = await judge_grader(ScriptedPolicy(slow), RUBRIC, timeout=0.05).grade(TASK, _traj("hi"))
    assert not grade.ok and "timed out" in (grade.error or "")

    calls = []

    def refuse(messages: Sequence[Message]) -> str:
        calls.append(1)
        raise PolicyError("http", "400 bad request", retryable=False)

    grade = await judge_grader(ScriptedPolicy(refuse), [{"criterion": "x"}]).grade(TASK, _traj("hi"))
    assert not grade.ok and "400" in (grade.error or "") and len(calls) == 1


def test_judge_agreement() -> None:
    a = judge_agreement([True, True, False, False, True], [True, False, False, True, True])
    assert (a.tp, a.fp, a.fn, a.tn) == (2, 1, 1, 1)
    assert a.precision == pytest.approx(2 / 3) and a.recall == pytest.approx(2 / 3)
    assert a.f1 == pytest.approx(2 / 3) and a.accuracy == pytest.approx(0.6)
    none = judge_agreement([False], [False])
    assert none.precision == 0.0 and none.accuracy == 1.0
    with pytest.raises(ValueError):
        judge_agreement([True], [])


async def test_evaluate_judge_against_human_labels() -> None:
    items = [
        ("q", "hello there", 'Says "hello"', True),
        ("q", "hi there", 'Says "hello"', True),  # the judge misses this one
        ("q", "bye", 'Says "hello"', False),
        ("q", "hello", {"criterion": 'Says "hello"', "points": 2}, False),  # a false positive
    ]
    agreement = await evaluate_judge(ScriptedPolicy(quoted_phrase_verdict), items)
    assert (agreement.tp, agreement.fp, agreement.fn, agreement.tn, agreement.errors) == (1, 1, 1, 1, 0)
    garbage = await evaluate_judge(ScriptedPolicy(lambda m: "??"), items[:2])
    assert garbage.errors == 2 and garbage.n == 0
