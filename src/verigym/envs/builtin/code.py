"""The built-in ``code`` environment: write a Python function that passes hidden tests.

**Task.** One of 42 function-writing problems written for verigym
(``envs/builtin/data/code_problems*.py``): a statement with the function's signature. The hidden
tests (``assert`` lines calling the function) are ``Task.info["tests"]``; the function's name
is ``info["entry_point"]`` (named in the prompt on purpose, so it is a public info key); a
reference solution is ``info["solution"]`` (what the oracle answers).

**Harness.** Single-turn. The answer's last ```python block is the candidate.

**Grader.** ``graders.code.code_grader``: the candidate runs in the bubblewrap sandbox and each
assert is one case, compared outside the sandbox, so exit tricks, patched asserts and
always-equal objects cannot pass. ``mode="all"`` (default) scores 1 only when every test
passes; ``mode="fraction"`` scores the fraction passed. Where bubblewrap is missing the grade
is an error (not a zero) unless ``unsafe_no_sandbox=True``.

**Difficulty.** ``tier``: 1 (15 easy problems: loops, strings, arithmetic), 2 (15 medium:
parsing, classic algorithms, edge cases), 3 (12 hard: dynamic programming, graphs, parsers,
performance-bound inputs); None takes all tiers.

**Splits.** Problems are split by a stable hash of their id into ``test`` and ``train``
(disjoint, about half each); ``split="all"`` gives every problem. ``seed`` shuffles the order.
"""

from __future__ import annotations

import random
from typing import Any

from verigym.envs._args import choice_arg
from verigym.envs.base import SingleTurnEnv
from verigym.envs.builtin.data.code_problems import TIER1
from verigym.envs.builtin.data.code_problems_hard import TIER2, TIER3
from verigym.envs.datasets import DatasetError, split_of
from verigym.envs.procedural import HandsOutTasks
from verigym.envs.registry import EnvArgError
from verigym.graders.code import code_grader
from verigym.policies.base import Policy
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Rubric
from verigym.types import Message, Task

__all__ = ["PROBLEMS", "CodeEnv"]

PROBLEMS: tuple[dict[str, Any], ...] = tuple(TIER1 + TIER2 + TIER3)

INSTRUCTIONS = (
    "Answer with the complete function (and any imports it needs) in one ```python code block. "
    "Use only the Python standard library; do not read input or print."
)


def _task(problem: dict[str, Any]) -> Task:
    text = f"{problem['prompt']}\n\n{INSTRUCTIONS}"
    info = {
        "tests": problem["tests"],
        "entry_point": problem["entry_point"],
        "solution": problem["solution"],
        "tier": problem["tier"],
    }
    return Task(id=f"code-{problem['id']}", prompt=(Message(role="user", content=text),), info=info)


class CodeEnv(HandsOutTasks, SingleTurnEnv):
    """Write a Python function; hidden tests run in the bubblewrap sandbox."""

    name = "code"
    description = "Write a Python function; hidden tests run in the bubblewrap sandbox."
    public_info_keys = ("entry_point",)

    def __init__(
        self,
        tier: int | None = None,
        mode: str = "all",
        timeout_s: float = 5.0,
        unsafe_no_sandbox: bool = False,
        system_prompt: str | None = None,
    ) -> None:
        if tier is not None and (isinstance(tier, bool) or tier not in (1, 2, 3)):
            raise EnvArgError(f"code: tier must be 1, 2, 3 or omitted (all tiers), got {tier!r}")
        self.tier = tier
        self.mode = choice_arg("code", "mode", mode, ("all", "fraction"))
        if not isinstance(timeout_s, int | float) or isinstance(timeout_s, bool) or not 0 < timeout_s <= 120:
            raise EnvArgError(f"code: timeout_s must be a number of seconds in (0, 120], got {timeout_s!r}")
        grader = code_grader(
            name="tests", mode=self.mode, timeout_s=float(timeout_s), unsafe_no_sandbox=unsafe_no_sandbox
        )
        super().__init__(rubric=Rubric([grader]), system_prompt=system_prompt)

    def problems(self) -> list[dict[str, Any]]:
        """The problems of the chosen tier(s), in file order."""
        return [p for p in PROBLEMS if self.tier is None or p["tier"] == self.tier]

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        """The first ``n`` problems of ``split`` (test / train / all), shuffled by ``seed``."""
        if split not in ("test", "train", "all"):
            raise DatasetError(f"code: unknown split {split!r}; expected test, train or all")
        chosen = [p for p in self.problems() if split == "all" or split_of(f"code/{p['id']}", 0.5) == split]
        random.Random(f"verigym/code/{seed}").shuffle(chosen)
        made = [_task(p) for p in chosen]
        return self.hand_out(made if n is None else made[:n])

    def oracle_policy(self) -> Policy:
        """Answers the reference solution in a ```python block."""
        return self.task_oracle(lambda task, _: f"```python\n{task.info['solution']}```", name="code-oracle")

    def null_policy(self) -> Policy:
        """Answers a function that is not the one asked for."""
        stub = "```python\ndef solution(*args):\n    return None\n```"
        return ScriptedPolicy(lambda messages: stub, name="code-null")
