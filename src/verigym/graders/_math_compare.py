"""Equivalence of parsed answers for the math grader.

Numbers: exact rationals compare exactly; other constants compare at 40 significant digits with a
*relative* tolerance (tiny values such as ``1/2004!`` are never rounded to zero). A decimal written
with k places matches a value that rounds to it, when it carries enough significant digits to be a
rounding (``0.33`` for ``1/3``, not ``0`` for ``0.4``; an integer never rounds: ``1000`` is not
``1000.05``). Expressions: structural equality, then numeric sampling at random positive points
(this also decides identities sympy cannot simplify, such as ``sqrt(1/n) = 1/sqrt(n)``), then
``simplify``. Equations: the same named value (``x = 5`` vs ``5``), proportional sides
(``2x+4y=3`` vs ``y = -x/2 + 3/4``), or the answer satisfying the reference's implicit equation.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import sympy

from verigym.graders._math_parse import (
    Eqn,
    Group,
    Mat,
    ParseError,
    Rel,
    Scalar,
    Seq,
    SetV,
    Text,
    Value,
    rel_to_set,
)

__all__ = ["equal"]

_REL_TOL = 1e-9
_PARAMS = {"k", "n", "m", "t", "j", "l", "c", "s", "p", "q", "r", "z"}
_OPAQUE = (sympy.Sum, sympy.Product, sympy.Integral, sympy.Derivative, sympy.Limit)


def _num(e: Any) -> complex | None:
    """``e`` as a Python complex (None when not a finite number or outside float range)."""
    try:
        v = complex(sympy.N(e, 40))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None
    return v if math.isfinite(v.real) and math.isfinite(v.imag) else None


def _big(e: Any) -> Any:
    """``e`` at 40 digits as a sympy number, whose exponent range is unbounded (1/2004! != 0)."""
    try:
        v = sympy.N(e, 40)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None
    return v if v.is_number and v.is_finite else None


def _const_close(a: Any, b: Any) -> bool:
    va, vb = _big(a), _big(b)
    if va is None or vb is None:
        return False
    scale = max(abs(va), abs(vb))
    if scale == 0:
        return True
    return bool(abs(va - vb) <= _REL_TOL * scale)


def _close(a: complex, b: complex, tol: float = _REL_TOL) -> bool:
    scale = max(abs(a), abs(b))
    return abs(a - b) <= tol * scale if scale > 0 else True


def _rounds_to(decimal: Scalar, other: Any) -> bool:
    """``decimal`` (written with ``places`` digits) is ``other`` rounded to that many places."""
    assert decimal.places is not None
    v, w = _num(decimal.expr), _num(other)
    if v is None or w is None or abs(w.imag) > 0:
        return False
    return abs(v.real - w.real) <= 0.5 * 10.0 ** (-decimal.places) * (1 + 1e-9)


def _const_eq(g: Scalar, p: Scalar, gexpr: Any, pexpr: Any) -> bool:
    if gexpr == pexpr:
        return True
    exact = isinstance(gexpr, sympy.Rational) and isinstance(pexpr, sympy.Rational)
    if not exact and _const_close(gexpr, pexpr):
        return True
    # Rounded decimals; the rounded side needs enough significant digits to be a rounding.
    # A decimal stands for an exact irrational (pi, sqrt 2) only with 4+ significant digits.
    need = 2 if isinstance(gexpr, sympy.Rational) else 4
    if p.places is not None and g.places is None and p.sig >= need:
        return _rounds_to(p, gexpr) and not (isinstance(gexpr, sympy.Integer) and p.places == 0)
    if g.places is not None and p.places is None and g.sig >= 3 and not isinstance(pexpr, sympy.Integer):
        return _rounds_to(g, pexpr)
    if g.places is not None and p.places is not None and g.places != p.places:
        coarse, fine = (g, pexpr) if g.places < p.places else (p, gexpr)
        return coarse.sig >= 3 and _rounds_to(coarse, fine)
    return False


def _points(syms: list[Any], n: int, seed: int) -> list[dict[Any, float]]:
    rng = random.Random(seed)
    return [{s: rng.uniform(0.3, 2.7) for s in syms} for _ in range(n)]


def _value_at(e: Any, pt: dict[Any, float]) -> Any:
    try:
        v = e.evalf(20, subs=pt)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError):
        return None
    return v if v.is_number and v.is_finite else None


def _agree(va: Any, vb: Any) -> bool:
    scale = max(abs(va), abs(vb))
    return bool(scale == 0 or abs(va - vb) <= 1e-8 * scale)


def _sample(a: Any, b: Any, syms: list[Any]) -> bool | None:
    """Numeric identity test of ``a`` and ``b``: True/False, or None when it cannot evaluate.

    Equal at 6 random positive points (the usual domain of answers: sqrt(1/n) = 1/sqrt(n)), and
    not different at negative points where both sides are real (|x| is not x). Values stay sympy
    numbers, so tiny magnitudes are compared, not flushed to zero."""
    seen = 0
    for pt in _points(syms, 6, 1234):
        va, vb = _value_at(a, pt), _value_at(b, pt)
        if va is None or vb is None:
            continue
        if not _agree(va, vb):
            return False
        seen += 1
    if seen < 3:
        return None
    for pt in _points(syms, 3, 4321):
        neg = {s: -v for s, v in pt.items()}
        va, vb = _value_at(a, neg), _value_at(b, neg)
        if va is not None and vb is not None and va.is_real and vb.is_real and not _agree(va, vb):
            return False
    return True


def _rename(g: Any, p: Any) -> Any:
    """Rename one free parameter of ``p`` to ``g``'s (``n\\pi`` vs ``k\\pi``, ``C`` vs ``c``)."""
    gs, ps = g.free_symbols - p.free_symbols, p.free_symbols - g.free_symbols
    if len(gs) == 1 and len(ps) == 1:
        (a,), (b,) = gs, ps
        if str(a).lower() in _PARAMS and str(b).lower() in _PARAMS:
            return p.xreplace({b: a})
    return p


def expr_eq(g: Any, p: Any) -> bool:
    if g == p:
        return True
    if not (isinstance(g, sympy.Expr) and isinstance(p, sympy.Expr)):
        return False
    p = _rename(g, p)
    if g == p:
        return True
    syms = sorted(g.free_symbols | p.free_symbols, key=str)
    if not g.has(*_OPAQUE) and not p.has(*_OPAQUE) and not g.atoms(sympy.core.function.AppliedUndef):
        verdict = _sample(g, p, syms)
        if verdict is not None:
            return verdict
    if g.free_symbols != p.free_symbols:
        return False
    try:
        return bool(sympy.simplify(g - p) == 0)
    except (TypeError, ValueError, NotImplementedError):
        return False


def scalar_eq(g: Scalar, p: Scalar) -> bool:
    gvals, pvals = [g.expr], [p.expr]
    if g.decor.percent and not p.decor.percent:
        gvals.append(g.expr / 100)
    if p.decor.percent and not g.decor.percent:
        pvals.append(p.expr / 100)
    if g.decor.degree and not p.decor.degree:
        gvals.append(g.expr * sympy.pi / 180)
    if p.decor.degree and not g.decor.degree:
        pvals.append(p.expr * sympy.pi / 180)
    for gv, pv in itertools.product(gvals, pvals):
        if not isinstance(gv, sympy.Expr) or not isinstance(pv, sympy.Expr):
            continue
        if gv.free_symbols or pv.free_symbols:
            if expr_eq(gv, pv):
                return True
        else:
            gs = g if gv is g.expr else Scalar(gv, g.raw)
            ps = p if pv is p.expr else Scalar(pv, p.raw)
            if _const_eq(gs, ps, gv, pv):
                return True
    return False


def _ratio_const(d1: Any, d2: Any) -> bool:
    """``d1 / d2`` is a nonzero constant: two equations ``d = 0`` with the same solutions."""
    if d1.free_symbols != d2.free_symbols or not d1.free_symbols:
        return False
    syms = sorted(d1.free_symbols, key=str)
    ratios = []
    for pt in _points(syms, 5, 99):
        try:
            a, b = complex(d1.evalf(20, subs=pt)), complex(d2.evalf(20, subs=pt))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError):
            continue
        if abs(b) < 1e-12 or not math.isfinite(abs(a)) or not math.isfinite(abs(b)):
            continue
        ratios.append(a / b)
    if len(ratios) < 3 or abs(ratios[0]) < 1e-12:
        return False
    return all(_close(r, ratios[0], 1e-8) for r in ratios)


def _name_key(name: str) -> tuple[str, int]:
    head = name.split("(")[0].lower()
    return head, name.count(",") + ("(" in name)


def _bound_rename(gname: str, pname: str, pval: Value) -> Value:
    """``f(z) = z`` and ``f(x) = x`` define the same function: rename the bound variable."""
    ga, pa = gname.partition("(")[2].rstrip(")"), pname.partition("(")[2].rstrip(")")
    if not (ga.isalpha() and pa.isalpha() and len(ga) == len(pa) == 1 and ga != pa):
        return pval
    if isinstance(pval, Scalar) and isinstance(pval.expr, sympy.Basic):
        return Scalar(pval.expr.xreplace({sympy.Symbol(pa.lower()): sympy.Symbol(ga.lower())}), pval.raw)
    return pval


def _eqn_eq(g: Eqn, p: Value) -> bool:
    if isinstance(p, Eqn):
        named = g.name and p.name and g.value is not None and p.value is not None
        if named and _name_key(g.name or "") == _name_key(p.name or ""):
            assert g.value is not None and p.value is not None
            if equal(g.value, _bound_rename(g.name or "", p.name or "", p.value)):
                return True
        exprs = (g.lhs, g.rhs, p.lhs, p.rhs)
        if all(isinstance(x, sympy.Expr) for x in exprs) and _ratio_const(g.lhs - g.rhs, p.lhs - p.rhs):
            return True
        if g.value is not None and p.value is not None and (g.name is None or p.name is None):
            return equal(g.value, p.value)
        # "xy = 6" and "y = 6/x": substituting one side's solved variable satisfies the other.
        return _solves(g, p) or _solves(p, g)
    if g.value is not None and equal(g.value, p):
        return True
    if isinstance(p, Scalar) and isinstance(g.lhs, sympy.Expr) and isinstance(g.rhs, sympy.Expr):
        # "xy = 6" answered "6/x": the answer, put in for a variable, satisfies the equation.
        d = g.lhs - g.rhs
        for y in sorted(d.free_symbols - p.expr.free_symbols, key=str):
            if _linear_in(d, y) and _satisfies(g.lhs, g.rhs, y, p.expr):
                return True
    return False


def _linear_in(d: Any, var: Any) -> bool:
    """The equation ``d = 0`` fixes ``var`` uniquely (degree 1): ``x^2 + y^2 = 1`` does not."""
    try:
        return bool(d.is_polynomial(var) and sympy.degree(d, var) == 1)
    except (sympy.PolynomialError, TypeError, ValueError):
        return False


def _satisfies(lhs: Any, rhs: Any, var: Any, value: Any) -> bool:
    left, right = lhs.xreplace({var: value}), rhs.xreplace({var: value})
    if left == right:
        return True
    syms = sorted(left.free_symbols | right.free_symbols, key=str)
    return bool(syms) and bool(_sample(left, right, syms))


def _solves(eq: Eqn, named: Eqn) -> bool:
    if not (named.name and isinstance(named.value, Scalar) and isinstance(eq.lhs, sympy.Expr)):
        return False
    if not isinstance(eq.rhs, sympy.Expr) or not isinstance(named.lhs, sympy.Symbol):
        return False
    d = eq.lhs - eq.rhs
    if named.lhs not in d.free_symbols or named.lhs in named.value.expr.free_symbols:
        return False
    if not _linear_in(d, named.lhs):
        return False
    rest = d.xreplace({named.lhs: named.value.expr})
    if rest == 0:
        return True
    return bool(rest.free_symbols) and bool(
        _sample(rest, sympy.Integer(0), sorted(rest.free_symbols, key=str))
    )


def _rel_norm(r: Rel) -> list[tuple[Any, str]]:
    out = []
    for a, op, b in zip(r.exprs, r.ops, r.exprs[1:], strict=False):
        if op in ("<", "\\le"):
            out.append((b - a, "strict" if op == "<" else "weak"))
        elif op in (">", "\\ge"):
            out.append((a - b, "strict" if op == ">" else "weak"))
        else:
            out.append((a - b, "ne"))
    return out


def _rel_eq(g: Rel, p: Rel) -> bool:
    try:
        return sets_eq(rel_to_set(g), rel_to_set(p))
    except (ParseError, TypeError, ValueError, NotImplementedError):
        pass
    gn, pn = _rel_norm(g), _rel_norm(p)
    if len(gn) != len(pn):
        return False
    for (d1, k1), (d2, k2) in zip(gn, pn, strict=True):
        if k1 != k2:
            return False
        if expr_eq(d1, d2):
            continue
        if not d1.free_symbols and not d2.free_symbols:
            return False
        syms = sorted(d1.free_symbols | d2.free_symbols, key=str)
        pt = _points(syms, 1, 7)[0]
        try:
            ratio = complex((d1 / d2).evalf(20, subs=pt))
        except (TypeError, ValueError, ZeroDivisionError):
            return False
        if not (_ratio_const(d1, d2) and (ratio.real > 0 or k1 == "ne")):
            return False
    return True


def _pieces(s: Any) -> list[tuple[Any, Any, bool, bool]] | None:
    """A union of intervals and points as (left, right, left_open, right_open) pieces."""
    if isinstance(s, sympy.Interval):
        return [(s.left, s.right, bool(s.left_open), bool(s.right_open))]
    if isinstance(s, sympy.FiniteSet):
        return [(x, x, False, False) for x in s.args]
    if isinstance(s, sympy.Union):
        out: list[tuple[Any, Any, bool, bool]] = []
        for a in s.args:
            sub = _pieces(a)
            if sub is None:
                return None
            out += sub
        return out
    return None


def _endpoint_eq(a: Any, b: Any) -> bool:
    if a == b:
        return True
    if a.is_infinite or b.is_infinite:
        return False
    return scalar_eq(Scalar(a, str(a)), Scalar(b, str(b)))


def sets_eq(a: Any, b: Any) -> bool:
    if a == b:
        return True
    pa, pb = _pieces(a), _pieces(b)
    if pa is None or pb is None or len(pa) != len(pb):
        return False

    def key(piece: tuple[Any, Any, bool, bool]) -> float:
        v = _num(piece[0]) if not piece[0].is_infinite else None
        return -math.inf if piece[0] == -sympy.oo else (v.real if v else 0.0)

    for x, y in zip(sorted(pa, key=key), sorted(pb, key=key), strict=True):
        if x[2:] != y[2:] or not (_endpoint_eq(x[0], y[0]) and _endpoint_eq(x[1], y[1])):
            return False
    return True


def _seq_as_set(s: Seq) -> Any:
    if (
        len(s.items) == 2
        and s.open in "(["
        and s.close in ")]"
        and all(isinstance(i, Scalar) for i in s.items)
    ):
        a, b = (i.expr for i in s.items if isinstance(i, Scalar))
        return sympy.Interval(a, b, left_open=s.open == "(", right_open=s.close == ")")
    return None


def _multiset_eq(gs: tuple[Value, ...], ps: tuple[Value, ...]) -> bool:
    """Unordered lists: item by item when the sizes agree, else as sets (repeats count once)."""
    if len(gs) == len(ps):
        used: set[int] = set()
        for gi in gs:
            for j, pj in enumerate(ps):
                if j not in used and equal(gi, pj):
                    used.add(j)
                    break
            else:
                break
        else:
            return True
    if max(len(gs), len(ps)) > 30:
        return False
    return all(any(equal(g, p) for p in ps) for g in gs) and all(any(equal(g, p) for g in gs) for p in ps)


def _flat(v: Value) -> Value:
    while isinstance(v, Group) and len(v.items) == 1:
        v = v.items[0]
    return v


def equal(g: Value, p: Value) -> bool:
    """Is the answer ``p`` equivalent to the reference ``g``?"""
    g, p = _flat(g), _flat(p)
    if isinstance(g, Eqn):
        return _eqn_eq(g, p)
    if isinstance(p, Eqn):
        return p.value is not None and equal(g, p.value)
    if isinstance(g, Scalar) and isinstance(p, Scalar):
        return scalar_eq(g, p)
    if isinstance(g, Rel) and isinstance(p, Rel):
        return _rel_eq(g, p)
    if isinstance(g, Text) or isinstance(p, Text):
        return _text_of(g) is not None and _text_of(g) == _text_of(p)
    if isinstance(g, Group) and isinstance(p, Group):
        return _multiset_eq(g.items, p.items)
    if isinstance(g, Seq) and isinstance(p, Seq):
        if len(g.items) != len(p.items):
            return False
        kinds = {g.open + g.close, p.open + p.close}
        if len(g.items) == 2 and kinds <= {"()", "[]", "(]", "[)"} and len(kinds) > 1:
            return False  # intervals: open and closed ends differ
        return all(equal(a, b) for a, b in zip(g.items, p.items, strict=True))
    if isinstance(g, Seq | Group) and isinstance(p, Seq | Group):
        return len(g.items) == len(p.items) and all(
            equal(a, b) for a, b in zip(g.items, p.items, strict=True)
        )
    if isinstance(g, Mat) or isinstance(p, Mat):
        return _mat_eq(g, p)
    gs, ps = _as_set(g), _as_set(p)
    if gs is not None and ps is not None:
        if isinstance(g, Rel) and isinstance(p, Rel):
            return _rel_eq(g, p)
        return sets_eq(gs, ps)
    return False


def _as_set(v: Value) -> Any:
    try:
        if isinstance(v, SetV):
            return v.s
        if isinstance(v, Group) and any(isinstance(i, Rel | SetV) for i in v.items):
            # "4 < m <= 8 or 10 <= m < 12", "a <= -2 or a = 1": a union
            parts = []
            for item in v.items:
                if isinstance(item, Eqn) and isinstance(item.value, Scalar):
                    parts.append(sympy.FiniteSet(item.value.expr))
                elif isinstance(item, Scalar):
                    parts.append(sympy.FiniteSet(item.expr))
                else:
                    part = _as_set(item)
                    if part is None:
                        return None
                    parts.append(part)
            return sympy.Union(*parts)
        if isinstance(v, Seq):
            return _seq_as_set(v)
        if isinstance(v, Rel):
            return rel_to_set(v)
    except (ParseError, TypeError, ValueError, NotImplementedError):
        return None
    return None


def _text_of(v: Value) -> str | None:
    if isinstance(v, Text):
        return v.t
    if isinstance(v, Scalar):
        return "".join(ch for ch in v.raw.lower() if ch.isalnum() or ch == " ").strip()
    return None


def _mat_eq(g: Value, p: Value) -> bool:
    def cells(v: Value) -> tuple[tuple[int, int], list[Value]] | None:
        if isinstance(v, Mat):
            return (len(v.rows), len(v.rows[0]) if v.rows else 0), [c for r in v.rows for c in r]
        if isinstance(v, Seq):
            return (len(v.items), 1), list(v.items)
        return None

    a, b = cells(g), cells(p)
    if a is None or b is None or len(a[1]) != len(b[1]):
        return False
    if a[0] != b[0] and 1 not in a[0] + b[0]:
        return False
    return all(equal(x, y) for x, y in zip(a[1], b[1], strict=True))
