"""Exact numbers as written, and the full check's number rules on them (``_numeric.scalar_eq``:
equal values, decimals as roundings or truncations, percent readings), for the exact fast path
(``_rational``): no sympy, no floats; within float error of a rule's bound it defers (``Defer``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from itertools import product

from verigym.graders.math._shared._matching import Written, decimal_match, digits
from verigym.graders.math._shared._rules import Answers, Verdict

__all__ = ["Defer", "Num", "exact_decimal_decide", "literal", "scalar_eq"]


class Defer(Exception):
    """Outside the fast path's domain: the full check decides."""


@dataclass(frozen=True)
class Num:
    """An exact number as written: ``places``/``sig`` for a decimal literal (``_values.Scalar``)."""

    value: Fraction | None  # None: infinity (``inf`` gives the sign)
    places: int | None = None
    sig: int = 0
    percent: bool = False
    inf: int = 0


def literal(raw: str, percent: bool = False) -> Num:
    body = raw.lstrip("+-")
    value = Fraction(body) if body not in (".", "") else Fraction(0)
    places, sig = digits(raw)
    return Num(-value if raw.startswith("-") else value, places, sig, percent)


def _near(x: Fraction, bound: Fraction, dec: Num, other: Fraction) -> bool:
    """Within float error of a bound: the full check (floats) could decide either way."""
    assert dec.value is not None
    return abs(x - bound) <= bound / 10**6 + (abs(dec.value) + abs(other) + 1) / 10**12


def _rounds_to(dec: Num, other: Fraction) -> bool:
    """``_numeric._rounds_to`` decided exactly; ``Defer`` within float error of the bound."""
    assert dec.places is not None and dec.value is not None
    if max(abs(dec.value), abs(other)) > 10**15:
        raise Defer
    diff = abs(dec.value - other)
    bound = Fraction(1, 2 * 10**dec.places)
    if _near(diff, bound, dec, other):
        raise Defer
    return diff < bound


def _truncates_to(dec: Num, other: Fraction) -> bool:
    """``_numeric._truncates_to`` decided exactly; ``Defer`` near either end."""
    assert dec.places is not None and dec.value is not None
    if max(abs(dec.value), abs(other)) > 10**15:
        raise Defer
    d = (other - dec.value) * (1 if dec.value >= 0 else -1)
    bound = Fraction(1, 10**dec.places)
    if _near(d, bound, dec, other) or _near(d, Fraction(0), dec, other):
        raise Defer
    return 0 <= d < bound


def _hundredth(n: Num) -> Num:
    assert n.value is not None
    return Num(n.value / 100, None if n.places is None else n.places + 2, n.sig)


def _const_eq(g: Num, p: Num) -> bool:
    gv, pv = g.value, p.value
    assert gv is not None and pv is not None
    if gv == pv:
        return True
    gw = Written(g.places, g.sig, True, gv.denominator == 1)
    pw = Written(p.places, p.sig, True, pv.denominator == 1)

    def rounds(side: str) -> bool:
        return _rounds_to(g, pv) if side == "g" else _rounds_to(p, gv)

    return decimal_match(gw, pw, rounds, lambda: _truncates_to(g, pv))


def scalar_eq(g: Num, p: Num) -> bool:
    if g.value is None or p.value is None:
        return g.value is None and p.value is None and g.inf == p.inf
    greads, preads = [g], [p]
    if g.percent and not p.percent:
        greads.append(_hundredth(g))
    if p.percent and not g.percent:
        preads.append(_hundredth(p))
    return any(_const_eq(a, b) for a, b in product(greads, preads))


_PLAIN = re.compile(r"-?\d+(?:\.\d+)?")
_RATIO = re.compile(r"(-?)(?:\\[dt]?frac\{(\d+)\}\{(\d+)\}|(\d+)/(\d+))")
_SMALL = 10**12  # denominators, magnitudes and places far from the 60 digits the full check uses


def exact_decimal_decide(ans: Answers, places: int) -> Verdict | None:
    """Mode ``exact_decimal:N`` as the full check decides it (``_check._exact_decimal``) for a
    reference written as a decimal or a fraction of integers and an answer written as a plain
    decimal: written with exactly ``places`` decimals, and equal to the reference rounded half up
    there. The full check rounds the reference's 60-digit value; for a rational with a small
    denominator that is the exact value's rounding (ties are exact at 60 digits, and every other
    value is farther from a tie than 60 digits can blur). None for anything else."""
    answer = ans.answer.strip()
    if ans.boxes > 1 or not _PLAIN.fullmatch(answer) or places > 12:
        return None
    gold = ans.gold.strip()
    if _PLAIN.fullmatch(gold):
        exact = Fraction(gold)
    else:
        m = _RATIO.fullmatch(gold)
        if m is None:
            return None
        num, den = (m[2], m[3]) if m[2] else (m[4], m[5])
        if int(den) == 0:
            return None
        exact = Fraction(int(num), int(den)) * (-1 if m[1] else 1)
    if exact.denominator > _SMALL or abs(exact) > _SMALL:
        return None
    if not re.fullmatch(r"-?\d+" + (rf"\.\d{{{places}}}" if places else ""), answer):
        return False, f"not written with exactly {places} decimal places", ans.answer
    scaled = exact * 10**places
    rounded = (scaled.numerator * 2 + scaled.denominator) // (2 * scaled.denominator)  # half up
    if Fraction(answer) * 10**places != rounded:
        return False, f"not the reference rounded to {places} places", ans.answer
    return True, "the reference rounded to the required places", ans.answer
