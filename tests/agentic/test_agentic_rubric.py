"""Rubric: independent graders run concurrently, gated ones in dependency order, same scores as
sequential; several penalties add up and each is reported."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import threading
import time
from collections.abc import Callable

import pytest

from verigym.rubric import Grader, GroupGrader, Penalty, Rubric
from verigym.types import Grade, Message, Task, Trajectory, Turn

TASK = Task(id="t", prompt=(Message(role="user", content="q"),))


def _traj(text: str) -> Trajectory:
    traj = Trajectory(task_id="t", prompt=list(TASK.prompt))
    traj.turns.append(Turn(source="model", messages=[Message(role="assistant", content=text)]))
    return traj


Work = float | Callable[[], object]  # seconds to sleep, or a call that blocks until it may go on


class Clock:
    """Records when each grader started and ended (seconds since creation); ``ended[name]`` is set
    once a grader's span is recorded. A grader's work is a sleep or a blocking call (a barrier all
    of them must reach, an event another grader sets), so tests of concurrency need no wall clock."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.spans: dict[str, tuple[float, float]] = {}
        self.ended: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    def sync(self, name: str, work: Work, score: float = 1.0) -> Grader:
        self.ended[name] = threading.Event()

        def fn(task: Task, trajectory: Trajectory) -> Grade:
            start = time.perf_counter() - self.t0
            work() if callable(work) else time.sleep(work)
            with self.lock:
                self.spans[name] = (start, time.perf_counter() - self.t0)
            self.ended[name].set()
            return Grade(score=score)

        return Grader(fn, name=name)

    def async_(self, name: str, work: Work, score: float = 1.0) -> Grader:
        self.ended[name] = threading.Event()

        async def fn(task: Task, trajectory: Trajectory) -> Grade:
            start = time.perf_counter() - self.t0
            await (asyncio.to_thread(work) if callable(work) else asyncio.sleep(work))
            self.spans[name] = (start, time.perf_counter() - self.t0)
            self.ended[name].set()
            return Grade(score=score)

        return Grader(fn, name=name)


def meeting(parties: int) -> Callable[[], object]:
    """A call that returns once ``parties`` callers are in it at the same moment (it raises
    ``BrokenBarrierError`` after 60 s, which only bounds a failure: graders run one at a time)."""
    barrier = threading.Barrier(parties)
    return lambda: barrier.wait(60)


def test_independent_sync_and_async_graders_overlap() -> None:
    clock = Clock()
    meet = meeting(3)  # each grader waits until all three are running
    rubric = Rubric([clock.sync("a", meet), clock.sync("b", meet), clock.async_("c", meet)])
    score = asyncio.run(rubric.score(TASK, _traj("x")))
    assert score.reward == 3.0, score.grades  # no grader's meeting broke: three at once
    starts = [clock.spans[n][0] for n in "abc"]
    ends = [clock.spans[n][1] for n in "abc"]
    assert max(starts) < min(ends)  # all three were running at the same moment

    clock2 = Clock()
    seq = Rubric([clock2.sync("a", 0.2), clock2.sync("b", 0.2)], concurrent=False)
    t0 = time.perf_counter()
    asyncio.run(seq.score(TASK, _traj("x")))
    assert time.perf_counter() - t0 >= 0.4
    assert clock2.spans["b"][0] >= clock2.spans["a"][1]  # one at a time, in order


def test_gated_grader_waits_for_its_own_dependency_only() -> None:
    clock = Clock()
    # "slow" ends only once "after_fast" has: it would wait 60 s if "after_fast" waited for it
    rubric = Rubric(
        [
            clock.sync("slow", lambda: clock.ended["after_fast"].wait(60)),
            clock.async_("fast", 0.05),
            clock.sync("after_fast", 0.05),
        ],
        gates={"after_fast": ["fast"]},
    )
    asyncio.run(rubric.score(TASK, _traj("x")))
    assert clock.spans["after_fast"][0] >= clock.spans["fast"][1]  # dependency order
    assert clock.spans["after_fast"][1] < clock.spans["slow"][1]  # did not wait for the unrelated grader


def test_penalties_run_beside_graders_and_add_up() -> None:
    clock = Clock()
    meet = meeting(4)  # the grader and the three penalties wait until all four are running
    rubric = Rubric(
        [clock.sync("g", meet)],
        penalties=[Penalty(clock.async_("hedge", meet), 0.5), Penalty(clock.sync("copy", meet, 0.0), 2.0)],
        penalty=Penalty(clock.sync("net", meet), 1.0),
    )
    score = asyncio.run(rubric.score(TASK, _traj("x")))
    assert all(g.ok for g in score.grades.values()), score.grades  # no meeting broke: all ran at once
    assert score.penalty == 1.5 and score.reward == pytest.approx(1.0 - 1.5)
    assert {k: g.score for k, g in score.grades.items() if k.startswith("penalty:")} == {
        "penalty:net": 1.0,
        "penalty:hedge": 1.0,
        "penalty:copy": 0.0,
    }
    with pytest.raises(ValueError, match="penalty names must be unique"):
        Rubric([], penalties=[Penalty(clock.sync("x", 0)), Penalty(clock.sync("x", 0))])
    with pytest.raises(ValueError, match="cycle"):
        Rubric([clock.sync("p", 0), clock.sync("q", 0)], gates={"p": ["q"], "q": ["p"]})


def _random_rubric(rng: random.Random) -> Rubric:
    names = [f"g{i}" for i in range(rng.randint(2, 6))]

    def grader(name: str) -> Grader | GroupGrader:
        salt = rng.random()
        if rng.random() < 0.2:
            return GroupGrader(lambda t, trs, s=salt: [((len(x.final_text) * s) % 1) for x in trs], name=name)
        if rng.random() < 0.1:
            return Grader(lambda t, tr: 1 / 0, name=name)  # an errored grade

        def fn(task: Task, trajectory: Trajectory, s: float = salt) -> float:
            return round((len(trajectory.final_text) * 7 * s) % 1.0 + 0.3, 3)

        return Grader(fn, name=name, weight=rng.choice([0.5, 1.0, 2.0]))

    gates = {
        n: rng.sample(names[:i], rng.randint(0, min(i, 2)))
        for i, n in enumerate(names)
        if i and rng.random() < 0.6
    }
    detector = Grader(lambda t, tr: float("4" in tr.final_text), name="has4")
    return Rubric(
        [grader(n) for n in names], gates=gates, penalties=[Penalty(detector, 0.7)], gate_threshold=0.5
    )


def test_concurrent_scores_equal_sequential_scores() -> None:
    rng = random.Random(0)
    trajs = [_traj(t) for t in ("a", "bb4", "ccc", "dddd", "e4eee")]
    for _ in range(30):
        rubric = _random_rubric(rng)
        seq = dataclasses.replace(rubric, concurrent=False)
        a = asyncio.run(rubric.score_group(TASK, trajs))
        b = asyncio.run(seq.score_group(TASK, trajs))
        assert [s.model_dump_json() for s in a] == [s.model_dump_json() for s in b]
