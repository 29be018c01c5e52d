"""``Grader(inline=True)``: built-in cheap graders run on the event loop, user graders keep the thread.

The thread hop is what lets a sync grader that hangs time out; ``inline`` is an explicit promise
(set by the built-in exact-match graders, never inferred) that gives it up for speed. These tests
show that a hanging user grader still times out with a reason while the loop keeps running, and
that the built-in graders score exactly as they do through the thread.
"""

from __future__ import annotations

import random
import threading

import pytest

from verigym.envs.builtin.arithmetic import ArithmeticEnv, correct, last_digit, length
from verigym.rubric import Grader, Penalty, Rubric
from verigym.types import Message, Task, Trajectory, Turn


def reply(task: Task, text: str) -> Trajectory:
    return Trajectory(
        task_id=task.id,
        prompt=list(task.prompt),
        turns=[Turn(source="model", messages=[Message(role="assistant", content=text)])],
    )


async def test_a_hanging_user_grader_still_times_out_without_stalling_the_loop() -> None:
    release, finished = threading.Event(), threading.Event()

    def hangs(task: Task, t: Trajectory) -> float:
        release.wait(60)  # hangs until the test releases it (60 s only bounds a failure)
        finished.set()
        return 1.0

    grader = Grader(hangs, timeout=0.2)
    assert grader.inline is False  # user graders are never inlined unless they say so
    task = ArithmeticEnv().tasks(1)[0]
    try:
        score = await Rubric([grader]).score(task, reply(task, "1"))
        # the loop's timer fired and the score came back while the grader still hung in its thread
        assert not finished.is_set()
        assert score.reward is None and score.error == "grader 'hangs' timed out after 0.2s"
    finally:
        release.set()


@pytest.mark.parametrize("graders", ["exact", "digits"])
async def test_builtin_inline_graders_score_as_they_do_in_a_thread(graders: str) -> None:
    env = ArithmeticEnv(level=4, graders=graders)
    assert all(isinstance(g, Grader) and g.inline for g in env.rubric.graders)
    threaded = Rubric(
        [Grader(g.fn, weight=g.weight, name=g.name) for g in env.rubric.graders if isinstance(g, Grader)]
    )
    rng = random.Random(0)
    for task in env.tasks(200, seed=3):
        assert task.answer is not None
        answer = int(task.answer) + rng.choice([0, 0, 1, -10, 7])
        text = rng.choice(
            [f"{answer}", f"\\boxed{{{answer}}}", f"Answer: {answer:,}", "no idea", f"<think>{answer}"]
        )
        inline = await env.rubric.score(task, reply(task, text))
        assert inline == await threaded.score(task, reply(task, text))


async def test_an_inline_grader_that_raises_is_an_error_with_its_reason() -> None:
    task = Task(id="t", prompt=(Message(role="user", content="1+1="),))  # no answer: correct() raises
    rubric = Rubric(
        [Grader(correct, name="correct", inline=True)],
        penalty=Penalty(Grader(length, name="len", inline=True)),
    )
    score = await rubric.score(task, reply(task, "2"))
    assert score.reward is None
    assert score.error == "grader 'correct' raised ValueError: task t has no reference answer"
    assert not score.grades["penalty:len"].ok  # the detector's own error is kept, not rewarded


async def test_inline_and_threaded_rubrics_mix_and_keep_declared_order() -> None:
    task = ArithmeticEnv().tasks(1)[0]
    rubric = Rubric(
        [Grader(correct, inline=True), Grader(last_digit, weight=0.5)], gates={"last_digit": ["correct"]}
    )
    score = await rubric.score(task, reply(task, str(task.answer)))
    assert list(score.grades) == ["correct", "last_digit"] and score.reward == 1.5


def test_inline_is_only_for_sync_graders() -> None:
    async def graded(task: Task, t: Trajectory) -> float:
        return 1.0

    with pytest.raises(ValueError, match="inline=True is for sync graders"):
        Grader(graded, inline=True)


async def test_a_threaded_detector_added_later_keeps_its_thread_and_timeout() -> None:
    release, finished = threading.Event(), threading.Event()

    def hangs(task: Task, t: Trajectory) -> float:
        release.wait(60)  # hangs until the test releases it (60 s only bounds a failure)
        finished.set()
        return 1.0

    task = ArithmeticEnv().tasks(1)[0]
    rubric = Rubric([Grader(correct, inline=True)])
    rubric.penalty = Penalty(Grader(hangs, timeout=0.1))
    try:
        score = await rubric.score(task, reply(task, str(task.answer)))
        assert not finished.is_set()  # the score did not wait for the hung detector
        assert (
            score.reward == 1.0
            and score.grades["penalty:hangs"].error == "grader 'hangs' timed out after 0.1s"
        )
    finally:
        release.set()
