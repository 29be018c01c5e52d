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
required). The question's words demand a form (``_forms``: "simplest form", "common fraction",
"improper fraction", "mixed number", "rationalize the denominator", "simplest radical form",
"exact value", "as a decimal", "to the nearest tenth"), enforced on the written answer before
its value is compared, in every mode but ``exact_decimal`` (an explicit mode wins); a rejection
names the demand and the rule broken. Speed: verdicts are cached by (gold, pred, mode, question); common answers (numbers,
fractions, simple LaTeX, percent, units, lists, tuples, intervals, sets of those) are decided in
this process by exact rational arithmetic (``_rational``, no sympy), expressions in letters, sets,
matrices and equations by sampling the own reader's code in floats with error bounds (``_sampled``,
no sympy) wherever floats can vouch for the full check's verdict, and text answers by the full
check's text rules (``_text``); the reference's extraction and readings are cached; the rest runs in a
persistent worker process with a hard timeout; a timeout or internal crash is an *errored*
verdict (``error`` set), never a rejection, and is not cached.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from verigym.graders.families import GraderFamily
from verigym.graders.math._demanded._forms import clear_form_caches, decide_in_form
from verigym.graders.math._demanded._rounding import fast_round
from verigym.graders.math._exact_path._exactnum import exact_decimal_decide
from verigym.graders.math._exact_path._rational import clear_fast_caches, fast_decide
from verigym.graders.math._exact_path._text import text_decide
from verigym.graders.math._float_path._decimal import float_exact_decimal
from verigym.graders.math._float_path._sampled import clear_sampled_caches, sampled_decide
from verigym.graders.math._shared._extract import extract, strip_math_delims
from verigym.graders.math._shared._mode import parse_mode
from verigym.graders.math._shared._norm import repair
from verigym.graders.math._shared._rules import Answers, Verdict, clear_rule_caches, fast_answers
from verigym.graders.math._shared._units import units_match
from verigym.graders.math._sympy_path._worker import CheckCrashed, CheckTimeout, default_pool
from verigym.rubric import Grader
from verigym.types import Grade, Task, Trajectory

__all__ = [
    "BENCH",
    "DEFAULT_TIMEOUT",
    "SUITE_FIELDS",
    "MathVerdict",
    "bench_verdict",
    "bench_warmup",
    "check_equivalent",
    "clear_caches",
    "extract_answer",
    "math_grader",
]

DEFAULT_TIMEOUT = 10.0
SUITE_FIELDS = ("gold", "pred")  # verifier-bench: required keys of a math suite line
_CACHE_SIZE = 65_536
_CACHE: OrderedDict[tuple[str | bytes, ...], tuple[bool, str, str | None]] = OrderedDict()
_CACHE_LOCK = threading.Lock()


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
    key = tuple(_digest(a) for a in args)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return MathVerdict(*hit)
    hit = _fast(args)
    if hit is None:
        try:
            hit = _full_check(args, timeout)
        except Exception as exc:  # errors are verdicts with a reason, never cached
            return _errored(exc)
    with _CACHE_LOCK:
        _CACHE[key] = hit
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return MathVerdict(*hit)


def _digest(s: str | None) -> str | bytes:
    """Long texts (whole responses) are keyed by a 16-byte hash, so the cache stays small."""
    if s is None or len(s) <= 256:
        return s or ""
    return hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _fast(args: tuple[str, str, str, str | None]) -> tuple[bool, str, str | None] | None:
    """The demanded form (``_forms``), then the exact path, the float path and the text path, on
    answers extracted once."""
    gold, pred, mode, question = args
    try:
        kind, places = parse_mode(mode)
        ans = fast_answers(gold, pred, "equivalent", question)
        if not isinstance(ans, Answers):
            return ans
        if kind == "exact_decimal" and places is not None:  # no demanded forms: the mode decides
            hit = exact_decimal_decide(ans, places)
            return hit if hit is not None else float_exact_decimal(ans, places)
        decide = _with_units if kind == "with_units" else _in_process
        return decide_in_form(ans, mode, question, decide, rounder=fast_round, strict=True)
    except Exception:  # the full check decides (and reports) anything the fast path trips on
        return None


def _in_process(ans: Answers) -> Verdict | None:
    hit = fast_decide(ans)
    hit = hit if hit is not None else sampled_decide(ans)
    return hit if hit is not None else text_decide(ans)


def _with_units(ans: Answers) -> Verdict | None:
    """``with_units`` as the full check applies it (``_check._compare``): the value compared as in
    ``equivalent``, then, for an answer found equivalent, the reference's unit, percent and degree
    signs required of the answer it compared."""
    hit = _in_process(ans)
    if hit is None or not hit[0] or hit[1] != "equivalent":
        return hit  # rejections, and "same text as the reference", come before the unit rule
    answer = hit[2] if hit[2] is not None else ans.answer
    ok, why = units_match(ans.gold, answer)
    return hit if ok else (False, why, answer)


def _full_check(
    args: tuple[str, str, str, str | None], timeout: float | None
) -> tuple[bool, str, str | None]:
    if timeout is None:
        from verigym.graders.math._sympy_path._check import check

        return check(*args)
    accepted, reason, extracted = default_pool().run(args, timeout)
    return bool(accepted), str(reason), extracted


def _errored(exc: Exception) -> MathVerdict:
    if isinstance(exc, CheckTimeout):
        return MathVerdict(False, f"math check timed out: {exc}", None, f"timeout: {exc}")
    if isinstance(exc, CheckCrashed):
        return MathVerdict(False, f"math check failed: {exc}", None, f"error: {exc}")
    msg = f"math check failed: {type(exc).__name__}: {exc}"
    return MathVerdict(False, msg, None, msg)


def clear_caches() -> None:
    """Forget every cached verdict and parse, here and in the worker processes (benchmarks
    measuring cold checks call this before each line)."""
    with _CACHE_LOCK:
        _CACHE.clear()
    clear_rule_caches()
    clear_form_caches()
    clear_fast_caches()
    clear_sampled_caches()
    for name in ("verigym.graders.math._sympy_path._parse", "verigym.graders.math._sympy_path._values"):
        module = sys.modules.get(name)
        for fn in ("parse", "to_sympy"):
            cached = getattr(module, fn, None)
            if cached is not None and hasattr(cached, "cache_clear"):
                cached.cache_clear()
        clear = getattr(module, "clear_value_caches", None)
        if clear is not None:  # the in-process full check (timeout=None) keeps the chains' sets
            clear()
    default_pool().clear_caches()


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


def bench_warmup(jobs: int = 1) -> None:
    """verifier-bench hook: start one worker process per job before the timed run."""
    default_pool().warm(jobs)


BENCH = GraderFamily(
    "math", bench_verdict, suites=("math.jsonl", "math_forms.jsonl"), fields=SUITE_FIELDS, warmup=bench_warmup
)
