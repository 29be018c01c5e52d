"""The environment of ``benchmarks/soak_train.py`` (loaded as ``benchmarks/_soak_envs.py:BurstEnv``).

``BurstEnv`` is arithmetic graded by two exact-match graders, except during a burst: while the policy
that sampled a completion is at version ``burst_from`` .. ``burst_to - 1``, every task whose id hashes
even gets 1e308 from both graders, so its weighted total overflows to inf (the path issue 42's probe
found: each grade finite, the sum not). The rest of the batch stays finite, so the run keeps updating
and the burst ends. The burst depends on the policy version only, which a resumed run restores, so
an interrupted run meets the same burst as an uninterrupted one.
"""

from __future__ import annotations

import zlib
from typing import Any

from verigym.envs.builtin.arithmetic import ArithmeticEnv
from verigym.rubric import Grader, Rubric
from verigym.types import Task, Trajectory

__all__ = ["BurstEnv"]

HUGE = 1e308


class BurstEnv(ArithmeticEnv):
    def __init__(self, burst_from: int = 3, burst_to: int = 6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.burst = range(burst_from, burst_to)
        self.rubric = Rubric([Grader(self.exact), Grader(self.exact_again)])

    def _grade(self, task: Task, trajectory: Trajectory) -> float:
        versions = [c.policy_version for c in trajectory.completions if c.policy_version is not None]
        if versions and versions[0] in self.burst and zlib.crc32(task.id.encode()) % 2 == 0:
            return HUGE
        return 1.0 if trajectory.final_text.strip() == str(task.answer).strip() else 0.0

    def exact(self, task: Task, trajectory: Trajectory) -> float:
        return self._grade(task, trajectory)

    def exact_again(self, task: Task, trajectory: Trajectory) -> float:
        return self._grade(task, trajectory)
