"""Equivalence of parsed answers for the math grader (numbers: ``_numeric``).

Equations: the same named value (``x = 5`` vs ``5``; ``f(z)=z`` vs ``f(x)=x``), proportional sides
(``2x+4y=3`` vs ``y = -x/2 + 3/4``, never two different lines), or, when linear in a variable, the
answer satisfying the reference's equation (``xy = 6`` vs ``6/x``). Inequalities in one variable
are sets; intervals compare endpoints and open/closed ends; tuples in order; unordered lists as
multisets (as sets when sizes differ); matrices entry by entry (a vector may be a tuple).
"""

from __future__ import annotations

import math
from typing import Any

import sympy

from verigym.graders.math._shared._matching import flat, matrix_eq, multiset_eq, seq_eq
from verigym.graders.math._shared._prose import prose_sign, prose_value, says
from verigym.graders.math._sympy_path._numeric import (
    PARAMS,
    close,
    expr_eq,
    num,
    point_value,
    points,
    sample,
    scalar_eq,
)
from verigym.graders.math._sympy_path._values import (
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


def _ratio_const(d1: Any, d2: Any) -> bool:
    """``d1 / d2`` is a nonzero constant: two equations ``d = 0`` with the same solutions."""
    if d1.free_symbols != d2.free_symbols or not d1.free_symbols:
        return False
    syms = sorted(d1.free_symbols, key=str)
    ratios = []
    for pt in points(syms, 5, 99):
        try:
            a0, b0 = point_value(d1, pt), point_value(d2, pt)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError):
            continue
        if a0 is None or b0 is None:
            continue
        a, b = a0, b0
        if abs(b) < 1e-12 or not math.isfinite(abs(a)) or not math.isfinite(abs(b)):
            continue
        ratios.append(a / b)
    if len(ratios) < 3 or abs(ratios[0]) < 1e-12:
        return False
    return all(close(r, ratios[0], 1e-8) for r in ratios)


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


def _identity_value(e: Eqn) -> Value | None:
    """``expr = simplified`` (both sides the same function) states the value ``simplified``."""
    if e.value is not None or not isinstance(e.lhs, sympy.Expr) or not isinstance(e.rhs, sympy.Expr):
        return e.value
    if e.lhs.free_symbols and expr_eq(e.lhs, e.rhs):
        return Scalar(e.rhs, str(e.rhs))
    return None


def _eqn_eq(g: Eqn, p: Value) -> bool:
    if not isinstance(p, Eqn) and g.value is None:
        ident = _identity_value(g)
        if ident is not None and equal(ident, p):
            return True
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
    return bool(syms) and bool(sample(left, right, syms))


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
        sample(rest, sympy.Integer(0), sorted(rest.free_symbols, key=str))
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
        pt = points(syms, 1, 7)[0]
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
        v = num(piece[0]) if not piece[0].is_infinite else None
        return -math.inf if piece[0] == -sympy.oo else (v.real if v else 0.0)

    for x, y in zip(sorted(pa, key=key), sorted(pb, key=key), strict=True):
        if x[2:] != y[2:] or not (_endpoint_eq(x[0], y[0]) and _endpoint_eq(x[1], y[1])):
            return False
    return True


def _seq_as_set(s: Seq[Value]) -> Any:
    if (
        len(s.items) == 2
        and s.open in "(["
        and s.close in ")]"
        and all(isinstance(i, Scalar) for i in s.items)
    ):
        a, b = (i.expr for i in s.items if isinstance(i, Scalar))
        return sympy.Interval(a, b, left_open=s.open == "(", right_open=s.close == ")")
    return None


def _flat(v: Value) -> Value:
    return flat(v, Group)  # type: ignore[no-any-return]


def equal(g: Value, p: Value) -> bool:
    """Is the answer ``p`` equivalent to the reference ``g``?"""
    g, p = _flat(g), _flat(p)
    if isinstance(g, Eqn):
        return _eqn_eq(g, p)
    if isinstance(p, Eqn):
        value = _identity_value(p)
        return value is not None and equal(g, value)
    if isinstance(g, Scalar) and isinstance(p, Scalar):
        return scalar_eq(g, p)
    if isinstance(g, Rel) and isinstance(p, Rel):
        return _rel_eq(g, p)
    if isinstance(g, Text) or isinstance(p, Text):
        return (_text_of(g) is not None and _text_of(g) == _text_of(p)) or _prose_eq(g, p)
    if isinstance(g, Group) and isinstance(p, Group):
        return multiset_eq(g.items, p.items, equal)
    if isinstance(g, Seq) and isinstance(p, Seq):
        same = seq_eq(g, p, equal)
        if same is not None:
            return same
        renamed = _rename_parameter(g, p)
        return renamed is not None and all(equal(a, b) for a, b in zip(g.items, renamed.items, strict=True))
    if isinstance(g, Seq | Group) and isinstance(p, Seq | Group):
        return len(g.items) == len(p.items) and all(
            equal(a, b) for a, b in zip(g.items, p.items, strict=True)
        )
    if isinstance(g, Mat) or isinstance(p, Mat):
        return matrix_eq(g, p, equal, Mat, Seq)
    if isinstance(g, Rel) and isinstance(p, Seq | Group) and _order_eq(g, p):
        return True
    gs, ps = _as_set(g), _as_set(p)
    if gs is not None and ps is not None:
        if isinstance(g, Rel) and isinstance(p, Rel):
            return _rel_eq(g, p)
        return sets_eq(gs, ps)
    return False


def _prose_eq(g: Value, p: Value) -> bool:
    """A reference sentence that states the answer (``_prose``)."""
    if not isinstance(g, Text):
        return False
    if isinstance(p, Text):
        return says(g.t, p.t)
    if isinstance(p, Scalar) and isinstance(p.expr, sympy.Expr) and not p.expr.free_symbols:
        value = prose_value(g.t)
        return value is not None and bool(p.expr == value)
    if isinstance(p, Rel) and len(p.ops) == 1:
        sign = prose_sign(g.t)
        flipped = {"<": ">", ">": "<"}.get(p.ops[0])
        return sign is not None and (
            (p.ops[0] == sign and p.exprs[1] == 0) or (flipped == sign and p.exprs[0] == 0)
        )
    return False


def _order_eq(g: Rel, p: Seq[Value] | Group) -> bool:
    """``b < a < d < c`` answered ``b, a, d, c``: the same letters in the chain's order."""
    if len(set(g.ops)) != 1 or g.ops[0] not in ("<", ">") or len(g.exprs) != len(p.items):
        return False
    if not all(isinstance(e, sympy.Symbol) for e in g.exprs):
        return False
    return all(isinstance(i, Scalar) and i.expr == e for i, e in zip(p.items, g.exprs, strict=True))


def _rename_parameter(g: Seq[Value], p: Seq[Value]) -> Seq[Value] | None:
    """``(-32 + 3x, 64 - 5x)`` and ``(-32 + 3t, 64 - 5t)``: one family of tuples when the answer's
    only other letter is a parameter name (t, k, n, ...), renamed consistently in every item."""
    if not all(isinstance(i, Scalar) and isinstance(i.expr, sympy.Basic) for i in g.items + p.items):
        return None
    gfree = set().union(*(i.expr.free_symbols for i in g.items if isinstance(i, Scalar)))
    pfree = set().union(*(i.expr.free_symbols for i in p.items if isinstance(i, Scalar)))
    extra_g, extra_p = gfree - pfree, pfree - gfree
    if len(extra_g) != 1 or len(extra_p) != 1 or str(next(iter(extra_p))).lower() not in PARAMS:
        return None
    swap = {next(iter(extra_p)): next(iter(extra_g))}
    items = tuple(Scalar(i.expr.xreplace(swap), i.raw) for i in p.items if isinstance(i, Scalar))
    return Seq(p.open, p.close, items)


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
