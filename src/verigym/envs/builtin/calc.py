"""The built-in ``calc`` environment: a product the model can only give by calling a tool.

Each task is a product of two ``digits``-digit numbers (``417*823=``). The model has one tool,
``calc(expr)``, which evaluates an integer expression; it must call it, read the result and
copy it into its answer. An episode is two model turns::

    <|user|>417*823=<|end|>
    <|assistant|><tool_call>{"name": "calc", "arguments": {"expr": "417*823"}}</tool_call><|end|>
    <|tool|>343191<|end|>
    <|assistant|>343191<|end|>

Graders: ``correct`` (weight 1): the final integer equals the product *and* a ``calc`` call
returned it, so an answer computed without the tool (or guessed) scores 0. ``tool_call_ok``
(weight 0, a metric: it shows in ``grader/tool_call_ok`` of every RL step and in the eval's
per-grader means): the model's first turn is a well-formed call that does the task: exactly one
``calc`` call and no other text, whose markup and JSON parse, whose arguments validate, that ran
without an error, on the expression the prompt asks for.

The default prompt is the bare expression, for the tiny character-level model (which learns the
call from SFT on the oracle's trajectories); ``verbose=True`` tells a real LLM what to do.
``schema="brief"`` offers the tool as ``[{"name": "calc"}]`` (a short context for the tiny
model; not an OpenAI-valid schema), ``"full"`` (default) as the OpenAI function schema.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import Any

from verigym.envs._args import choice_arg, int_arg
from verigym.envs.builtin.arithmetic import evaluate, parse_integer
from verigym.envs.procedural import ProceduralEnv
from verigym.envs.registry import EnvArgError
from verigym.envs.tool import ToolEnv
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Message, Task, ToolCall, Trajectory

__all__ = ["CalcEnv", "calc", "correct", "tool_call_ok"]

TOOL = "calc"
_EXPR = re.compile(r"\s*\d+(?:\s*[-+*]\s*\d+)*\s*")
_ASKED = re.compile(r"\d+\*\d+")


def calc(expr: str) -> str:
    """Evaluate an integer expression with + - * (e.g. "417*823"); returns the integer."""
    if len(expr) > 200 or not _EXPR.fullmatch(expr):
        raise ValueError("expr must be integers joined by + - * (e.g. 417*823)")
    tokens = re.findall(r"\d+|[-+*]", expr)
    return str(evaluate([int(t) for t in tokens[::2]], tokens[1::2]))


def _tool_results(trajectory: Trajectory) -> list[str]:
    return [m.content.strip() for t in trajectory.turns if t.source == "env" for m in t.messages]


def correct(task: Task, trajectory: Trajectory) -> Grade:
    """1 when the final integer equals the reference and a ``calc`` call returned it, else 0."""
    if task.answer is None:
        raise ValueError(f"task {task.id} has no reference answer")
    model_turns = [t for t in trajectory.turns if t.source == "model"]
    if len(model_turns) < 2:
        return Grade(score=0.0, detail="no answer after a tool call")
    got = parse_integer(trajectory.final_text)
    if got is None:
        return Grade(score=0.0, detail="no integer answer found")
    if task.answer not in _tool_results(trajectory):
        return Grade(score=0.0, detail=f"no calc call returned {task.answer}")
    return Grade(score=float(got == int(task.answer)), detail=f"expected {task.answer}, got {got}")


def tool_call_ok(task: Task, trajectory: Trajectory) -> Grade:
    """1 when the first model turn is exactly one ``calc`` call, with no other text, that ran without an
    error on the expression the task asks for (a well-formed call that does the task), else 0."""
    first = next((t for t in trajectory.turns if t.source == "model"), None)
    if first is None:
        return Grade(score=0.0, detail="no model turn")
    calls = [c for m in first.messages for c in m.tool_calls]
    text = "".join(m.content for m in first.messages).strip()
    if len(calls) != 1:
        return Grade(score=0.0, detail=f"{len(calls)} parsed tool calls")
    if text:
        return Grade(score=0.0, detail=f"text beside the call: {text[:40]!r}")
    results = _tool_results(trajectory)
    if not results or results[0].startswith("Error"):
        return Grade(score=0.0, detail=results[0][:80] if results else "no tool result")
    asked = _asked(task)
    got = json.loads(calls[0].arguments).get("expr")  # it ran, so it is a JSON object with expr
    if asked is not None and str(got).replace(" ", "") != asked:
        return Grade(score=0.0, detail=f"called calc on {got!r}, the task asks for {asked!r}")
    return Grade(score=1.0, detail=f"{calls[0].name}({calls[0].arguments})")


def _asked(task: Task) -> str | None:
    """The product the task's prompt asks for (``417*823``)."""
    found = _ASKED.search(" ".join(m.content for m in task.prompt if m.role == "user"))
    return None if found is None else found.group(0)


class CalcEnv(ProceduralEnv, ToolEnv):
    """Multiply two numbers through the ``calc`` tool and copy its result into the answer."""

    name = "calc"
    description = "Multiply two 3-digit numbers through a calc tool and copy its result (tool use)."

    def __init__(
        self,
        digits: int = 3,
        verbose: bool = False,
        schema: str = "full",
        size: int = 5000,
        max_turns: int = 3,
    ) -> None:
        rubric = Rubric(
            [Grader(correct, name="correct"), Grader(tool_call_ok, weight=0.0, name="tool_call_ok")]
        )
        super().__init__(
            [calc],
            rubric=rubric,
            max_turns=int_arg("calc", "max_turns", max_turns, 2, 20),
            tool_timeout_s=5.0,
            max_tool_output_chars=200,
        )
        self.digits = int_arg("calc", "digits", digits, 1, 9)
        if not isinstance(verbose, bool):
            raise EnvArgError(f"calc: verbose must be true or false, got {verbose!r}")
        self.verbose = verbose
        self.schema = choice_arg("calc", "schema", schema, ("full", "brief"))
        self.size = int_arg("calc", "size", size, 1, 10**9)

    def tool_schemas(self) -> list[dict[str, Any]] | None:
        if self.schema == "brief":
            return [{"name": t.name} for t in self.tools]
        return super().tool_schemas()

    def generate(self, rng: random.Random) -> Task:
        """``a*b`` with two ``digits``-digit numbers (bare ``a*b=``, or a sentence when ``verbose``)."""
        low = 0 if self.digits == 1 else 10 ** (self.digits - 1)
        a, b = rng.randint(low, 10**self.digits - 1), rng.randint(low, 10**self.digits - 1)
        expr = f"{a}*{b}"
        if self.verbose:
            text = f"Compute {expr} with the {TOOL} tool, then reply with the integer it returned."
        else:
            text = f"{expr}="
        return Task(id="", prompt=(Message(role="user", content=text),), answer=str(a * b))

    @property
    def task_name(self) -> str:
        """``calc-d{digits}``: the task stream (``ProceduralEnv.tasks``: ``size`` tasks, disjoint splits)."""
        return f"calc-d{self.digits}"

    def oracle_policy(self) -> Policy:
        """Calls ``calc`` on the prompt's expression, then answers with the result."""

        def solve(messages: Sequence[Message]) -> Reply:
            result = next((m.content for m in reversed(messages) if m.role == "tool"), None)
            if result is not None:
                return result.strip()
            user = next((m.content for m in reversed(messages) if m.role == "user"), "")
            found = re.search(r"\d+\*\d+", user)
            if found is None:
                return "I cannot find an expression."
            call = ToolCall(id="call-0", name=TOOL, arguments=json.dumps({"expr": found.group(0)}))
            return "", [call]

        return ScriptedPolicy(solve, name="calc-oracle")

    def null_policy(self) -> Policy:
        """Answers without calling the tool."""
        return ScriptedPolicy(lambda messages: "I don't know.", name="calc-null")
