"""Math answer grader: extract the final answer, decide equivalence with the reference, measurably.

``check_equivalent(gold, pred)`` takes a reference answer and a full model response (or a bare
answer) and returns a ``MathVerdict``. What it does, and how it differs from Math-Verify 0.9
(whose known false positives and negatives it fixes, see ``reference/verifiers.md``):

* extraction: the last ``\\boxed{}`` (several *different* boxes are a hedge: they pass only when
  the reference is that same set), then "final answer is" / "the answer is" / "Answer:", then a
  bare answer taken whole, then the last math span or number of the response, which is refused
  when it restates the question (``question=``) or sits in an instruction ("Simplify ...");
* numbers: exact rationals (``1/2004!`` is not ``1/2006!``); other constants at 40 digits with a
  relative tolerance that never rounds tiny values to zero; decimals as roundings only with
  enough significant digits (``0.33`` ~ ``1/3``; ``1000`` is not ``1000.05``; ``50`` is not ``0.5``);
* expressions: structure, then numeric sampling at random positive points (``\\sqrt{1/n}`` =
  ``1/\\sqrt{n}``; ``4`` is not ``4\\sqrt2``; ``1-1/e`` is not ``1+1/e``), then ``simplify``;
* equations: a named value (``x = 5`` vs ``5``, ``f(z)=z`` vs ``f(x)=x``), proportional sides (two
  different lines are never equal), or the answer satisfying the reference's equation;
* sets, tuples, intervals (open/closed matters, inequalities read as intervals), matrices,
  complex numbers, ``\\pm``, percent and degree signs, units, thousands separators.

Strictness modes (per call, or per task via ``task.info["math_mode"]``): ``equivalent``
(default), ``simplest_form`` (``2/4`` is rejected), ``exact_decimal:N`` (exactly N places, the
reference rounded half up), ``with_units`` (the reference's unit, percent or degree sign is
required). Each check runs in a persistent worker process with a hard timeout; a timeout or
internal crash is an *errored* verdict (``error`` set), never a rejection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verigym.graders.math._extract import extract, strip_math_delims
from verigym.graders.math._mode import parse_mode
from verigym.graders.math._norm import repair
from verigym.graders.math._worker import CheckCrashed, CheckTimeout, default_pool
from verigym.rubric import Grader
from verigym.types import Grade, Task, Trajectory

__all__ = [
    "DEFAULT_TIMEOUT",
    "SUITE_FIELDS",
    "MathVerdict",
    "bench_verdict",
    "bench_warmup",
    "check_equivalent",
    "extract_answer",
    "math_grader",
]

DEFAULT_TIMEOUT = 10.0
SUITE_FIELDS = ("gold", "pred")  # verifier-bench: required keys of a math suite line


@dataclass(frozen=True)
class MathVerdict:
    """The outcome of one check. ``error`` is set when the grader could not decide."""

    accepted: bool
    reason: str
    extracted: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def check_equivalent(
    gold: str,
    pred: str,
    *,
    mode: str = "equivalent",
    timeout: float | None = DEFAULT_TIMEOUT,
    question: str | None = None,
) -> MathVerdict:
    """Is the final answer in ``pred`` equivalent to ``gold`` under ``mode``?

    ``timeout`` is a hard limit in seconds (the worker running the check is killed past it);
    ``None`` runs in the calling thread with no limit. ``question`` (the problem text) lets
    extraction refuse an answer that only restates the problem. Raises ``ValueError`` for an
    unknown mode.
    """
    parse_mode(mode)
    args = (gold, pred, mode, question)
    if timeout is None:
        from verigym.graders.math._check import check

        try:
            accepted, reason, extracted = check(*args)
        except Exception as exc:
            msg = f"math check failed: {type(exc).__name__}: {exc}"
            return MathVerdict(False, msg, None, msg)
        return MathVerdict(accepted, reason, extracted)
    try:
        accepted, reason, extracted = default_pool().run(args, timeout)
    except CheckTimeout as exc:
        return MathVerdict(False, f"math check timed out: {exc}", None, f"timeout: {exc}")
    except CheckCrashed as exc:
        return MathVerdict(False, f"math check failed: {exc}", None, f"error: {exc}")
    return MathVerdict(accepted, reason, extracted)


def extract_answer(text: str, *, question: str | None = None, reference: bool = False) -> str | None:
    """The final answer found in ``text`` (see the module docstring for the order), or None.

    ``reference=True`` reads ``text`` as a reference answer: several boxes listed together are
    one answer, and doubled backslashes from escaping are repaired.
    """
    found = extract(repair(text, escapes=reference), question=question, gold=reference)
    return None if found.answer is None else strip_math_delims(found.answer)


def _question(task: Task) -> str | None:
    users = [m.content for m in task.prompt if m.role == "user" and m.content]
    return users[-1] if users else None


def math_grader(
    name: str = "math",
    mode: str = "equivalent",
    weight: float = 1.0,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> Grader:
    """A ``Grader`` scoring 1.0 when the trajectory's final answer matches ``task.answer``.

    The mode comes from ``task.info["math_mode"]`` when present, else ``mode``. A task without
    an answer, an unknown mode, a timeout or a crash give an errored ``Grade``.
    """
    parse_mode(mode)

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        if task.answer is None:
            return Grade.failed(f"task {task.id!r} has no reference answer")
        task_mode = str(task.info.get("math_mode") or mode)
        try:
            parse_mode(task_mode)
        except ValueError as exc:
            return Grade.failed(f"task {task.id!r}: {exc}")
        verdict = check_equivalent(
            task.answer, trajectory.final_text, mode=task_mode, timeout=timeout, question=_question(task)
        )
        if verdict.error is not None:
            return Grade.failed(verdict.reason)
        detail = f"{verdict.reason}; extracted {verdict.extracted!r}"
        return Grade(score=1.0 if verdict.accepted else 0.0, detail=detail)

    grade.__name__ = name
    return Grader(grade, weight=weight, name=name, timeout=timeout * 3 + 5)


def bench_verdict(line: dict[str, Any]) -> bool:
    """verifier-bench hook: accept/reject one suite line ``{gold, pred, mode?, question?}``;
    raises ``RuntimeError`` when the check errored (counted as an error, not a verdict)."""
    verdict = check_equivalent(
        str(line["gold"]),
        str(line["pred"]),
        mode=str(line.get("mode") or "equivalent"),
        question=line.get("question"),
    )
    if verdict.error is not None:
        raise RuntimeError(verdict.reason)
    return verdict.accepted


def bench_warmup() -> None:
    """verifier-bench hook: start the worker process before the timed run."""
    default_pool().warm()
