"""One math check, in-process: extract, enforce the demanded form (``_forms``), parse, compare,
apply the strictness mode.

Runs inside the grader's worker process (see ``_worker``), which enforces the timeout.
Returns a plain tuple so it crosses the process boundary cheaply.
"""

from __future__ import annotations

import re
from fractions import Fraction

import sympy

from verigym.graders.math._demanded._forms import decide_in_form
from verigym.graders.math._demanded._rounding import round_fraction
from verigym.graders.math._shared._extract import NUMBER_RE
from verigym.graders.math._shared._mode import parse_mode
from verigym.graders.math._shared._norm import clean, split_decor
from verigym.graders.math._shared._rules import Answers, prepare, squash
from verigym.graders.math._shared._units import units_match
from verigym.graders.math._sympy_path._compare import equal
from verigym.graders.math._sympy_path._parse import parse
from verigym.graders.math._sympy_path._values import Group, ParseError, Scalar, Text, Value, to_sympy

__all__ = ["check"]


def check(
    gold: str, pred: str, mode: str = "equivalent", question: str | None = None
) -> tuple[bool, str, str | None]:
    """(accepted, reason, extracted answer)."""
    kind, places = parse_mode(mode)
    ans = prepare(gold, pred, question)
    if not isinstance(ans, Answers):
        return ans
    verdict = decide_in_form(
        ans, mode, question, lambda compared: _compare(compared, kind, places), rounder=_round, strict=False
    )
    assert verdict is not None  # not strict, and _compare always decides
    return verdict


def _compare(ans: Answers, kind: str, places: int | None) -> tuple[bool, str, str | None]:
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
    if kind == "with_units":
        ok, why = units_match(ans.gold, answer)
        if not ok:
            return False, why, answer
    return True, "equivalent", answer


def _round(core: str, places: int) -> str | None:
    """The full check's rounder (``_forms.enforce``): the value through sympy, exact for rationals,
    at 60 digits otherwise; None for anything that is not a real number."""
    try:
        expr = to_sympy(core)
    except ParseError:
        return None
    if not isinstance(expr, sympy.Expr) or expr.free_symbols:
        return None
    if isinstance(expr, sympy.Rational):
        return round_fraction(Fraction(int(expr.p), int(expr.q)), places)
    value = sympy.N(expr, 60)
    if not (value.is_real and value.is_finite):
        return None
    return round_fraction(Fraction(str(value)), places)


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
