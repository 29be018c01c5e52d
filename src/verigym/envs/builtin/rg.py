"""reasoning-gym bridge: ``verigym eval rg:<dataset>`` for any reasoning-gym dataset.

reasoning-gym (Stojanovski et al. 2025, "REASONING GYM: Reasoning Environments for Reinforcement
Learning with Verifiable Rewards") generates procedural datasets whose items are
``{"question", "answer", "metadata"}`` and scores an answer with the dataset's own
``score_answer(answer, entry) -> float``. This module wraps one as a ``DatasetEnv``:

* tasks: ``reasoning_gym.create_dataset(dataset, size=size, seed=seed, **config)``, one task per
  item (id ``rg-<dataset>-<seed>-<index>``), only a ``test`` split (reasoning-gym draws items
  from a seed; train on another ``seed``);
* prompt: the question, with a system prompt asking for the final answer in
  ``<answer>...</answer>``;
* grader ``score_answer``: the last ``<answer>`` block of the reply (the whole reply when there
  is none) scored by the dataset's own ``score_answer``, on the original item;
* ``Task.info["metadata"]`` holds the item's metadata for the grader. It restates the question
  (numbers, names), so it is declared a public info key (``public_info_keys=("metadata",)``): it
  is never sent to the model, but ``check-env``'s leak check must not count its echo of the
  prompt as a leak.

reasoning-gym is an optional dependency (``pip install 'verigym[rg]'``); without it ``rg:NAME``
is a one-line error. The oracle answers ``<answer>{answer}</answer>``; the null policy answers
nothing.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from verigym.envs.dataset_env import DatasetEnv
from verigym.envs.registry import EnvArgError
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Message, Task, Trajectory

__all__ = ["PREFIX", "SYSTEM_PROMPT", "extract_answer", "rg_env"]

PREFIX = "rg:"
SYSTEM_PROMPT = (
    "Solve the problem. Think as long as you need, then give only the final answer inside "
    "<answer></answer> tags, exactly in the format the problem asks for."
)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)


def extract_answer(text: str) -> str:
    """The last ``<answer>...</answer>`` block (reasoning removed), else the whole reply, stripped."""
    visible = _THINK.sub("", text)
    found = _ANSWER.findall(visible)
    return (found[-1] if found else visible).strip()


def _module() -> Any:
    try:
        return importlib.import_module("reasoning_gym")
    except ModuleNotFoundError:
        raise EnvArgError("rg: reasoning-gym is not installed (pip install reasoning-gym)") from None


def rg_env(
    dataset: str, size: int = 100, seed: int = 0, system_prompt: str | None = None, **config: Any
) -> DatasetEnv:
    """A ``DatasetEnv`` over reasoning-gym's ``dataset`` (see the module docstring).

    ``config`` goes to ``create_dataset`` unchanged (each dataset's own difficulty knobs).
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise EnvArgError(f"rg:{dataset}: size must be a positive integer, got {size!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise EnvArgError(f"rg:{dataset}: seed must be an integer, got {seed!r}")
    rg = _module()
    try:
        data = rg.create_dataset(dataset, size=size, seed=seed, **config)
    except Exception as exc:
        known = sorted(getattr(getattr(rg, "factory", None), "DATASETS", {}) or [])
        hint = f" (known: {', '.join(known[:12])}{', ...' if len(known) > 12 else ''})" if known else ""
        raise EnvArgError(f"rg:{dataset}: create_dataset failed: {type(exc).__name__}: {exc}{hint}") from None
    entries: dict[str, dict[str, Any]] = {}
    tasks = []
    for index, entry in enumerate(data):
        task_id = f"rg-{dataset}-{seed}-{index}"
        entries[task_id] = entry
        tasks.append(
            Task(
                id=task_id,
                prompt=(Message(role="user", content=str(entry["question"])),),
                answer=str(entry["answer"]),
                info={"metadata": _plain(entry.get("metadata", {}))},
            )
        )

    def score_answer(task: Task, trajectory: Trajectory) -> Grade:
        entry = entries.get(task.id) or {
            "question": task.prompt[-1].content,
            "answer": task.answer,
            "metadata": task.info.get("metadata", {}),
        }
        answer = extract_answer(trajectory.final_text)
        score = float(data.score_answer(answer=answer or None, entry=entry))
        return Grade(score=score, detail=f"answer {answer[:80]!r} scored {score:g} by {dataset}.score_answer")

    return DatasetEnv(
        tasks,
        rubric=Rubric([Grader(score_answer, name="score_answer")]),
        system_prompt=SYSTEM_PROMPT if system_prompt is None else system_prompt,
        name=f"rg:{dataset}",
        description=f"reasoning-gym {dataset} (size {size}, seed {seed}); its own score_answer",
        oracle_reply=lambda t: f"<answer>{t.answer}</answer>",
        public_info_keys=("metadata",),
    )


def _plain(value: Any) -> Any:
    """JSON-native metadata (tuples → lists, sets → sorted lists, other objects → str)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=repr)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
