"""Numbers and expressions for the math grader: exact, rounded and sampled comparisons.

Exact rationals compare exactly; other constants compare at 40 significant digits with a
*relative* tolerance (tiny values such as ``1/2004!`` are never rounded to zero). A decimal written
with k places matches a value that rounds to it, when it carries enough significant digits to be a
rounding (``0.33`` for ``1/3``, not ``0`` for ``0.4``; ``3.1416`` but not ``3.14`` for pi; an
integer never rounds: ``1000`` is not ``1000.05``). Expressions: structural equality, then numeric
sampling at random points (this also decides identities sympy cannot simplify, such as
``sqrt(1/n) = 1/sqrt(n)``), then ``simplify``. Percent and degree signs add readings (25% = 0.25,
30 degrees = pi/6) only when one side carries the sign.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import sympy

from verigym.graders.math._float_path._sampledexpr import PARAMS, points
from verigym.graders.math._shared._matching import Written, decimal_match
from verigym.graders.math._sympy_path._floats import Unsure, fvalue
from verigym.graders.math._sympy_path._values import Scalar

__all__ = ["PARAMS", "close", "expr_eq", "num", "point_value", "points", "sample", "scalar_eq"]

_REL_TOL = 1e-9
_OPAQUE = (sympy.Sum, sympy.Product, sympy.Integral, sympy.Derivative, sympy.Limit)


def num(e: Any) -> complex | None:
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


def close(a: complex, b: complex, tol: float = _REL_TOL) -> bool:
    scale = max(abs(a), abs(b))
    return abs(a - b) <= tol * scale if scale > 0 else True


def _rounds_to(decimal: Scalar, other: Any) -> bool:
    """``decimal`` (written with ``places`` digits) is ``other`` rounded to that many places."""
    assert decimal.places is not None
    v, w = num(decimal.expr), num(other)
    if v is None or w is None or abs(w.imag) > 0:
        return False
    return abs(v.real - w.real) <= 0.5 * 10.0 ** (-decimal.places) * (1 + 1e-9)


def _truncates_to(decimal: Scalar, other: Any) -> bool:
    """``decimal`` is ``other`` cut after ``places`` digits (a reference such as ``41.494`` for
    41.4949...): the value lies between the decimal and the next one away from zero."""
    assert decimal.places is not None
    v, w = num(decimal.expr), num(other)
    if v is None or w is None or abs(w.imag) > 0:
        return False
    d = (w.real - v.real) * (1 if v.real >= 0 else -1)
    return -1e-12 * max(1.0, abs(v.real)) <= d < 10.0 ** (-decimal.places) * (1 - 1e-9)


def _const_eq(g: Scalar, p: Scalar, gexpr: Any, pexpr: Any) -> bool:
    if gexpr == pexpr:
        return True
    exact = isinstance(gexpr, sympy.Rational) and isinstance(pexpr, sympy.Rational)
    if not exact and _const_close(gexpr, pexpr):
        return True
    gw = Written(g.places, g.sig, isinstance(gexpr, sympy.Rational), isinstance(gexpr, sympy.Integer))
    pw = Written(p.places, p.sig, isinstance(pexpr, sympy.Rational), isinstance(pexpr, sympy.Integer))

    def rounds(side: str) -> bool:
        return _rounds_to(g, pexpr) if side == "g" else _rounds_to(p, gexpr)

    return decimal_match(gw, pw, rounds, lambda: _truncates_to(g, pexpr))


def _value_at(e: Any, pt: dict[Any, float]) -> Any:
    if e.has(*_OPAQUE):
        return None  # a sum to a float bound means nothing, and evalf spends seconds on it
    try:
        v = e.evalf(20, subs=pt)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError):
        return None
    return v if v.is_number and v.is_finite else None


def _agree(va: Any, vb: Any) -> bool:
    scale = max(abs(va), abs(vb))
    return bool(scale == 0 or abs(va - vb) <= 1e-8 * scale)


def point_value(e: Any, pt: dict[Any, float]) -> complex | None:
    """``e`` at ``pt`` as a complex: the float walk when it can vouch for it, else ``evalf``."""
    try:
        return fvalue(e, pt)
    except Unsure:
        v = _value_at(e, pt)
        return None if v is None else complex(v)


def _fast_verdict(a: Any, b: Any, pt: dict[Any, float]) -> tuple[complex, complex] | None:
    try:
        return fvalue(a, pt), fvalue(b, pt)
    except Unsure:
        return None


def _real_ish(z: complex) -> bool:
    return abs(z.imag) <= 1e-12 * abs(z)


def sample(a: Any, b: Any, syms: list[Any]) -> bool | None:
    """Numeric identity test of ``a`` and ``b``: True/False, or None when it cannot evaluate.

    Equal at 6 random positive points (the usual domain of answers: sqrt(1/n) = 1/sqrt(n)), and
    not different at negative points where both sides are real (|x| is not x). Values stay sympy
    numbers, so tiny magnitudes are compared, not flushed to zero. Each point is first tried with
    the float walk (``_floats``), which decides only with a wide margin (agreement within 1e-10
    or a difference above 1e-6, where the rule's bound is 1e-8); ``evalf`` decides the rest."""
    seen = 0
    for pt in points(syms, 6, 1234):
        fast = _fast_verdict(a, b, pt)
        if fast is not None:
            fa, fb = fast
            scale = max(abs(fa), abs(fb))
            if abs(fa - fb) <= 1e-10 * scale:
                seen += 1
                continue
            if abs(fa - fb) > 1e-6 * scale:
                return False
        va, vb = _value_at(a, pt), _value_at(b, pt)
        if va is None or vb is None:
            continue
        if not _agree(va, vb):
            return False
        seen += 1
    if seen < 3:
        return None
    for pt in points(syms, 3, 4321):
        neg = {s: -v for s, v in pt.items()}
        fast = _fast_verdict(a, b, neg)
        if fast is not None:
            fa, fb = fast
            if abs(fa.imag) > 1e-6 * abs(fa) or abs(fb.imag) > 1e-6 * abs(fb):
                continue  # a complex value: the rule compares only real ones
            if _real_ish(fa) and _real_ish(fb) and abs(fa - fb) <= 1e-10 * max(abs(fa), abs(fb)):
                continue  # equal here, whatever evalf says of realness
        va, vb = _value_at(a, neg), _value_at(b, neg)
        if va is not None and vb is not None and va.is_real and vb.is_real and not _agree(va, vb):
            return False
    return True


def _rename(g: Any, p: Any) -> Any:
    """Rename one free parameter of ``p`` to ``g``'s (``n\\pi`` vs ``k\\pi``, ``C`` vs ``c``)."""
    gs, ps = g.free_symbols - p.free_symbols, p.free_symbols - g.free_symbols
    if len(gs) == 1 and len(ps) == 1:
        (a,), (b,) = gs, ps
        if str(a).lower() in PARAMS and str(b).lower() in PARAMS:
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
        verdict = sample(g, p, syms)
        if verdict is not None:
            return verdict
    if g.free_symbols != p.free_symbols:
        return False
    try:
        return bool(sympy.simplify(g - p) == 0)
    except (TypeError, ValueError, NotImplementedError):
        return False


def _hundredth(s: Scalar) -> Scalar:
    """``41.4%`` read as ``0.414``: a decimal keeps its significant digits, two more places."""
    return Scalar(s.expr / 100, s.raw, None if s.places is None else s.places + 2, s.sig)


def scalar_eq(g: Scalar, p: Scalar) -> bool:
    greads, preads = [g], [p]
    if g.decor.percent and not p.decor.percent:
        greads.append(_hundredth(g))
    if p.decor.percent and not g.decor.percent:
        preads.append(_hundredth(p))
    gvals, pvals = [r.expr for r in greads], [r.expr for r in preads]
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
            gs = next((r for r in greads if r.expr is gv), Scalar(gv, g.raw))
            ps = next((r for r in preads if r.expr is pv), Scalar(pv, p.raw))
            if _const_eq(gs, ps, gv, pv):
                return True
    return False
