"""The served environments and their tasks, and what of them may go over the wire.

``ServedEnv`` is one environment under its served name: its splits (probed once), its task lists per
``(split, seed)`` (grown on demand, so task ``i`` costs ``env.tasks(i + 1, ...)`` once), a per-list counter
for resets that name no index, and ``public_task`` — the only view of a ``Task`` that leaves the server
(id, split, seed, index, prompt: never ``answer`` or ``info``).

``TaskRef`` names a task; ``pick`` resolves one from a reset's fields, with a one-line ``FieldError``
naming the field when a value is wrong.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from verigym.envs.base import Environment
from verigym.tools import tool_parts
from verigym.types import Task

__all__ = ["ALL_SPLITS", "FieldError", "ServedEnv", "TaskRef", "public_task", "tool_specs"]

ALL_SPLITS = ("train", "validation", "test")
_MAX_INDEX = 10**7


class FieldError(ValueError):
    """A request field with a wrong value; the message names it and what was expected."""


@dataclass(frozen=True)
class TaskRef:
    """A task's public name: ``env.tasks(index + 1, seed=seed, split=split)[index]`` of the served env."""

    env: str
    split: str
    seed: int
    index: int


def public_task(ref: TaskRef, task: Task) -> dict[str, Any]:
    """What a client may know of a task (ORS's ``task_spec``): never its answer or ``info``."""
    return {
        "id": task.id,
        "env": ref.env,
        "split": ref.split,
        "seed": ref.seed,
        "index": ref.index,
        "prompt": [m.to_openai() for m in task.prompt],
    }


def _int_field(data: dict[str, Any], name: str, default: int | None, low: int = 0) -> int | None:
    value = data.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= _MAX_INDEX:
        raise FieldError(f"{name} must be an integer in {low}..{_MAX_INDEX}, got {value!r}")
    return value


@dataclass
class ServedEnv:
    """One environment under its served ``name`` (module doc)."""

    name: str
    env: Environment
    _splits: tuple[str, ...] | None = None
    _lists: dict[tuple[str, int], tuple[list[Task], bool]] = field(default_factory=dict)
    _counters: dict[tuple[str, int], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits of train / validation / test the environment has (asked once, one task each)."""
        if self._splits is None:
            found = []
            for split in ALL_SPLITS:
                try:
                    if self.env.tasks(1, seed=0, split=split):
                        found.append(split)
                except Exception:  # a split the environment does not have
                    continue
            self._splits = tuple(found)
        return self._splits

    def check_split(self, split: Any) -> str:
        if not isinstance(split, str) or split not in self.splits:
            raise FieldError(
                f"split must be one of {', '.join(self.splits) or 'none'} for {self.name}, got {split!r}"
            )
        return split

    def tasks(self, split: str, seed: int, upto: int | None) -> list[Task]:
        """The first ``upto`` tasks of ``(split, seed)`` (all of them when None; fewer when the split has
        fewer). Lists are cached and grown by doubling."""
        self.check_split(split)
        key = (split, seed)
        with self._lock:
            have, complete = self._lists.get(key, ([], False))
            if complete or (upto is not None and len(have) >= upto):
                return have if upto is None else have[:upto]
            want = None if upto is None else max(upto, 2 * len(have), 16)
            if want is not None and self.size() is not None:
                want = min(want, max(upto or 0, self.size() or 0))
            made = self.env.tasks(want, seed=seed, split=split)
            complete = want is None or len(made) < want or len(made) >= (self.size() or len(made) + 1)
            self._lists[key] = (made, complete)
            return made if upto is None else made[:upto]

    def count(self, split: str, seed: int) -> int:
        """How many tasks ``(split, seed)`` has (a procedural environment's ``size`` without making them)."""
        size = self.size()
        return size if size is not None else len(self.tasks(split, seed, None))

    def size(self) -> int | None:
        """The split size a procedural environment declares (its ``size``), known without making tasks."""
        size = getattr(self.env, "size", None)
        return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None

    def task(self, split: str, seed: int, index: int) -> Task:
        size = self.size()
        if size is not None and index >= size:
            raise FieldError(f"index must be below {size} (the tasks of {self.name} {split}), got {index}")
        found = self.tasks(split, seed, index + 1)
        if index >= len(found):
            raise FieldError(
                f"index must be below {len(found)} (the tasks of {self.name} {split} seed {seed}), got {index}"
            )
        return found[index]

    def pick(self, data: dict[str, Any]) -> tuple[TaskRef, Task]:
        """The task a reset's fields name (``docs/envserver.md``: split, seed, index or task_id)."""
        split = self.check_split(data.get("split", "test"))
        seed = _int_field(data, "seed", 0)
        assert seed is not None
        index = _int_field(data, "index", None)
        task_id = data.get("task_id")
        if task_id is not None:
            if not isinstance(task_id, str):
                raise FieldError(f"task_id must be a string, got {task_id!r}")
            for i, task in enumerate(self.tasks(split, seed, None)):
                if task.id == task_id:
                    return TaskRef(self.name, split, seed, i), task
            raise FieldError(f"task_id {task_id!r} is not a task of {self.name} {split} seed {seed}")
        if index is None:
            with self._lock:
                index = self._counters.get((split, seed), 0)
                self._counters[(split, seed)] = index + 1
            bound = self.size()
            if bound is None and index >= len(self.tasks(split, seed, index + 1)):
                bound = len(self.tasks(split, seed, None))
            if bound is not None and index >= bound:
                index %= max(bound, 1)
                with self._lock:
                    self._counters[(split, seed)] = index + 1
        return TaskRef(self.name, split, seed, index), self.task(split, seed, index)


def tool_specs(env: Environment) -> list[tuple[str, str, dict[str, Any]]]:
    """The environment's tools as ``(name, description, JSON-schema parameters)`` (from ``tool_schemas()``:
    OpenAI function tools, or bare ``{"name", ...}``)."""
    return tool_parts(env.tool_schemas())
