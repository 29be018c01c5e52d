"""Environments for tests/hardening/test_hard_nonfinite.py (loaded by ``file.py:attr`` names).

``OverflowEnv``: arithmetic, graded by two exact-match graders weighted 1e308 each, so a correct
answer's weighted total overflows to inf. ``ExitEnv``: arithmetic whose harness calls ``sys.exit`` on
every sample (``every=True``) or on every third rollout."""

from __future__ import annotations

import sys
import zlib
from typing import Any

from verigym.envs.builtin.arithmetic import ArithmeticEnv
from verigym.rubric import Grader, Rubric
from verigym.types import Sampling, Task, Trajectory


def right(task: Task, trajectory: Trajectory) -> float:
    return 1.0 if trajectory.final_text.strip() == str(task.answer).strip() else 0.0


def also_right(task: Task, trajectory: Trajectory) -> float:
    return right(task, trajectory)


class OverflowEnv(ArithmeticEnv):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rubric = Rubric([Grader(right, weight=1e308), Grader(also_right, weight=1e308)])


class ExitEnv(ArithmeticEnv):
    def __init__(self, every: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.every = every
        self.calls = 0

    async def rollout(self, task: Task, policy: Any, sampling: Sampling) -> Trajectory:
        self.calls += 1
        if self.every or self.calls % 3 == 1:
            sys.exit(3)
        return await super().rollout(task, policy, sampling)


class BurstEnv(ArithmeticEnv):
    """Arithmetic whose two graders give 1e308 each (weighted total: inf) to the tasks whose id hashes
    even while the sampling policy is at versions ``burst_from`` .. ``burst_to - 1``: a non-finite
    reward burst at the same steps of any run, interrupted or not (the version is resumed)."""

    def __init__(self, burst_from: int = 3, burst_to: int = 6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.burst = range(burst_from, burst_to)
        self.rubric = Rubric([Grader(self.exact), Grader(self.exact_again)])

    def exact(self, task: Task, trajectory: Trajectory) -> float:
        versions = [c.policy_version for c in trajectory.completions if c.policy_version is not None]
        if versions and versions[0] in self.burst and zlib.crc32(task.id.encode()) % 2 == 0:
            return 1e308
        return right(task, trajectory)

    def exact_again(self, task: Task, trajectory: Trajectory) -> float:
        return self.exact(task, trajectory)
