"""Small environments for eval tests: ``AddEnv`` asks "What is A + B?" and grades the last integer."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigym.envs.base import SingleTurnEnv
from verigym.envs.tool import ToolEnv
from verigym.rubric import Grader, GroupGrader, Rubric
from verigym.types import Message, Task, Trajectory


def correct(task: Task, trajectory: Trajectory) -> float:
    nums = re.findall(r"-?\d+", trajectory.final_text)
    return 1.0 if nums and nums[-1] == task.answer else 0.0


def brevity(task: Task, trajectories: Sequence[Trajectory]) -> list[float]:
    lengths = [len(t.final_text) for t in trajectories]
    return [1.0 if n == min(lengths) else 0.0 for n in lengths]


def _crash_on(every: int) -> Any:
    def sometimes(task: Task, trajectory: Trajectory) -> float:
        if int(task.id.rsplit("-", 1)[1]) % every == 0:
            raise RuntimeError(f"grader bug on {task.id}")
        return 1.0

    return sometimes


class AddEnv(SingleTurnEnv):
    name = "add"
    description = "integer addition (test env)"

    def __init__(
        self,
        group: bool = False,
        crash: bool = False,
        path: str | None = None,
        crash_every: int = 0,
        **_: Any,
    ) -> None:
        graders: list[Grader | GroupGrader] = [Grader(correct, name="correct")]
        if group:
            graders.append(GroupGrader(brevity, weight=0.0, name="brevity"))
        if crash:
            graders.append(Grader(lambda t, tr: 1 / 0, weight=0.0, name="crashes"))
        if crash_every:  # a grader that raises on every crash_every-th task (add-SEED-I with I % n == 0)
            graders.append(Grader(_crash_on(crash_every), weight=0.0, name="sometimes"))
        super().__init__(rubric=Rubric(graders))
        self.path = path

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        if self.path:
            return self._from_file(n)
        out = []
        for i in range(n or 20):
            rng = random.Random(f"{seed}-{i}")
            a, b = rng.randint(1, 99), rng.randint(1, 99)
            prompt = (Message(role="user", content=f"What is {a} + {b}?"),)
            out.append(Task(id=f"add-{seed}-{i}", prompt=prompt, answer=str(a + b)))
        return out

    def _from_file(self, n: int | None) -> list[Task]:
        assert self.path is not None
        out = []
        for line_no, line in enumerate(Path(self.path).read_text().splitlines(), start=1):
            try:
                row = json.loads(line)
                out.append(
                    Task(id=str(row["id"]), prompt=(Message(role="user", content=row["q"]),), answer=row["a"])
                )
            except (ValueError, KeyError) as exc:
                raise ValueError(
                    f"{self.path}:{line_no}: expected a JSON object with id, q, a ({exc})"
                ) from None
        return out[:n]


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


class AddToolEnv(ToolEnv):
    """AddEnv's tasks with an ``add`` tool offered."""

    name = "add-tools"

    def __init__(self) -> None:
        super().__init__([add], rubric=Rubric([Grader(correct, name="correct")]), max_turns=3)

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return AddEnv().tasks(n, seed=seed, split=split)
