"""The built-in ``math`` environment: word problems with exact answers, under three harnesses.

**Tasks.** By default, templated word problems (``_math_templates``): rates (speed, work and
pipes), ratios, percentages, geometry, counting, probability and averages, each with an exact
answer (an integer, ``\\frac{p}{q}`` or a multiple of ``\\pi``) as ``Task.answer``. ``topics``
restricts the templates (a list or a comma-separated string). ``path=`` loads a user JSONL file
instead, in either common shape, detected per row:

- GSM8K: ``{"question": ..., "answer": "...reasoning...\\n#### 42"}`` (the text after ``####``,
  without thousands separators, is the reference; the whole answer goes to ``info["solution"]``);
- MATH: ``{"problem": ..., "solution": "... \\boxed{\\frac{1}{2}} ..."}`` (the last ``\\boxed{}``
  of the solution is the reference, or an ``answer`` field when the row has one).

A malformed row is a ``DatasetError`` naming ``file:line``. A file has only the ``test`` split.

**Harnesses** (``harness=``, the same tasks under each, for ``verigym eval --harness`` and
``verigym compare``): ``single`` — one answer; ``python_tool`` — a ``python(code)`` tool that
runs code in the bubblewrap sandbox (no network, stdout returned) for up to ``max_turns`` turns;
``self_check`` — after the first answer the environment asks the model to check its work, and
the second answer is graded. ``tool_variant=SEED`` (python_tool only) renames and rewords the
tool (see ``tools.variants``).

**Grader.** ``graders.math.math_grader`` on the final answer (last ``\\boxed{}`` first), with
``task.info["math_mode"]`` or ``mode`` as the strictness mode.

**Difficulty** (``level`` 1-4): 1 — one step with small numbers; 2 — two steps, fractions
appear (round-trip speeds, two pipes, discount plus tax, combinations); 3 — three steps
(a drain pipe, three-way ratios, anagram counts, at-least-one probabilities, areas in
``\\pi``); 4 — the hardest variants (delayed trains, complementary counting, composite areas).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigym._files import read_jsonl
from verigym.envs._args import choice_arg, int_arg
from verigym.envs.builtin._math_templates import TEMPLATES
from verigym.envs.datasets import DatasetError
from verigym.envs.procedural import ProceduralEnv
from verigym.envs.registry import EnvArgError
from verigym.envs.tool import ToolEnv
from verigym.graders.code.sandbox import python_executable, run_sandboxed
from verigym.graders.math import extract_answer, math_grader
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.rubric import Rubric
from verigym.tools import Tool
from verigym.types import Message, Task, ToolCall, Trajectory

__all__ = ["HARNESSES", "TOPICS", "MathEnv", "load_math_file", "python"]

HARNESSES = ("single", "python_tool", "self_check")
TOPICS = tuple(TEMPLATES)
FORMAT = "Put the final answer in \\boxed{}."
SELF_CHECK = (
    "Check your solution step by step. If you find a mistake, fix it. End with the final answer in \\boxed{}."
)
PYTHON_SYSTEM = (
    "You can run Python with the tool you are given (standard library only, no network; print what you "
    "need to see). When you are sure, answer with the final answer in \\boxed{}."
)
_GSM_ANSWER = re.compile(r"####\s*(.+?)\s*$", re.S)


def python(code: str) -> str:
    """Run a Python program in a sandbox and return what it printed (10 s, no network, no files kept).

    Args:
        code: the program; use print() to see results.
    """
    result = run_sandboxed([python_executable(), "-I", "main.py"], files={"main.py": code}, timeout_s=10.0)
    out = result.stdout[-4000:]
    if result.timed_out or result.killed_reason:
        out += f"\n[killed: {result.killed_reason or 'timeout'}]"
    elif result.exit_code != 0:
        out += f"\n[exit code {result.exit_code}]\n{result.stderr[-2000:]}"
    return out or "(no output)"


def _row_task(row: Any, where: str, index: int, stem: str) -> Task:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for field in ("question", "answer", "problem", "solution"):
        if field in row and row[field] is None:
            raise DatasetError(f"{where}: field {field!r} is null (expected text)")
    if isinstance(row.get("question"), str) and "answer" in row:
        match = _GSM_ANSWER.search(str(row["answer"]))
        if match is None:
            raise DatasetError(f"{where}: GSM8K field 'answer' must end with '#### <final answer>'")
        question, answer, solution = row["question"], match.group(1).replace(",", ""), str(row["answer"])
    elif isinstance(row.get("problem"), str) and isinstance(row.get("solution"), str):
        question, solution = row["problem"], row["solution"]
        boxed = "\\boxed" in solution or "\\fbox" in solution
        found = (
            str(row["answer"])
            if "answer" in row
            else extract_answer(solution, reference=True)
            if boxed
            else None
        )
        if not found:
            raise DatasetError(
                f"{where}: MATH field 'solution' has no \\boxed{{}} answer (and no 'answer' field)"
            )
        answer = found
    else:
        keys = ", ".join(map(str, row)) or "none"
        raise DatasetError(
            f"{where}: expected fields question/answer (GSM8K) or problem/solution (MATH); row has: {keys}"
        )
    task_id = str(row.get("id", f"{stem}-{index}"))
    prompt = (Message(role="user", content=f"{question.strip()}\n\n{FORMAT}"),)
    return Task(id=task_id, prompt=prompt, answer=answer, info={"solution": solution})


def load_math_file(path: str | Path) -> list[Task]:
    """Tasks from a GSM8K- or MATH-shaped JSONL file (see the module docstring)."""
    p = Path(path)
    tasks: list[Task] = []
    seen: set[str] = set()
    for where, row in read_jsonl(p, error=DatasetError):
        task = _row_task(row, where, len(tasks), p.stem)
        if task.id in seen:
            raise DatasetError(f"{where}: duplicate id {task.id!r}")
        seen.add(task.id)
        tasks.append(task)
    return tasks


def _topics(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return TOPICS
    items = [t.strip() for t in value.split(",")] if isinstance(value, str) else [str(t) for t in value]
    bad = [t for t in items if t not in TEMPLATES]
    if not items or bad:
        raise EnvArgError(f"math: unknown topic(s) {bad or items}; topics are {', '.join(TOPICS)}")
    return tuple(dict.fromkeys(items))


class MathEnv(ProceduralEnv, ToolEnv):
    """Word problems with exact answers (or a GSM8K/MATH file) under a single, tool or self-check harness."""

    name = "math"
    description = (
        "Templated word problems (rates, ratios, geometry, counting) or GSM8K/MATH files; math grader."
    )

    def __init__(
        self,
        level: int = 2,
        topics: str | Sequence[str] | None = None,
        path: str | None = None,
        harness: str = "single",
        mode: str = "equivalent",
        size: int = 1000,
        max_turns: int = 6,
        system_prompt: str | None = None,
        tool_variant: int | None = None,
    ) -> None:
        self.level = int_arg("math", "level", level, 1, 4)
        self.topics = _topics(topics)
        self.harness = choice_arg("math", "harness", harness, HARNESSES)
        self.size = int_arg("math", "size", size, 1, 10**9)
        try:
            grader = math_grader(name="correct", mode=mode)
        except ValueError as exc:
            raise EnvArgError(f"math: {exc}") from None
        tools = (Tool.from_function(python),) if self.harness == "python_tool" else ()
        turns = {"single": 1, "self_check": 2}.get(
            self.harness, int_arg("math", "max_turns", max_turns, 2, 50)
        )
        if system_prompt is None and self.harness == "python_tool":
            system_prompt = PYTHON_SYSTEM
        if tool_variant is not None and self.harness != "python_tool":
            raise EnvArgError(
                "math: tool_variant needs harness='python_tool' (the other harnesses have no tools)"
            )
        super().__init__(
            tools,
            rubric=Rubric([grader]),
            system_prompt=system_prompt,
            max_turns=turns,
            tool_variant=tool_variant,
        )
        self.path = path
        self._file_tasks: list[Task] | None = None

    @property
    def task_name(self) -> str:
        return f"math-l{self.level}-{'+'.join(self.topics)}"

    def generate(self, rng: random.Random) -> Task:
        topic = rng.choice(self.topics)
        question, answer = TEMPLATES[topic](rng, self.level)
        return Task(id="", prompt=(Message(role="user", content=f"{question} {FORMAT}"),), answer=answer)

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        """Generated tasks (train/test disjoint), or the file's tasks (test split only, file order)."""
        if self.path is None:
            return super().tasks(n, seed=seed, split=split)
        if split != "test":
            raise DatasetError(f"math: a task file has only the 'test' split, not {split!r}")
        if self._file_tasks is None:
            self._file_tasks = load_math_file(self.path)
        return self.hand_out(self._file_tasks if n is None else self._file_tasks[:n])

    async def respond(self, trajectory: Trajectory, state: dict[str, Any]) -> list[Message]:
        if self.harness == "self_check":
            return [Message(role="user", content=SELF_CHECK)]
        return await super().respond(trajectory, state)

    async def done(self, trajectory: Trajectory, state: dict[str, Any]) -> bool:
        if self.harness == "self_check":
            return sum(t.source == "model" for t in trajectory.turns) >= 2
        return await super().done(trajectory, state)

    def oracle_policy(self) -> Policy:
        """Answers the reference in ``\\boxed{}``, through the harness (runs the tool once; checks once)."""
        harness = self.harness

        def solve(task: Task, messages: Sequence[Message]) -> Reply:
            boxed = f"The answer is \\boxed{{{task.answer}}}."
            first = not any(m.role == "assistant" for m in messages)
            if harness == "python_tool" and first:
                code = f"answer = {json.dumps(task.answer)}\nprint(answer)"
                return "", [ToolCall(id="oracle-1", name="python", arguments=json.dumps({"code": code}))]
            if harness == "self_check" and not first:
                return f"I checked every step. {boxed}"
            return boxed

        return self.task_oracle(solve, name="math-oracle")

    def null_policy(self) -> Policy:
        """Gives no answer."""
        return ScriptedPolicy(lambda messages: "I don't know.", name="math-null")
