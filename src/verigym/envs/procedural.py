"""The environment-authoring kit: seeded generators, sizes and splits, and oracles that are handed
their task.

- ``ProceduralEnv``: a mixin for an environment whose tasks are drawn by ``generate(rng)``. It
  gives ``tasks(n, seed=, split=)`` (``size`` tasks by default; task ``i`` depends only on the
  name, seed, split and ``i``; train and test never share a prompt, or a ``split_key``) through
  ``datasets.procedural_tasks``, so an environment writes its generator and nothing else.
- ``HandsOutTasks``: the part of it a file- or dataset-backed environment uses: ``hand_out(tasks)``
  remembers what ``tasks()`` returns, and ``self.task_oracle`` finds those tasks by their prompt.
- ``task_oracle(solve, name=)``: an oracle policy that is handed the episode's task
  (``base.episode_task()``, set by the rollout) and replies ``solve(task, messages)``. Called outside
  an episode (an oracle behind ``verigym serve`` or a test server), it falls back on ``find``, and
  ``HandsOutTasks.task_oracle`` passes the tasks the env handed out, found by prompt, so a served
  oracle still solves them. (It retired the ``TaskBook`` each environment used to carry.)
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from verigym.envs.base import episode_task
from verigym.envs.datasets import procedural_tasks, prompt_text
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.types import Message, Task

__all__ = ["HandsOutTasks", "ProceduralEnv", "prompt_key", "task_oracle"]

PromptKey = tuple[tuple[str, str], ...]


def prompt_key(messages: Sequence[Message]) -> PromptKey:
    """The leading non-system messages up to the first assistant message: an episode's prompt."""
    out: list[tuple[str, str]] = []
    for m in messages:
        if m.role == "assistant":
            break
        if m.role != "system":
            out.append((m.role, m.content))
    return tuple(out)


class HandsOutTasks:
    """Remembers the tasks an environment handed out, so an oracle outside an episode finds them."""

    _handed_out: dict[PromptKey, Task] | None = None

    def hand_out(self, tasks: Sequence[Task]) -> list[Task]:
        """``tasks`` as a list, remembered by prompt (``tasks()`` returns ``self.hand_out(made)``)."""
        if self._handed_out is None:
            self._handed_out = {}
        for task in tasks:
            self._handed_out[prompt_key(task.prompt)] = task
        return list(tasks)

    def task_oracle(self, solve: Callable[[Task, Sequence[Message]], Reply], *, name: str) -> Policy:
        """``task_oracle`` that, outside an episode, finds the task among those this env handed out."""

        def find(messages: Sequence[Message]) -> Task | None:
            return None if self._handed_out is None else self._handed_out.get(prompt_key(messages))

        return task_oracle(solve, name=name, find=find)


class ProceduralEnv(HandsOutTasks):
    """Tasks from a seeded generator: set ``size``, define ``generate`` and ``task_name``.

    Mix it in before the harness class (``class MyEnv(ProceduralEnv, ToolEnv)``).
    """

    size: int

    @property
    def task_name(self) -> str:
        """The generator's stream name (``{name}-{split}-{seed}-{i}`` task ids; part of every seed)."""
        raise NotImplementedError

    def generate(self, rng: random.Random) -> Task:
        """One task drawn from ``rng`` (its id is replaced)."""
        raise NotImplementedError

    def split_key(self, task: Task) -> str:
        """What decides a task's split: its prompt text by default (Wordle splits by secret word)."""
        return prompt_text(task)

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        """``n`` tasks (default ``size``) of ``split``; the same arguments give the same tasks."""
        made = procedural_tasks(
            self.generate,
            self.size if n is None else n,
            seed=seed,
            split=split,
            name=self.task_name,
            key=self.split_key,
        )
        return self.hand_out(made)


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
