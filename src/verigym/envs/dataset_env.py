"""``DatasetEnv``: a single-turn environment over a fixed list of tasks, in a few lines::

    env = DatasetEnv(load_jsonl("qa.jsonl"), rubric=Rubric([Grader(exact_match)]))

Tasks come as a list (the ``test`` split), a ``{split: tasks}`` dict, or a file path loaded on
first use (so construction reads nothing). ``seed`` reorders tasks only when ``shuffle=True``.
Its oracle answers each task's reference answer (or ``oracle_reply(task)``, when a grader wants
a format such as ``\\boxed{}``); its null policy answers nothing.

``public_info_keys`` names ``Task.info`` keys whose values the prompt states on purpose (a keyword
to use, or metadata that restates the question, as reasoning-gym's does): they still reach only
the graders, but ``check-env``'s leak check does not report them when they echo the prompt.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from verigym.envs.base import SingleTurnEnv
from verigym.envs.datasets import DatasetError, load_tasks
from verigym.policies.base import Policy
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Rubric
from verigym.types import Message, Task

__all__ = ["DatasetEnv", "lookup_policy"]


def _key(messages: Sequence[Message]) -> tuple[tuple[str, str], ...]:
    return tuple((m.role, m.content) for m in messages if m.role != "system")


def lookup_policy(
    tasks: Sequence[Task], *, name: str = "oracle", reply: Callable[[Task], str] | None = None
) -> Policy:
    """A scripted policy that answers each of ``tasks`` (recognised by its prompt).

    Its reply is ``reply(task)``, by default the reference answer as it is; anything else gets "".
    """
    make = reply or (lambda t: t.answer or "")
    table = {_key(t.prompt): make(t) for t in tasks}

    def answer(messages: Sequence[Message]) -> str:
        return table.get(_key(messages), "")

    return ScriptedPolicy(answer, name=name)


class DatasetEnv(SingleTurnEnv):
    """One prompt, one answer, over tasks from a list, a dict of splits or a dataset file."""

    def __init__(
        self,
        tasks: Sequence[Task] | Mapping[str, Sequence[Task]] | str | Path,
        *,
        rubric: Rubric | None = None,
        system_prompt: str | None = None,
        name: str = "dataset",
        description: str = "",
        shuffle: bool = False,
        fields: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
        oracle_reply: Callable[[Task], str] | None = None,
        public_info_keys: Sequence[str] = (),
    ) -> None:
        """``tasks``: a list, ``{split: tasks}`` or a JSONL/Parquet path (``fields`` maps its columns);
        ``oracle_reply(task)``: the oracle's reply (default the reference answer);
        ``public_info_keys``: ``Task.info`` keys whose values the prompt states on purpose, e.g.
        reasoning-gym metadata that restates the question — still hidden from the model's view of
        ``info``, but not reported by ``check-env``'s leak check (see the module docstring)."""
        super().__init__(rubric=rubric, system_prompt=system_prompt, timeout_s=timeout_s)
        self.public_info_keys = tuple(public_info_keys)
        self.name = name
        self.description = description or self.description
        self.shuffle = shuffle
        self._source = tasks
        self._fields = dict(fields or {})
        self._splits: dict[str, list[Task]] | None = None
        self._oracle_reply = oracle_reply

    def _load(self) -> dict[str, list[Task]]:
        if self._splits is None:
            src = self._source
            if isinstance(src, str | Path):
                self._splits = {"test": load_tasks(src, **self._fields)}
            elif isinstance(src, Mapping):
                self._splits = {str(k): list(v) for k, v in src.items()}
            else:
                self._splits = {"test": list(src)}
        return self._splits

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        splits = self._load()
        if split not in splits:
            raise DatasetError(f"{self.name}: no split {split!r} (splits: {', '.join(splits)})")
        out = list(splits[split])
        if self.shuffle:
            random.Random(f"verigym/{self.name}/{seed}").shuffle(out)
        return out if n is None else out[:n]

    def oracle_policy(self) -> Policy | None:
        """Answers ``oracle_reply(task)`` (default: the reference answer); None when tasks have no answers."""
        every = [t for ts in self._load().values() for t in ts]
        if not every or any(t.answer is None for t in every):
            return None
        return lookup_policy(every, name=f"{self.name}-oracle", reply=self._oracle_reply)

    def null_policy(self) -> Policy:
        return ScriptedPolicy(lambda messages: "", name=f"{self.name}-null")
