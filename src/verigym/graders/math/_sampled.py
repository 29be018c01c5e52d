"""Expressions (in letters or not), lists, tuples and named values decided in floats, without
sympy: the full check's comparison rules run on the own reader's code (``_reader``).

The full check reads ``x^2 - 1`` and ``(x-1)(x+1)`` into sympy and samples both at six random
positive points (``_numeric.sample``: equal within 1e-8, at least three points) and at three
negative points where both are real; constants compare within 1e-9. Building sympy trees costs
about a millisecond per line; this path evaluates the reader's code directly in floats with
error bounds (``_bounded``) at the same points (same seeds, same symbol order, the same renamed
parameter) and decides only where floats vouch for the full check's verdict: error bounds below
1e-12 of the values, and the full check's margins (agree within 1e-10, differ above 1e-6, where
its bound is 1e-8). Structure follows ``_parse`` and ``_compare.equal`` for a subset: one
expression, a list or set of items (as multisets, ``_rules.multiset_eq``), tuples and intervals
(``_rules.interval_kinds_differ``), and ``name = value`` (accepted when the values match;
rejections there need the full check's other readings of an equation). Everything else returns
None and the full check decides: decimals written as numbers (rounding rules), two constants
that are not equal within the rounding bounds (sympy may hold two rationals, compared exactly
there; plain rational arithmetic is evaluated exactly here), units, percent and degree signs, text, relations, ``\\pm``,
function applications, ``floor``, ``min``/``max``, sums, infinity, ``i``, and any point the
bounds cannot decide. A property test checks it never decides differently from the full check.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from verigym.graders.math._bounded import NAMES, Bounded, Unsure
from verigym.graders.math._norm import Decor, split_decor, split_top
from verigym.graders.math._reader import Reading, read
from verigym.graders.math._rules import (
    NUM_RE,
    Answers,
    bracketed,
    flat,
    interval_kinds_differ,
    is_name,
    is_text,
    is_word,
    multiset_eq,
    prepare,
    readings_prefix,
    strip_answer,
)

__all__ = ["PARAMS", "clear_sampled_caches", "points", "sampled_check", "sampled_decide"]

PARAMS = {"k", "n", "m", "t", "j", "l", "c", "s", "p", "q", "r", "z"}  # renamable parameters
_VOUCH = 1e-12  # error bounds must stay below this fraction of the values compared
_NOT_READ = re.compile(r"\boo\b|\b(?:Sum|Product|floor|ceiling|Min|Max|_f\d+)\(")
_IRRATIONAL = re.compile(r"\b(?:pi|E|sqrt|root|log|log10|exp|sin|cos|tan|cot|sec|csc|asin|acos|atan)\b|\*\*")
_SMALL_POW = re.compile(r"\*\*\(\(?_n\('\d{1,2}'\)\)?\)")  # one power below 100: no huge integers
_LITERAL = re.compile(r"_n\('[\d.]+'\)")
_DEFER = re.compile(
    r"[;:<>|]|\\(?:text|mathrm|pm|mp|approx|in|ne|neq|le|ge|leq|geq|cup|cap|setminus|begin|circ|langle)"
    r"(?![a-zA-Z])|\b(?:and|or)\b"
)


def points(syms: list[Any], n: int, seed: int) -> list[dict[Any, float]]:
    """The sampling points of the full check (``_numeric.sample``), for symbols in this order."""
    rng = random.Random(seed)
    return [{s: rng.uniform(0.3, 2.7) for s in syms} for _ in range(n)]


@dataclass(frozen=True)
class _Expr:
    """One expression: the reader's code, compiled, and a renaming of its symbols."""

    reading: Reading
    code: Any
    ren: dict[str, str] = field(default_factory=dict)

    def exact(self) -> Fraction | None:
        """The exact value of a rational constant (``+ - * /``, small integer powers), else None."""
        code = self.reading.code
        rest = _LITERAL.sub("", _SMALL_POW.sub("", code))
        if self.reading.names() or code.count("**") > 1 or "**" in rest or set(rest) - set("+-*/() "):
            return None
        try:
            v = eval(self.code, {"__builtins__": {}}, {"_n": Fraction})
        except (ZeroDivisionError, ValueError, TypeError, OverflowError):
            raise Unsure from None
        if not isinstance(v, Fraction):
            raise Unsure
        return v

    @property
    def names(self) -> set[str]:
        return {self.ren.get(n, n) for n in self.reading.names()}

    def renamed(self, m: dict[str, str]) -> _Expr:
        return _Expr(
            self.reading,
            self.code,
            {n: m.get(self.ren.get(n, n), self.ren.get(n, n)) for n in self.reading.names()},
        )

    def at(self, pt: dict[str, float]) -> Bounded:
        env = dict(NAMES)
        for c in self.reading.letters:
            env[c] = Bounded(pt[self.ren.get(c, c)], 0.0)
        for ident, name in self.reading.symbols.items():
            env[ident] = Bounded(pt[self.ren.get(name, name)], 0.0)
        try:
            v = eval(self.code, {"__builtins__": {}}, env)
        except Unsure:
            raise
        except Exception:  # a domain error, a pole, anything floats cannot evaluate
            raise Unsure from None
        if not isinstance(v, Bounded):
            raise Unsure
        return v


@dataclass(frozen=True)
class _Group:  # _values.Group: an unordered list or set literal
    items: tuple[_Val, ...]


@dataclass(frozen=True)
class _Seq:  # _values.Seq: a tuple or interval
    open: str
    close: str
    items: tuple[_Val, ...]


@dataclass(frozen=True)
class _Eqn:  # _values.Eqn with a name (or constant sides) and a value
    name: str | None
    value: _Val
    lhs: str = ""  # "y" for a plain symbol, "f" for a function application "f(x)", else ""


_Val = _Expr | _Group | _Seq | _Eqn


def _parse(s: str) -> _Val:
    """``_parse.parse`` for the subset this path reads; ``Unsure`` for anything else."""
    s = strip_answer(s)
    if not s or ";" in s or readings_prefix(s) != ([], False):
        raise Unsure
    s = re.sub(r"\\text\{\s*(and|or|,)\s*\}", r" \1 ", s)  # _parse._parse_list: "1 \text{ and } 3"
    parts = [re.sub(r"^(?:and|or)\s+", "", p) for p in split_top(s, (",", " and ", " or ")) if p]
    return _item(parts[0]) if len(parts) == 1 else _Group(tuple(_item(p) for p in parts))


def _item(s: str) -> _Val:
    if _DEFER.search(s):
        raise Unsure
    s = re.sub(r"(?<=[})a-zA-Z])\s*\.$", "", s.strip())  # _parse._parse_item: a stray period
    eq = [p.strip() for p in split_top(s, ("=",))]
    if len(eq) > 1:
        return _equation(eq)
    if s.startswith("\\{") and len(split_top(s, ("-",))) > 1:
        raise Unsure  # a set difference
    br = bracketed(s)
    if br is not None:
        o, c, inner = br
        items = [p for p in split_top(inner, (",",)) if p]
        if o == "\\{":
            return _Group(tuple(_item(p) for p in items))
        if len(items) >= 2 or o != "(" or c != ")":
            if o not in "([" or c not in ")]":
                raise Unsure
            return _Seq(o, c, tuple(_item(p) for p in items))
    elif s.startswith("\\{"):
        raise Unsure
    core, decor = split_decor(s)
    if (
        core != s
        or decor != Decor()
        or (NUM_RE.match(core) and "." in core)
        or is_text(core)
        or is_word(core)
    ):
        raise Unsure  # decorations and decimal literals have their own rules; text is text
    reading = read(core)
    if reading is None or _NOT_READ.search(reading.code) or reading.functions or "i" in reading.names():
        raise Unsure  # the ANTLR parser's reading, function applications, i = sqrt(-1)
    return _Expr(reading, compile(reading.code, "<latex>", "eval"))


def _equation(parts: list[str]) -> _Eqn:
    """``_parse._parse_eq`` for ``name = value`` and constant sides: the value is the last part."""
    if len(parts) != 2 or not all(parts):
        raise Unsure
    named = is_name(parts[0])
    constant = not named and not any(re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", p)) for p in parts)
    if not (named or constant) or any(
        (br := bracketed(p)) is not None and len(split_top(br[2], (",",))) > 1 for p in parts
    ):
        raise Unsure
    lhs = read(parts[0]) if named else None
    kind = ""
    if lhs is not None and re.fullmatch(r"_f\d+\((?:[a-z]|_v\d+)\)", lhs.code) and len(lhs.functions) == 1:
        kind = "f"  # f(x): sympy's AppliedUndef, which no point evaluates
    elif lhs is not None and lhs.code in lhs.names() | set(lhs.symbols) and len(lhs.names()) == 1:
        kind = "y"
    name = re.sub(r"\s+", "", parts[0]) if named else None
    return _Eqn(name, _item(parts[1]), kind)


def _rename(g: set[str], p: set[str]) -> dict[str, str]:
    """``_numeric._rename``: one free parameter of the answer renamed to the reference's."""
    gs, ps = g - p, p - g
    if len(gs) == 1 and len(ps) == 1:
        (a,), (b,) = gs, ps
        if a.lower() in PARAMS and b.lower() in PARAMS:
            return {b: a}
    return {}


def _pair(g: _Expr, p: _Expr, pt: dict[str, float]) -> tuple[complex, complex, bool, float]:
    fa, fb = g.at(pt), p.at(pt)
    if (fa.e + fb.e) > _VOUCH * max(abs(fa.z), abs(fb.z)):
        raise Unsure  # near zero, cancellation, a pole: the bound cannot vouch
    return fa.z, fb.z, fa.cx or fb.cx, fa.e + fb.e


def _expr_eq(g: _Expr, p: _Expr) -> bool:
    """``_numeric.scalar_eq`` without decorations: ``expr_eq``'s sampling, or, for two constants,
    ``_const_eq``'s comparison within 1e-9 (two rationals are compared exactly there: deferred)."""
    if not g.names and not p.names:
        gq, pq = g.exact(), p.exact()
        if gq is not None and pq is not None:
            return gq == pq  # two sympy Rationals: compared exactly
        if not (_IRRATIONAL.search(g.reading.code) or _IRRATIONAL.search(p.reading.code)):
            raise Unsure  # factorials, |x|: sympy may hold two rationals
    p = p.renamed(_rename(g.names, p.names))
    syms = sorted(g.names | p.names)
    const = not syms
    for pt in points(syms, 6, 1234):
        a, b, _, err = _pair(g, p, pt)
        diff, scale = abs(a - b), max(abs(a), abs(b))
        if diff > 1e-6 * scale:
            return False
        if diff > 1e-10 * scale or (const and diff > err):
            raise Unsure  # constants: only equal within rounding (sympy may hold two rationals)
    for pt in points(syms, 3, 4321):
        a, b, cx, _ = _pair(g, p, {s: -v for s, v in pt.items()})
        if abs(a.imag) > 1e-6 * abs(a) or abs(b.imag) > 1e-6 * abs(b):
            continue  # a complex value: the rule compares only real ones
        diff, scale = abs(a - b), max(abs(a), abs(b))
        if diff <= 1e-10 * scale:
            continue
        if cx or diff <= 1e-6 * scale:
            raise Unsure  # the full check may see a value that is not real there
        return False
    return True


def _bound_rename(gname: str, pname: str, pval: _Val) -> _Val:
    """``_compare._bound_rename``: ``f(z) = z`` and ``f(x) = x`` define the same function."""
    ga, pa = gname.partition("(")[2].rstrip(")"), pname.partition("(")[2].rstrip(")")
    if not (ga.isalpha() and pa.isalpha() and len(ga) == len(pa) == 1 and ga != pa):
        return pval
    return pval.renamed({pa.lower(): ga.lower()}) if isinstance(pval, _Expr) else pval


def _name_key(name: str) -> tuple[str, int]:
    return name.split("(")[0].lower(), name.count(",") + ("(" in name)


def _no_substitution(g: _Eqn, p: _Val) -> bool:
    """``y = rhs`` against ``p`` (values not equal): ``_compare._eqn_eq`` then puts ``p`` in for
    each variable of ``y - rhs`` that ``p`` lacks; with ``rhs``'s variables all in ``p`` and ``y``
    not in ``rhs`` that is ``y`` alone, and the sampling already done (no parameter renamed)."""
    if not (isinstance(g.value, _Expr) and isinstance(p, _Expr)) or g.name is None:
        return False
    y = read(g.name)
    return y is not None and not (y.names() & g.value.names) and g.value.names <= p.names


def _equal(g: _Val, p: _Val) -> bool:
    """``_compare.equal`` on the subset; ``Unsure`` where it would need more than floats."""
    g, p = flat(g, _Group), flat(p, _Group)
    if isinstance(g, _Eqn):
        if isinstance(p, _Eqn):
            named = g.name and p.name and _name_key(g.name) == _name_key(p.name)
            if named and _equal(g.value, _bound_rename(g.name or "", p.name or "", p.value)):
                return True
            if named and g.lhs == p.lhs == "f":
                return False  # proportional sides and substitution need values of f: none
        elif _equal(g.value, p):
            return True
        elif g.lhs == "y" and _no_substitution(g, p):
            return False
        raise Unsure  # proportional sides, substitution: the full check's other readings
    if isinstance(p, _Eqn):
        return _equal(g, p.value)
    if isinstance(g, _Expr) and isinstance(p, _Expr):
        return _expr_eq(g, p)
    if isinstance(g, _Group) and isinstance(p, _Group):
        return multiset_eq(g.items, p.items, _equal)
    if isinstance(g, _Seq) and isinstance(p, _Seq):
        if len(g.items) != len(p.items):
            return False
        if interval_kinds_differ(g.open, g.close, p.open, p.close, len(g.items)):
            return False
        if all(_equal(a, b) for a, b in zip(g.items, p.items, strict=True)):
            return True
        if any(isinstance(i, _Expr) and i.names for i in g.items + p.items):
            raise Unsure  # a renamed parameter across the tuple (_compare._rename_parameter)
        return False
    if isinstance(g, _Seq | _Group) and isinstance(p, _Seq | _Group):
        return len(g.items) == len(p.items) and all(
            _equal(a, b) for a, b in zip(g.items, p.items, strict=True)
        )
    raise Unsure  # a number against a set, an interval read as a set: sympy's sets


def sampled_check(
    gold: str, pred: str, mode: str = "equivalent", question: str | None = None
) -> tuple[bool, str, str | None] | None:
    """``_check.check``'s verdict when floats vouch for it, else None."""
    if mode.strip() != "equivalent" or len(pred) > 4000 or len(gold) > 4000:
        return None
    ans = prepare(gold, pred, question)
    return sampled_decide(ans) if isinstance(ans, Answers) else ans


@functools.lru_cache(maxsize=4096)
def _value(s: str) -> _Val | None:
    """``_parse`` remembered (a reference is read once for all its responses); None: defer."""
    try:
        return _parse(s)
    except (Unsure, RecursionError):
        return None


def clear_sampled_caches() -> None:
    _value.cache_clear()


def sampled_decide(ans: Answers) -> tuple[bool, str, str | None] | None:
    """``sampled_check`` on extracted answers (mode ``equivalent``)."""
    g, p = _value(ans.gold), _value(ans.answer)
    if g is None or p is None:
        return None
    if ans.boxes > 1 and not isinstance(g, _Group):
        return False, f"hedged: {ans.boxes} different boxed answers", ans.answer
    try:
        same = _equal(g, p)
    except (Unsure, RecursionError):
        return None
    return (
        (True, "equivalent", ans.answer) if same else (False, "not equivalent to the reference", ans.answer)
    )
