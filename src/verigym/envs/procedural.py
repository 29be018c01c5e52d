"""The environment-authoring kit for procedural environments: seeded generators, sizes and splits,
and oracles that are handed their task.

- ``ProceduralEnv``: a mixin for an environment whose tasks are drawn by ``generate(rng)``. It
  gives ``tasks(n, seed=, split=)`` (``size`` tasks by default; task ``i`` depends only on the
  name, seed, split and ``i``; train and test never share a prompt) through
  ``datasets.procedural_tasks``, so an environment writes its generator and nothing else.
- ``task_oracle(solve, name=)``: an oracle policy that is handed the episode's task
  (``base.episode_task()``, set by the rollout) and replies ``solve(task, messages)``. Called outside
  an episode (an oracle behind ``verigym serve`` or a test server), it falls back on ``find``, and
  ``ProceduralEnv.task_oracle`` passes the tasks it handed out, found by prompt, so a served oracle
  still solves them. It replaces the ``_collection.TaskBook`` each environment carried, which stays
  for environments not converted yet and is deprecated.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from verigym.envs._collection import TaskBook
from verigym.envs.base import episode_task
from verigym.envs.datasets import procedural_tasks
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.types import Message, Task

__all__ = ["ProceduralEnv", "task_oracle"]


class ProceduralEnv:
    """Tasks from a seeded generator: set ``size``, define ``generate`` and ``task_name``.

    Mix it in before the harness class (``class MyEnv(ProceduralEnv, ToolEnv)``).
    """

    size: int
    _handed_out: TaskBook | None = None

    @property
    def task_name(self) -> str:
        """The generator's stream name (``{name}-{split}-{seed}-{i}`` task ids; part of every seed)."""
        raise NotImplementedError

    def generate(self, rng: random.Random) -> Task:
        """One task drawn from ``rng`` (its id is replaced)."""
        raise NotImplementedError

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        """``n`` tasks (default ``size``) of ``split``; the same arguments give the same tasks."""
        made = procedural_tasks(
            self.generate, self.size if n is None else n, seed=seed, split=split, name=self.task_name
        )
        if self._handed_out is None:
            self._handed_out = TaskBook()
        return self._handed_out.record(made)

    def task_oracle(self, solve: Callable[[Task, Sequence[Message]], Reply], *, name: str) -> Policy:
        """``task_oracle`` that, outside an episode, finds the task among those this env handed out."""

        def find(messages: Sequence[Message]) -> Task | None:
            return None if self._handed_out is None else self._handed_out.find(messages)

        return task_oracle(solve, name=name, find=find)


def task_oracle(
    solve: Callable[[Task, Sequence[Message]], Reply],
    *,
    name: str,
    find: Callable[[Sequence[Message]], Task | None] | None = None,
) -> Policy:
    """A scripted policy that replies ``solve(task, messages)`` with the episode's task.

    Outside an episode it asks ``find(messages)``; with no task it replies with nothing: it cannot
    solve what it was not given.
    """

    def reply(messages: Sequence[Message]) -> Reply:
        task = episode_task()
        if task is None and find is not None:
            task = find(messages)
        return "" if task is None else solve(task, messages)

    return ScriptedPolicy(reply, name=name)
