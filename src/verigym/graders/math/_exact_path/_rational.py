"""The math grader's fast path: common answers decided by exact rational arithmetic, no sympy.

``fast_check(gold, pred, mode, question)`` runs the same extraction as the full check and then
reads both answers with a small exact reader: integers, decimals, fractions (``\\frac``, ``a/b``),
``+ - * / ^`` on them, ``\\sqrt`` of perfect squares, percent signs, units, currency signs,
thousands separators, infinity, and lists, tuples, intervals and sets of those. Comparison
follows the full grader's rules exactly (``_numeric.scalar_eq``, ``_compare.equal``:
rounded decimals, percent readings, open/closed interval ends, multisets). Anything outside
that (a letter, an equation, an irrational, a degree sign, a decimal inside an expression, a
rounding decision within float error of its bound, a strictness mode other than
``equivalent``) returns ``None`` and the caller runs the full check. The fast path never
decides what the full check would decide differently (a property test compares them).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeAlias

from verigym.graders.math._exact_path._exactnum import Defer as _Defer
from verigym.graders.math._exact_path._exactnum import Num, literal, scalar_eq
from verigym.graders.math._shared._cursor import Cursor, scan
from verigym.graders.math._shared._matching import Seq, chain_ends, flat, multiset_eq, seq_eq
from verigym.graders.math._shared._norm import split_decor, split_top
from verigym.graders.math._shared._rules import (
    NUM_RE,
    Answers,
    bracketed,
    decide_texts,
    readings_prefix,
    strip_answer,
)

__all__ = ["clear_fast_caches", "exact_number", "fast_check", "fast_decide"]

_MAX_BITS = 4096
_DEFER = re.compile(
    r"[;|!]|\\(?:ne|pm|mp|approx|cup|cap|setminus|begin|circ|in|sim|equiv|to|ldots|mid)(?![a-zA-Z])"
    r"|\band\b|\bor\b|\^\s*\\circ|\\text\s*\{\s*(?:and|or|,)"
)
_TOKEN = re.compile(r"\s*(\d+\.\d*|\.\d+|\d+|\\(?:frac|sqrt|cdot|times|div|infty)(?![a-zA-Z])|[-+*/:^{}()])")
_REL = re.compile(r"(\\le |\\ge |<|>)")  # _parse._REL_OPS without \ne
_VAR = re.compile(r"[a-zA-Z]")
_MIXED = re.compile(r"([+-]?)\s*(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}|([+-]?)\s*(\d+)\s+([1-9]\d*)/(\d+)")


@dataclass(frozen=True)
class Group:
    items: tuple[Val, ...]


@dataclass(frozen=True)
class Eq:
    """``x = 5``: a named value (``_values.Eqn`` with a one-letter name and a number)."""

    name: str
    value: Val


@dataclass(frozen=True)
class Ival:
    """A one-variable inequality chain as its interval (``_values.rel_to_set``); ends exact."""

    lo: Fraction | None  # None: minus infinity
    hi: Fraction | None  # None: plus infinity
    lo_open: bool
    hi_open: bool


Val: TypeAlias = Num | Seq["Val"] | Group | Eq | Ival


class _Reader(Cursor):
    """Exact arithmetic on a token list; raises ``_Defer`` on anything not plainly rational."""

    stop = _Defer

    def __init__(self, s: str) -> None:
        super().__init__([m.group(1) for m in scan(_TOKEN, s, _Defer)])

    def expr(self) -> Fraction:
        v = self.term()
        while self.peek() in ("+", "-"):
            v = v + self.term() if self.take() == "+" else v - self.term()
        return v

    def term(self) -> Fraction:
        v = self.unary()
        while self.peek() in ("*", "/", ":", "\\cdot", "\\times", "\\div"):
            op = self.take()
            w = self.unary()
            if op in ("/", ":", "\\div"):
                if w == 0:
                    raise _Defer
                v = v / w
            else:
                v = v * w
            _check_size(v)
        return v

    def unary(self) -> Fraction:
        if self.peek() in ("+", "-"):
            return self.unary() if self.take() == "+" else -self.unary()
        return self.power()

    def power(self) -> Fraction:
        v = self.atom()
        if self.peek() == "^":
            self.take()
            if self.peek() == "{":
                self.take()
                e = self.expr()
                self.take("}")
            else:
                t = self.take()
                if not re.fullmatch(r"\d", t):
                    raise _Defer
                e = Fraction(int(t))
            if e.denominator != 1 or abs(e) > 256 or (v == 0 and e < 0):
                raise _Defer
            v = v ** int(e)
            _check_size(v)
            if self.peek() == "^":
                raise _Defer
        return v

    def atom(self) -> Fraction:
        t = self.take()
        if t in ("(", "{"):
            v = self.expr()
            self.take(")" if t == "(" else "}")
        elif t == "\\frac":
            self.take("{")
            a = self.expr()
            self.take("}")
            self.take("{")
            b = self.expr()
            self.take("}")
            if b == 0:
                raise _Defer
            v = a / b
        elif t == "\\sqrt":
            self.take("{")
            v = _exact_sqrt(self.expr())
            self.take("}")
        elif t.isdigit():
            v = Fraction(int(t))
        else:  # a decimal inside an expression is read as a float by the full parser; infinity
            raise _Defer
        nxt = self.peek()
        if nxt is not None and (nxt[0].isdigit() or nxt[0] == "." or nxt in ("(", "{", "\\frac", "\\sqrt")):
            raise _Defer  # implicit products and mixed numbers ("2\\frac{1}{2}", "1 000")
        return v


def _check_size(v: Fraction) -> None:
    if v.numerator.bit_length() > _MAX_BITS or v.denominator.bit_length() > _MAX_BITS:
        raise _Defer


def _exact_sqrt(v: Fraction) -> Fraction:
    if v < 0:
        raise _Defer
    from math import isqrt

    a, b = isqrt(v.numerator), isqrt(v.denominator)
    if a * a != v.numerator or b * b != v.denominator:
        raise _Defer
    return Fraction(a, b)


_TIME = re.compile(r"\d{1,2}:\d{2}")
_COMMAND = re.compile(r"\\[a-zA-Z]+")
_LETTER = re.compile(r"[a-zA-Z]")
_NUM_COMMAND = re.compile(r"\\(?:frac|sqrt|cdot|times|div|infty)(?![a-zA-Z])")
_INFTY = re.compile(r"([+-]?)\s*\\infty")
_DECIMAL_POINT = re.compile(r"\d\.|\.\d")


def _number(core: str, percent: bool) -> Num:
    if NUM_RE.match(core):
        return literal(core, percent)
    stripped = core.strip()
    m = _INFTY.fullmatch(stripped)
    if m:
        return Num(None, percent=percent, inf=-1 if m[1] == "-" else 1)
    m = _MIXED.fullmatch(stripped)  # "2\\frac{1}{2}", "2 1/2": mixed numbers, as the reader reads them
    if m and m[2] and int(m[4]) != 0:
        whole = int(m[2]) + Fraction(int(m[3]), int(m[4]))
        return Num(-whole if m[1] == "-" else whole, percent=percent)
    if m and m[6] and int(m[7]) < int(m[8]):
        whole = int(m[6]) + Fraction(int(m[7]), int(m[8]))
        return Num(-whole if m[5] == "-" else whole, percent=percent)
    if _DECIMAL_POINT.search(core):
        raise _Defer
    reader = _Reader(core)
    if not reader.toks:
        raise _Defer
    v = reader.expr()
    if reader.peek() is not None:
        raise _Defer
    return Num(v, percent=percent)


def exact_number(core: str) -> Fraction | None:
    """The exact value of one number as this path reads it (``\\frac``, mixed numbers, ``\\sqrt``
    of squares, ``+ - * / ^``), or None (letters, irrationals, decimals inside expressions)."""
    try:
        return _number(core.strip(), False).value
    except (_Defer, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None


def _item(s: str) -> Val:
    s = s.strip()
    if _TIME.fullmatch(s):
        raise _Defer  # a time of day: text in the full path
    if _VAR.search(_COMMAND.sub("", s)) and ("=" in s or _REL.search(s)):
        return _equation(s) if "=" in s else _relation(s)
    if "=" in s or _REL.search(s):
        raise _Defer
    br = bracketed(s)
    if br is not None:
        o, c, inner = br
        items = [p for p in split_top(inner, (",", ";")) if p]
        if o == "\\{":
            return Group(tuple(_item(p) for p in items))
        if len(items) >= 2 or o != "(" or c != ")":
            return Seq(o, c, tuple(_item(p) for p in items))
    core, decor = split_decor(s)
    if decor.degree:
        raise _Defer
    core = core.strip()
    if _LETTER.search(_NUM_COMMAND.sub("", core)):
        raise _Defer
    return _number(core, decor.percent)


def _equation(s: str) -> Eq:
    """``x = 5``, ``x_1 = -2``: one name (one letter, perhaps a digit subscript) and a number."""
    lhs, _, rhs = s.partition("=")
    name = re.sub(r"\s+", "", lhs)
    if not re.fullmatch(r"[a-zA-Z](?:_\{?\d+\}?)?", name) or "=" in rhs or name in "eEiI":
        raise _Defer
    value = _item(rhs)
    if not isinstance(value, Num):
        raise _Defer
    return Eq(name, value)


def _relation(s: str) -> Ival:
    """``a < x \\le b``, ``x > 3``, ``2 \\ge x`` in one letter with number bounds, as an interval."""
    pieces = _REL.split(s)
    exprs, ops = [p.strip() for p in pieces[::2]], [p.strip() for p in pieces[1::2]]
    var = [k for k, e in enumerate(exprs) if _VAR.fullmatch(e)]
    if (
        len(var) != 1
        or exprs[var[0]] in "eEiI"
        or len(exprs) not in (2, 3)
        or (len(exprs) == 3 and var[0] != 1)
    ):
        raise _Defer
    bounds = [None if k == var[0] else _number(e, False) for k, e in enumerate(exprs)]
    if any(b is not None and b.value is None for b in bounds):
        raise _Defer
    ends = chain_ends(bounds, ops)
    if ends is None:
        raise _Defer
    lo_end, lo_open, hi_end, hi_open = ends
    lo = None if lo_end is None else lo_end.value
    hi = None if hi_end is None else hi_end.value
    if lo is not None and hi is not None and lo >= hi:
        raise _Defer  # empty or a point: sympy gives another kind of set
    return Ival(lo, hi, lo_open, hi_open)


def _as_ival(v: Val) -> Ival | None:
    """A two-item bracket as the interval the full path reads (``_compare._seq_as_set``)."""
    if isinstance(v, Ival):
        return v
    if not (isinstance(v, Seq) and len(v.items) == 2 and v.open in "([" and v.close in ")]"):
        return None
    a, b = v.items
    if not (isinstance(a, Num) and isinstance(b, Num)):
        return None
    if (a.value is None and a.inf != -1) or (b.value is None and b.inf != 1):
        raise _Defer
    if a.value is not None and b.value is not None and a.value >= b.value:
        raise _Defer
    lo_open = a.value is None or v.open == "("
    hi_open = b.value is None or v.close == ")"
    return Ival(a.value, b.value, lo_open, hi_open)


def fast_parse(s: str) -> tuple[Val, ...]:
    """The readings of an answer string (``_parse.parse``), or ``_Defer``."""
    s = strip_answer(s)
    if not s or _DEFER.search(s) or ("\\text" in s and re.search(r"\band\b|\bor\b", s)):
        raise _Defer
    literals, only = readings_prefix(s)
    readings: list[Val] = [literal(x) for x in literals]
    if only:
        return tuple(readings)
    parts = [p for p in split_top(s, (",",)) if p]
    readings.append(_item(parts[0]) if len(parts) == 1 else Group(tuple(_item(p) for p in parts)))
    return tuple(readings)


def clear_fast_caches() -> None:
    _readings.cache_clear()


def _equal(g: Val, p: Val) -> bool:
    g, p = flat(g, Group), flat(p, Group)
    if isinstance(g, Eq):
        if isinstance(p, Eq) and p.name != g.name:
            raise _Defer  # names that may still be one symbol (x_1, x_{1}): the full check
        return _equal(g.value, p.value if isinstance(p, Eq) else p)
    if isinstance(p, Eq):
        return _equal(g, p.value)
    if isinstance(g, Ival) or isinstance(p, Ival):
        if (
            isinstance(g, Group | Ival)
            and isinstance(p, Group | Ival)
            and (isinstance(g, Group) or isinstance(p, Group))
        ):
            raise _Defer  # unions of relations
        gi, pi = _as_ival(g), _as_ival(p)
        return gi is not None and pi is not None and gi == pi
    if isinstance(g, Num) and isinstance(p, Num):
        return scalar_eq(g, p)
    if isinstance(g, Group) and isinstance(p, Group):
        return multiset_eq(g.items, p.items, _equal)
    if isinstance(g, Seq) and isinstance(p, Seq):
        return bool(seq_eq(g, p, _equal))
    if isinstance(g, Seq | Group) and isinstance(p, Seq | Group):
        return len(g.items) == len(p.items) and all(
            _equal(a, b) for a, b in zip(g.items, p.items, strict=True)
        )
    return False  # a number against a list, tuple or interval


@functools.lru_cache(maxsize=4096)
def _readings(s: str) -> tuple[Val, ...] | None:
    """``fast_parse`` remembered (a reference is read once for all its responses); None: defer."""
    try:
        return fast_parse(s)
    except (_Defer, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None


def fast_decide(ans: Answers) -> tuple[bool, str, str | None] | None:
    """``fast_check`` on extracted answers (mode ``equivalent``)."""
    greads = _readings(ans.gold)
    preads = None if greads is None else _readings(ans.answer)  # a reference out of reach: done
    if greads is None or preads is None:
        return None
    try:
        if ans.boxes > 1 and not any(isinstance(g, Group) for g in greads):
            return False, f"hedged: {ans.boxes} different boxed answers", ans.answer
        if not any(_equal(g, p) for g in greads for p in preads):
            return False, "not equivalent to the reference", ans.answer
    except (_Defer, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None
    return True, "equivalent", ans.answer


# fast_check(gold, pred, mode="equivalent", question=None): its verdict on whole texts, else None
fast_check = functools.partial(decide_texts, fast_decide)
