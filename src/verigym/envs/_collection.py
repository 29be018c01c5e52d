"""Shared pieces of the built-in environment collection: argument checks and oracle lookup.

An oracle is a ``Policy``: it only sees messages. ``TaskBook`` remembers every task an
environment has handed out (``tasks()`` records them), so the oracle can find the task of an
episode by its prompt and solve it from ``Task.info`` through the same harness and tools.

Deprecated: ``TaskBook`` and ``lookup_oracle`` stay for the environments not converted yet. New
code uses ``envs.procedural``: ``task_oracle`` is handed the episode's task by the rollout, and
``ProceduralEnv`` gives ``tasks()`` from a generator (``shop`` and ``tools_user`` use both).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from verigym.envs.registry import EnvArgError
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.types import Message, Task

__all__ = ["TaskBook", "choice_arg", "int_arg", "lookup_oracle", "prompt_key"]

Key = tuple[tuple[str, str], ...]


def prompt_key(messages: Sequence[Message]) -> Key:
    """The leading non-system messages up to the first assistant message: an episode's prompt."""
    out: list[tuple[str, str]] = []
    for m in messages:
        if m.role == "assistant":
            break
        if m.role != "system":
            out.append((m.role, m.content))
    return tuple(out)


class TaskBook:
    """Tasks handed out by an environment, found again by their prompt."""

    def __init__(self) -> None:
        self._by_prompt: dict[Key, Task] = {}

    def record(self, tasks: Sequence[Task]) -> list[Task]:
        for task in tasks:
            self._by_prompt[prompt_key(task.prompt)] = task
        return list(tasks)

    def find(self, messages: Sequence[Message]) -> Task | None:
        return self._by_prompt.get(prompt_key(messages))


def lookup_oracle(book: TaskBook, solve: Callable[[Task, Sequence[Message]], Reply], *, name: str) -> Policy:
    """A scripted policy that finds the episode's task in ``book`` and replies ``solve(task, messages)``.

    A prompt it has never seen gets an empty reply (it cannot solve what it was not given).
    """

    def reply(messages: Sequence[Message]) -> Reply:
        task = book.find(messages)
        return "" if task is None else solve(task, messages)

    return ScriptedPolicy(reply, name=name)


def int_arg(env: str, name: str, value: Any, low: int, high: int) -> int:
    """``value`` if it is an integer in ``[low, high]``, else a one-line ``EnvArgError``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise EnvArgError(f"{env}: {name} must be an integer from {low} to {high}, got {value!r}")
    return value


def choice_arg(env: str, name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``, else a one-line ``EnvArgError``."""
    if value not in choices:
        raise EnvArgError(f"{env}: {name} must be one of {', '.join(choices)}, got {value!r}")
    return str(value)
