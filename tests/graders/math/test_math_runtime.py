"""The math grader's worker-process timeout, thread safety, and its use as a Rubric grader."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from verigym.graders.math import check_equivalent, math_grader
from verigym.rubric import Rubric
from verigym.types import Message, Task, Trajectory, Turn


def _traj(task: Task, text: str) -> Trajectory:
    reply = Message(role="assistant", content=text)
    return Trajectory(
        task_id=task.id, prompt=list(task.prompt), turns=[Turn(source="model", messages=[reply])]
    )


def _task(answer: str | None, **info: object) -> Task:
    return Task(
        id="t", prompt=(Message(role="user", content="What is 1/2 + 1/4?"),), answer=answer, info=info
    )


def test_timeout_is_an_errored_verdict_and_the_worker_recovers() -> None:
    assert check_equivalent("4", r"\boxed{4}").accepted  # warm worker
    start = time.monotonic()
    verdict = check_equivalent("1", r"\boxed{2^{2^{100}}}", timeout=1.0)  # never finishes on its own
    assert time.monotonic() - start < 60  # only bounds a hang: the reason says the timeout fired
    assert verdict.error is not None and "timed out" in verdict.reason and not verdict.accepted
    assert check_equivalent(r"\frac{3}{4}", "The answer is $0.75$.").accepted


def test_checks_from_many_threads() -> None:
    cases = [("x+1", r"\boxed{1+x}", True), ("2", r"\boxed{3}", False)] * 4
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda c: check_equivalent(c[0], c[1]).accepted, cases))
    assert got == [c[2] for c in cases]
    # Workers outlive the threads that happened to start them.
    after = [check_equivalent(c[0], c[1]) for c in cases]
    assert [v.error for v in after] == [None] * len(cases)


async def test_math_grader_in_a_rubric() -> None:
    rubric = Rubric([math_grader()])
    task = _task(r"\frac{3}{4}")
    good = await rubric.score(task, _traj(task, r"So $\boxed{0.75}$."))
    bad = await rubric.score(task, _traj(task, r"So $\boxed{0.7}$."))
    assert good.error is None and bad.error is None, (good, bad)
    assert good.reward == 1.0 and bad.reward == 0.0
    assert "extracted" in good.grades["math"].detail


async def test_mode_from_task_info_and_errors_are_not_zeros() -> None:
    grader = math_grader(name="m")
    strict = _task(r"\frac{1}{2}", math_mode="simplest_form")
    assert (await grader.grade(strict, _traj(strict, r"\boxed{\frac{2}{4}}"))).score == 0.0
    loose = _task(r"\frac{1}{2}")
    assert (await grader.grade(loose, _traj(loose, r"\boxed{\frac{2}{4}}"))).score == 1.0
    no_answer = _task(None)
    assert (await grader.grade(no_answer, _traj(no_answer, "5"))).error is not None
    bad_mode = _task("1", math_mode="fuzzy")
    assert "unknown math mode" in str((await grader.grade(bad_mode, _traj(bad_mode, "1"))).error)
    slow = _task("1")
    timed = await math_grader(timeout=1.0).grade(slow, _traj(slow, r"\boxed{2^{2^{100}}}"))
    assert timed.error is not None and "timed out" in timed.error
