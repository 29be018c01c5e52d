"""Graders and the Rubric that combines them into a Score.

A grader is explicit: a function ``(task, trajectory) -> Grade | float | bool`` (sync or
async), wrapped in ``Grader`` with a name and a weight. No argument injection by parameter
names. A group grader sees every sample of one task at once:
``(task, [trajectory, ...]) -> [Grade | float | bool, ...]``.

Errors are not zeros: a grader that raises, times out or returns NaN gives an errored
``Grade``; a sample with any errored grade (that was not skipped by a gate) has no reward and
carries the error instead. So does a sample whose weighted total or penalty sum is not finite
(finite grades times weights that overflow): a reward is always a finite number.

Graders not gated on each other run concurrently ("sequential execution on dependent graders,
parallel execution on others", the agent-training lecture's grader-dependency rule): each grader
starts as soon as the graders it is gated on have finished, sync graders in worker threads
(``verigym._threads``: finished calls come back to the loop in batches) and async ones as tasks,
and penalties run beside the graders. ``Rubric(concurrent=False)`` runs one grader at a time in
dependency order; the scores are the same either way. A grader declared ``inline`` (cheap and
bounded, such as the built-in exact-match ones) is called on the event loop with no thread; a
rubric made only of those scores each sample directly, in dependency order.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from verigym._threads import in_thread
from verigym.types import Grade, Score, Task, Trajectory

__all__ = ["GradeLike", "Grader", "GroupGrader", "Penalty", "Rubric", "to_grade"]

GradeLike: TypeAlias = "Grade | float | int | bool"
GraderFn: TypeAlias = Callable[[Task, Trajectory], "GradeLike | Awaitable[GradeLike]"]
GroupGraderFn: TypeAlias = Callable[
    [Task, Sequence[Trajectory]], "Sequence[GradeLike] | Awaitable[Sequence[GradeLike]]"
]


def to_grade(value: Any) -> Grade:
    """Coerce a grader's return value into a ``Grade``; anything else is an errored grade."""
    if isinstance(value, Grade):
        if value.error is None and not math.isfinite(value.score):
            return Grade.failed(f"grader returned a non-finite score {value.score!r}")
        return value
    if isinstance(value, bool):
        return Grade(score=1.0 if value else 0.0)
    if isinstance(value, int | float):
        if not math.isfinite(value):
            return Grade.failed(f"grader returned a non-finite score {value!r}")
        return Grade(score=float(value))
    return Grade.failed(f"grader returned {type(value).__name__}, expected Grade, float or bool")


async def _call(fn: Callable[..., Any], args: tuple[Any, ...], timeout: float | None) -> Any:
    if inspect.iscoroutinefunction(fn):
        coro: Awaitable[Any] = fn(*args)
    else:  # a future (wait_for then needs no task to wrap it); threads hand results back in batches
        coro = in_thread(fn, *args)
    return await asyncio.wait_for(coro, timeout) if timeout else await coro


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


@dataclass(frozen=True)
class Grader:
    """One verifier with a weight. ``timeout`` is in seconds (None: no limit).

    A sync grader runs in a worker thread, so that one that hangs times out without stalling the
    event loop. ``inline=True`` declares a sync grader cheap and bounded — no I/O, no locks, time
    linear in what it reads (an exact match, a linear-time regex, a number compare) — and calls
    it directly on the event loop instead: no thread hop (~40-80 µs a call on a busy eval), and no
    ``timeout`` either, since a call on the loop cannot be interrupted. Nothing sets it by
    guessing; the built-in exact-match graders set it, and a grader that may be slow must not.
    """

    fn: GraderFn
    weight: float = 1.0
    name: str = ""
    timeout: float | None = 60.0
    inline: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", getattr(self.fn, "__name__", "grader"))
        if self.inline and inspect.iscoroutinefunction(self.fn):
            raise ValueError(f"grader {self.name!r}: inline=True is for sync graders; this one is async")

    def grade_inline(self, task: Task, trajectory: Trajectory) -> Grade:
        """The grade of an ``inline`` grader, computed now on the calling thread."""
        try:
            return to_grade(self.fn(task, trajectory))
        except (Exception, SystemExit) as exc:  # sys.exit in a grader: its error, not the run's end
            return Grade.failed(f"grader {self.name!r} raised {_describe(exc)}")

    async def grade(self, task: Task, trajectory: Trajectory) -> Grade:
        if self.inline:
            return self.grade_inline(task, trajectory)
        try:
            return to_grade(await _call(self.fn, (task, trajectory), self.timeout))
        except TimeoutError:
            return Grade.failed(f"grader {self.name!r} timed out after {self.timeout}s")
        except (Exception, SystemExit) as exc:  # sys.exit in a grader: its error, not the run's end
            return Grade.failed(f"grader {self.name!r} raised {_describe(exc)}")


@dataclass(frozen=True)
class GroupGrader:
    """A grader that sees all samples of one task (e.g. relative length, diversity)."""

    fn: GroupGraderFn
    weight: float = 1.0
    name: str = ""
    timeout: float | None = 60.0

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", getattr(self.fn, "__name__", "group_grader"))

    async def grade_group(self, task: Task, trajectories: Sequence[Trajectory]) -> list[Grade]:
        try:
            values = await _call(self.fn, (task, list(trajectories)), self.timeout)
        except TimeoutError:
            return [Grade.failed(f"group grader {self.name!r} timed out after {self.timeout}s")] * len(
                trajectories
            )
        except (Exception, SystemExit) as exc:  # sys.exit in a grader: its error, not the run's end
            return [Grade.failed(f"group grader {self.name!r} raised {_describe(exc)}")] * len(trajectories)
        if len(values) != len(trajectories):
            reason = (
                f"group grader {self.name!r} returned {len(values)} grades for {len(trajectories)} samples"
            )
            return [Grade.failed(reason)] * len(trajectories)
        return [to_grade(v) for v in values]


@dataclass(frozen=True)
class Penalty:
    """A cheating detector: when ``grader`` scores above 0.5 the reward drops by ``amount``.

    A detector's own error is recorded but never rewarded or penalised (it is masked).
    """

    grader: Grader
    amount: float = 1.0


@dataclass
class Rubric:
    """Named graders with weights, gates and cheating penalties.

    ``gates`` maps a grader name to the names it depends on: it runs only when each of them
    scored ≥ ``gate_threshold``; otherwise it gets 0 with detail ``gated``.
    reward = Σ w_k g_k − Σ amounts of the penalties that fired (``penalty`` and ``penalties``;
    each detector's grade is kept as ``penalty:NAME``). ``concurrent``: run independent graders
    at the same time (see the module docstring).
    """

    graders: Sequence[Grader | GroupGrader] = field(default_factory=list)
    gates: Mapping[str, Sequence[str]] = field(default_factory=dict)
    penalty: Penalty | None = None
    gate_threshold: float = 1.0
    penalties: Sequence[Penalty] = ()
    concurrent: bool = True
    _order: list[Grader | GroupGrader] = field(init=False, repr=False, compare=False, default_factory=list)
    _inline: bool = field(init=False, repr=False, compare=False, default=False)
    _weights: dict[str, float] = field(init=False, repr=False, compare=False, default_factory=dict)
    _names: list[str] = field(init=False, repr=False, compare=False, default_factory=list)

    def __post_init__(self) -> None:
        names = [g.name for g in self.graders]
        if len(set(names)) != len(names):
            raise ValueError(f"rubric grader names must be unique, got {names}")
        for name, deps in self.gates.items():
            for n in [name, *deps]:
                if n not in names:
                    raise ValueError(f"rubric gate names unknown grader {n!r}; graders are {names}")
        detectors = [p.grader.name for p in self.all_penalties]
        if len(set(detectors)) != len(detectors):
            raise ValueError(f"rubric penalty names must be unique, got {detectors}")
        self._order = self._topological()
        # every grader inline (and, checked per call, every detector): nothing to overlap, so one at
        # a time, in order, on the loop
        self._inline = all(isinstance(g, Grader) and g.inline for g in self.graders)
        self._weights = {g.name: g.weight for g in self.graders}
        self._names = self.names

    def _topological(self) -> list[Grader | GroupGrader]:
        order: list[Grader | GroupGrader] = []
        pending = list(self.graders)
        while pending:
            placed = {g.name for g in order}
            ready = [g for g in pending if all(d in placed for d in self.gates.get(g.name, ()))]
            if not ready:
                raise ValueError(f"rubric gates form a cycle among {[g.name for g in pending]}")
            order += ready
            pending = [g for g in pending if g not in ready]
        return order

    @property
    def all_penalties(self) -> list[Penalty]:
        """``penalty`` (if set) then ``penalties``."""
        return ([self.penalty] if self.penalty is not None else []) + list(self.penalties)

    @property
    def names(self) -> list[str]:
        return [g.name for g in self.graders]

    @property
    def has_group_graders(self) -> bool:
        return any(isinstance(g, GroupGrader) for g in self.graders)

    async def score(self, task: Task, trajectory: Trajectory) -> Score:
        """Score one sample (group graders see a group of one)."""
        return (await self.score_group(task, [trajectory]))[0]

    async def score_group(self, task: Task, trajectories: Sequence[Trajectory]) -> list[Score]:
        """Score every sample of one task; group graders see them all together."""
        penalties = self.all_penalties
        if self._inline and all(p.grader.inline for p in penalties):  # each sample on its own, now
            return [self._score_inline(task, t, penalties) for t in trajectories]
        n = len(trajectories)
        grades: list[dict[str, Grade]] = [{} for _ in range(n)]
        found: list[list[Grade]] = [[] for _ in penalties]
        if not self.concurrent:
            for grader in self._order:
                await self._run(grader, task, trajectories, grades, sequential=True)
            for k, detector in enumerate(penalties):
                found[k] = [await detector.grader.grade(task, t) for t in trajectories]
        elif len(self._order) + len(penalties) == 1 and self._order:  # the eval hot path: no tasks
            await self._run(self._order[0], task, trajectories, grades)
        else:
            await self._run_concurrently(task, trajectories, grades, found)
        order = self._names  # the declared order, whatever order the graders finished in
        grades = [{name: g[name] for name in order if name in g} for g in grades]
        total = [0.0] * n
        for detector, results in zip(penalties, found, strict=True):
            for i, grade in enumerate(results):
                grades[i][f"penalty:{detector.grader.name}"] = grade
                if grade.ok and grade.score > 0.5:
                    total[i] += detector.amount
        return [self._combine(g, p, t) for g, p, t in zip(grades, total, trajectories, strict=True)]

    def _gate_open(self, grades: dict[str, Grade], deps: Sequence[str]) -> bool:
        """Whether a grader gated on ``deps`` runs: each of them graded, passing the threshold."""
        return all(grades[d].ok and grades[d].score >= self.gate_threshold for d in deps)

    def _score_inline(self, task: Task, trajectory: Trajectory, penalties: list[Penalty]) -> Score:
        """``score`` when every grader and detector is inline: the same grades, gates and reward,
        computed in dependency order on the calling thread."""
        grades: dict[str, Grade] = {}
        for grader in self._order:
            if self._gate_open(grades, self.gates.get(grader.name, ())):
                grades[grader.name] = grader.grade_inline(task, trajectory)  # type: ignore[union-attr]
            else:
                grades[grader.name] = Grade(score=0.0, detail="gated")
        if len(grades) > 1:
            grades = {name: grades[name] for name in self._names}  # the declared order
        penalty = 0.0
        for detector in penalties:
            grade = detector.grader.grade_inline(task, trajectory)
            grades[f"penalty:{detector.grader.name}"] = grade
            if grade.ok and grade.score > 0.5:
                penalty += detector.amount
        return self._combine(grades, penalty, trajectory)

    async def _run_concurrently(
        self,
        task: Task,
        trajectories: Sequence[Trajectory],
        grades: list[dict[str, Grade]],
        found: list[list[Grade]],
    ) -> None:
        """Each grader starts once the graders it is gated on are done; penalties start at once."""
        started: dict[str, asyncio.Task[None]] = {}

        async def node(grader: Grader | GroupGrader, deps: list[asyncio.Task[None]]) -> None:
            if deps:
                await asyncio.gather(*deps)
            await self._run(grader, task, trajectories, grades)

        async def detect(k: int, detector: Penalty) -> None:
            found[k] = list(await asyncio.gather(*(detector.grader.grade(task, t) for t in trajectories)))

        async with asyncio.TaskGroup() as group:
            for grader in self._order:  # dependencies first, so their tasks exist
                deps = [started[d] for d in self.gates.get(grader.name, ())]
                started[grader.name] = group.create_task(node(grader, deps))
            for k, detector in enumerate(self.all_penalties):
                group.create_task(detect(k, detector))

    async def _run(
        self,
        grader: Grader | GroupGrader,
        task: Task,
        trajectories: Sequence[Trajectory],
        grades: list[dict[str, Grade]],
        *,
        sequential: bool = False,
    ) -> None:
        deps = self.gates.get(grader.name, ())
        open_idx = [i for i in range(len(trajectories)) if self._gate_open(grades[i], deps)]
        for i in range(len(trajectories)):
            if i not in open_idx:
                grades[i][grader.name] = Grade(score=0.0, detail="gated")
        if not open_idx:
            return
        subset = [trajectories[i] for i in open_idx]
        if isinstance(grader, GroupGrader):
            results = await grader.grade_group(task, subset)
        elif len(subset) == 1 or sequential:
            results = [await grader.grade(task, t) for t in subset]
        else:
            results = list(await asyncio.gather(*(grader.grade(task, t) for t in subset)))
        for i, grade in zip(open_idx, results, strict=True):
            grades[i][grader.name] = grade

    def _combine(self, grades: dict[str, Grade], penalty: float, trajectory: Trajectory) -> Score:
        if trajectory.error is not None:
            return Score(grades=grades, error=f"{trajectory.error.kind}: {trajectory.error.message}")
        errors = [g.error for name, g in grades.items() if g.error and not name.startswith("penalty:")]
        if errors:
            return Score(grades=grades, error="; ".join(e for e in errors if e))
        if not math.isfinite(penalty):  # penalty amounts that overflow (or an infinite one)
            return Score(grades=grades, error=f"the penalty sum is not finite ({penalty!r})")
        weights = self._weights
        reward = sum(weights[name] * g.score for name, g in grades.items() if name in weights)
        total = reward - penalty
        if not math.isfinite(total):  # finite grades, but weights that overflow the weighted sum
            return Score(
                grades=grades,
                error=f"the reward total is not finite ({total!r}: weighted grades {reward!r}, "
                f"penalties {penalty!r})",
            )
        return Score(grades=grades, reward=total, penalty=penalty)
