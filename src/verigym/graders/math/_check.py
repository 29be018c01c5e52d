"""One math check, in-process: extract, parse, compare, apply the strictness mode.

Runs inside the grader's worker process (see ``_worker``), which enforces the timeout.
Returns a plain tuple so it crosses the process boundary cheaply.
"""

from __future__ import annotations

import re
from fractions import Fraction
from math import gcd

import sympy

from verigym.graders.math._compare import equal
from verigym.graders.math._extract import NUMBER_RE
from verigym.graders.math._mode import parse_mode
from verigym.graders.math._norm import clean, split_decor
from verigym.graders.math._parse import parse
from verigym.graders.math._rules import Answers, prepare, squash
from verigym.graders.math._values import Group, ParseError, Scalar, Text, Value

__all__ = ["check"]


def check(
    gold: str, pred: str, mode: str = "equivalent", question: str | None = None
) -> tuple[bool, str, str | None]:
    """(accepted, reason, extracted answer)."""
    kind, places = parse_mode(mode)
    ans = prepare(gold, pred, question)
    if not isinstance(ans, Answers):
        return ans
    answer = ans.answer
    try:
        greads = parse(ans.gold)
    except (ParseError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        if squash(ans.gold) == squash(answer):
            return True, "same text as the reference", answer
        # A reference the grader cannot read is the grader's problem: an error, never a zero.
        raise ValueError(f"reference answer not parseable: {exc}") from exc
    try:
        preads = parse(answer)
    except (ParseError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        preads, why = (), f"answer not parseable: {exc}"
    numbers = NUMBER_RE.findall(answer) if ans.how == "bare" else []
    if (not preads or all(isinstance(p, Text) for p in preads)) and len(numbers) == 1:
        answer = numbers[0]  # a lone number in text that is not an answer ("Soucis : 2,74 $ a..")
        preads = parse(answer)
    if not preads:
        return False, why, answer
    if ans.boxes > 1 and not any(isinstance(g, Group) for g in greads):
        return False, f"hedged: {ans.boxes} different boxed answers", answer
    if kind == "exact_decimal" and places is not None:
        ok, why = _exact_decimal(greads[-1], answer, places)
        return ok, (why or "the reference rounded to the required places"), answer
    if not any(equal(g, p) for g in greads for p in preads):
        return False, "not equivalent to the reference", answer
    if kind == "simplest_form" and not _simplest(answer):
        return False, "equivalent but not in simplest form", answer
    if kind == "with_units":
        ok, why = _units_match(ans.gold, answer)
        if not ok:
            return False, why, answer
    return True, "equivalent", answer


def _simplest(answer: str) -> bool:
    """Syntactic simplest form: reduced fractions, no 1 denominators, square-free radicands,
    no arithmetic left undone between plain numbers."""
    s = clean(answer)
    s, _ = split_decor(s)
    for a, b in re.findall(r"\\frac\{(\d+)\}\{(\d+)\}", s) + re.findall(
        r"(?<![\w.}])(\d+)\s*/\s*(\d+)(?![\w.])", s
    ):
        if gcd(int(a), int(b)) != 1 or int(b) == 1:
            return False
    for r in re.findall(r"\\sqrt\{(\d+)\}", s):
        n = int(r)
        if any(n % (k * k) == 0 for k in range(2, int(n**0.5) + 1)):
            return False
    body = re.sub(r"\\frac\{\d+\}\{\d+\}|\d+/\d+", "F", s)
    return not re.search(r"\d\s*(?:[+*]|\\cdot|\\times)\s*\d|\d\s*-\s*\d|\^\{?\d", body)


def _exact_decimal(gold: Value, answer: str, places: int) -> tuple[bool, str]:
    core, _ = split_decor(clean(answer))
    pattern = r"-?\d+" + (rf"\.\d{{{places}}}" if places else "")
    if not re.fullmatch(pattern, core.replace(",", "")):
        return False, f"not written with exactly {places} decimal places"
    if not isinstance(gold, Scalar) or gold.expr.free_symbols:
        return False, "reference is not a number"
    exact = Fraction(str(sympy.N(gold.expr, 60)))
    scaled = exact * 10**places
    rounded = (scaled.numerator * 2 + scaled.denominator) // (2 * scaled.denominator)  # half up
    if Fraction(core.replace(",", "")) * 10**places != rounded:
        return False, f"not the reference rounded to {places} places"
    return True, ""


def _unit_key(u: str) -> str:
    u = u.replace("^", "").replace(" ", "")
    return re.sub(r"(?<=[a-z]{2})s\b", "", u)


def _units_match(gold: str, answer: str) -> tuple[bool, str]:
    _, gd = split_decor(clean(gold))
    _, pd = split_decor(clean(answer))
    if gd.percent != pd.percent:
        return False, "percent sign required" if gd.percent else "unexpected percent sign"
    if gd.degree != pd.degree:
        return False, "degree sign required" if gd.degree else "unexpected degree sign"
    if _unit_key(gd.unit) != _unit_key(pd.unit):
        return False, f"unit {pd.unit or 'missing'!r}, expected {gd.unit or 'none'!r}"
    return True, ""
