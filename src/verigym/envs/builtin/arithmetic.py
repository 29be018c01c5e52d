"""The built-in ``arithmetic`` environment: procedurally generated integer arithmetic.

The default prompt is the bare expression (``"12+34="``) with no system prompt, and the
reference answer a bare integer, so a tiny character-level model can learn it by SFT in
seconds; ``verbose=True`` asks real LLMs for a ``\\boxed{}`` answer instead.

Difficulty: ``level`` picks a preset; ``digits`` (operand length), ``terms`` (number of
operands) and ``ops`` (a string of ``+``, ``-``, ``*``) override it. Usual precedence applies
(``*`` before ``+``/``-``). Answers are verified exactly: after dropping ``<think>`` reasoning,
the last integer inside the last ``\\boxed{}``, else after the last "Answer:", else in the whole
reply must equal the reference.

Graders: ``graders="exact"`` (default) is the one grader ``correct``. ``graders="digits"`` is a
multi-grader task for relative ranking (``rl.ranking``): ``length`` (the answer has the
reference's number of digits and sign), ``last_digit`` (its ones digit is right) and ``correct``,
each of weight ⅓, so the reward is their mean and reaches 1 only when all three pass.

=====  ======  =====  =====
level  digits  terms  ops
=====  ======  =====  =====
1      2       2      ``+``
2      2       2      ``+-``
3      3       2      ``+-``
4      2       3      ``+-*``
5      3       4      ``+-*``
=====  ======  =====  =====
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from verigym.envs.base import SingleTurnEnv
from verigym.envs.procedural import ProceduralEnv
from verigym.envs.registry import EnvArgError
from verigym.graders.format import extract_answer_line, extract_boxed, strip_think
from verigym.policies.base import Policy
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Message, Task, Trajectory

__all__ = ["LEVELS", "ArithmeticEnv", "evaluate", "parse_integer"]

LEVELS: dict[int, tuple[int, int, str]] = {
    1: (2, 2, "+"),
    2: (2, 2, "+-"),
    3: (3, 2, "+-"),
    4: (2, 3, "+-*"),
    5: (3, 4, "+-*"),
}

_INT = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_EXPR = re.compile(r"\d+(?:\s*[-+*]\s*\d+)+")


def evaluate(operands: Sequence[int], ops: Sequence[str]) -> int:
    """The exact value of ``operands[0] ops[0] operands[1] ...`` with ``*`` binding tighter."""
    terms, signs = [operands[0]], [1]
    for op, value in zip(ops, operands[1:], strict=True):
        if op == "*":
            terms[-1] *= value
        else:
            terms.append(value)
            signs.append(1 if op == "+" else -1)
    return sum(s * t for s, t in zip(signs, terms, strict=True))


def parse_integer(text: str) -> int | None:
    """The final integer answer of a reply, or None (see the module docstring for where it is looked for).

    Thousands separators are accepted (``1,234``); a number with a non-zero fractional part is
    not an integer answer (None).
    """
    text = strip_think(text).replace("−", "-")
    candidate = extract_boxed(text)
    if candidate is None:
        candidate = extract_answer_line(text)
    if candidate is None:
        candidate = text
    found = _INT.findall(candidate)
    if not found:
        return None
    whole, _, frac = found[-1].replace(",", "").partition(".")
    if frac and frac.strip("0"):
        return None
    return int(whole)


def _solve(messages: Sequence[Message]) -> str:
    """Answer the last user message's expression exactly (the oracle)."""
    user = next((m.content for m in reversed(messages) if m.role == "user"), "")
    match = _EXPR.search(user)
    if match is None:
        return "I cannot find an expression."
    tokens = re.findall(r"\d+|[-+*]", match.group(0))
    return str(evaluate([int(t) for t in tokens[::2]], tokens[1::2]))


def correct(task: Task, trajectory: Trajectory) -> Grade:
    """1 when the reply's final integer equals the reference, else 0 (the detail says what was read)."""
    if task.answer is None:
        raise ValueError(f"task {task.id} has no reference answer")
    got = parse_integer(trajectory.final_text)
    if got is None:
        return Grade(score=0.0, detail="no integer answer found")
    expected = int(task.answer)
    return Grade(score=float(got == expected), detail=f"expected {expected}, got {got}")


def _digits_of(task: Task, trajectory: Trajectory) -> tuple[str, str | None]:
    if task.answer is None:
        raise ValueError(f"task {task.id} has no reference answer")
    got = parse_integer(trajectory.final_text)
    return str(int(task.answer)), None if got is None else str(got)


def length(task: Task, trajectory: Trajectory) -> Grade:
    """1 when the answer has the reference's number of digits and sign."""
    expected, got = _digits_of(task, trajectory)
    if got is None:
        return Grade(score=0.0, detail="no integer answer found")
    return Grade(score=float(len(got) == len(expected)), detail=f"expected {len(expected)} chars, got {got}")


def last_digit(task: Task, trajectory: Trajectory) -> Grade:
    """1 when the answer's ones digit is the reference's."""
    expected, got = _digits_of(task, trajectory)
    if got is None:
        return Grade(score=0.0, detail="no integer answer found")
    return Grade(score=float(got[-1] == expected[-1]), detail=f"expected …{expected[-1]}, got {got}")


def _rubric(graders: str) -> Rubric:
    # inline: these parse the reply in linear time and compare integers (no I/O, cannot hang), so
    # they run on the event loop without the worker-thread hop (``Grader.inline``)
    if graders == "exact":
        return Rubric([Grader(correct, name="correct", inline=True)])
    if graders == "digits":
        third = 1 / 3
        return Rubric(
            [
                Grader(length, weight=third, name="length", inline=True),
                Grader(last_digit, weight=third, name="last_digit", inline=True),
                Grader(correct, weight=third, name="correct", inline=True),
            ]
        )
    raise EnvArgError(f"arithmetic: graders must be 'exact' or 'digits', got {graders!r}")


def _int_arg(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise EnvArgError(f"arithmetic: {name} must be an integer from {low} to {high}, got {value!r}")
    return value


class ArithmeticEnv(ProceduralEnv, SingleTurnEnv):
    """Integer arithmetic with difficulty levels 1-5 (digits, terms, operations); exact answers."""

    name = "arithmetic"
    description = "Integer arithmetic (levels 1-5: digits, terms, + - *); exact integer answers."
    real_model_args: ClassVar[dict[str, Any]] = {"verbose": True}  # "Compute 12 + 34 ... \\boxed{}"

    def __init__(
        self,
        level: int = 1,
        digits: int | None = None,
        terms: int | None = None,
        ops: str | Sequence[str] | None = None,
        verbose: bool = False,
        size: int = 1000,
        system_prompt: str | None = None,
        graders: str = "exact",
    ) -> None:
        super().__init__(rubric=_rubric(graders), system_prompt=system_prompt)
        self.level = _int_arg("level", level, 1, max(LEVELS))
        base_digits, base_terms, base_ops = LEVELS[self.level]
        self.digits = _int_arg("digits", base_digits if digits is None else digits, 1, 18)
        self.terms = _int_arg("terms", base_terms if terms is None else terms, 2, 12)
        chosen = base_ops if ops is None else ops
        if not isinstance(chosen, str):
            chosen = "".join(chosen) if all(isinstance(o, str) for o in chosen) else ""
        if not chosen or set(chosen) - set("+-*"):
            raise EnvArgError(f"arithmetic: ops must be a non-empty string of + - *, got {ops!r}")
        self.ops = "".join(sorted(set(chosen), key="+-*".index))
        if not isinstance(verbose, bool):
            raise EnvArgError(f"arithmetic: verbose must be true or false, got {verbose!r}")
        self.verbose = verbose
        self.size = _int_arg("size", size, 1, 10**9)

    def generate(self, rng: random.Random) -> Task:
        """``terms`` operands of ``digits`` digits joined by ``ops``, and its exact value."""
        low = 0 if self.digits == 1 else 10 ** (self.digits - 1)
        operands = [rng.randint(low, 10**self.digits - 1) for _ in range(self.terms)]
        ops = [rng.choice(self.ops) for _ in range(self.terms - 1)]
        sep = " " if self.verbose else ""
        expr = str(operands[0]) + "".join(f"{sep}{o}{sep}{v}" for o, v in zip(ops, operands[1:], strict=True))
        if self.verbose:
            text = f"Compute {expr}. Give the final answer as an integer in \\boxed{{}}."
        else:
            text = f"{expr}="
        answer = evaluate(operands, ops)
        return Task(id="", prompt=(Message(role="user", content=text),), answer=str(answer))

    @property
    def task_name(self) -> str:
        """``arithmetic-d{digits}t{terms}{ops}``: the task stream (``ProceduralEnv.tasks``)."""
        codes = "".join({"+": "a", "-": "s", "*": "m"}[o] for o in self.ops)
        return f"arithmetic-d{self.digits}t{self.terms}{codes}"

    def oracle_policy(self) -> Policy:
        """Answers every prompt exactly (computed from the expression it shows)."""
        return ScriptedPolicy(_solve, name="arithmetic-oracle")

    def null_policy(self) -> Policy:
        """Answers nothing useful."""
        return ScriptedPolicy(lambda messages: "I don't know.", name="arithmetic-null")
