"""Fast float evaluation of sympy expressions, for the grader's numeric sampling.

``sympy``'s ``evalf(subs=...)`` costs about a millisecond per call; walking the tree with Python
floats and complex numbers costs microseconds. The walk refuses (``Unsure``) whenever its answer
could differ from ``evalf``'s at 20 digits by more than the sampler's tolerance can absorb: a sum
that cancels (result below 1e-6 of its largest term), magnitudes near the float range, branch
cuts (a logarithm or root of a number near the negative real axis after complex arithmetic;
on the axis after real arithmetic it takes sympy's principal branch),
integers too large for a float, and any function it does not know (``floor`` too: ``evalf``
cannot evaluate it at a float point, and the rule skips such points). The caller then asks ``evalf`` for that point, so verdicts never depend on float error.
"""

from __future__ import annotations

import cmath
import math
from collections.abc import Callable
from typing import Any

import sympy

__all__ = ["Unsure", "fvalue"]

_TINY, _HUGE = 1e-150, 1e150


class Unsure(Exception):
    """The float walk cannot vouch for this value; use ``evalf``."""


class _State:
    complex_seen = False


_STATE = _State()


def _cut(z: complex) -> complex:
    """An argument for log or a root: on the negative real axis it takes the principal branch
    (sympy's) when every value so far was real; near the cut after complex arithmetic, refuse."""
    if z.real < 0 and abs(z.imag) <= 1e-9 * abs(z):
        if z.imag == 0 and not _STATE.complex_seen:
            return complex(z.real, 0.0)
        raise Unsure
    return z


def _real(z: complex) -> float:
    if z.imag != 0:
        raise Unsure
    return z.real


def _inverse_trig(fn: Callable[[complex], complex]) -> Callable[[complex], complex]:
    def f(z: complex) -> complex:
        if z.imag != 0:
            raise Unsure  # complex arguments: branch conventions
        if abs(z.real) > 1:  # sympy's side of the cut: below it for x > 1, above it for x < -1
            return fn(complex(z.real, -0.0 if z.real > 0 else 0.0))
        return fn(complex(z.real, 0.0))

    return f


def _factorial(z: complex) -> complex:
    x = _real(z)
    if x <= -1 and x == round(x):
        raise Unsure
    return complex(math.gamma(x + 1))


def _periodic(fn: Callable[[complex], complex]) -> Callable[[complex], complex]:
    def f(z: complex) -> complex:
        if abs(z) > 1e4:
            raise Unsure  # a large argument's float error is a large phase error
        return fn(z)

    return f


def _check(z: complex) -> complex:
    if z.imag != 0:
        _STATE.complex_seen = True
    a = abs(z)
    if not math.isfinite(a) or (a != 0 and not _TINY < a < _HUGE):
        raise Unsure
    return z


def _binomial(n: float, k: float) -> complex:
    args = (n + 1, k + 1, n - k + 1)
    if any(a <= 0 and a == round(a) for a in args):
        raise Unsure  # a pole of the gamma function
    return complex(math.gamma(args[0]) / (math.gamma(args[1]) * math.gamma(args[2])))


_FUNCS: dict[Any, Callable[[complex], complex]] = {
    sympy.sin: _periodic(cmath.sin),
    sympy.cos: _periodic(cmath.cos),
    sympy.tan: _periodic(cmath.tan),
    sympy.cot: _periodic(lambda z: 1 / cmath.tan(z)),
    sympy.sec: _periodic(lambda z: 1 / cmath.cos(z)),
    sympy.csc: _periodic(lambda z: 1 / cmath.sin(z)),
    sympy.asin: _inverse_trig(cmath.asin),
    sympy.acos: _inverse_trig(cmath.acos),
    sympy.atan: lambda z: cmath.atan(complex(_real(z))),
    sympy.exp: cmath.exp,
    sympy.log: lambda z: cmath.log(_cut(z)),
    sympy.Abs: lambda z: complex(abs(z)),
    sympy.factorial: _factorial,
    sympy.sinh: cmath.sinh,
    sympy.cosh: cmath.cosh,
    sympy.tanh: cmath.tanh,
}


def _walk(e: Any, env: dict[Any, complex]) -> complex:
    if e.is_Symbol:
        try:
            return env[e]
        except KeyError:
            raise Unsure from None
    if e.is_Rational:
        try:
            return _check(complex(e.p / e.q))
        except OverflowError:
            raise Unsure from None
    if e.is_Number or e.is_NumberSymbol:
        return _check(complex(float(e)))
    if e is sympy.I:
        _STATE.complex_seen = True
        return 1j
    if e.is_Add:
        terms = [_walk(a, env) for a in e.args]
        total = sum(terms)
        if abs(total) < 1e-6 * max(abs(t) for t in terms):
            raise Unsure  # cancellation: the float sum has lost too many digits
        return _check(total)
    if e.is_Mul:
        out = complex(1)
        for a in e.args:
            out = _check(out * _walk(a, env))
        return out
    if e.is_Pow:
        base, exp = e.args
        b = _walk(base, env)
        if exp.is_Integer:
            if (b == 0 and exp < 0) or abs(int(exp)) > 1000:
                raise Unsure
            return _check(b ** int(exp))
        x = _walk(exp, env)
        if b == 0:
            raise Unsure
        if b.imag == 0 and b.real > 0 and x.imag == 0:
            return _check(complex(b.real**x.real))
        return _check(cmath.exp(x * cmath.log(_cut(b))))
    if e.func is sympy.binomial:
        return _check(_binomial(_real(_walk(e.args[0], env)), _real(_walk(e.args[1], env))))
    fn = _FUNCS.get(e.func)
    if fn is None or len(e.args) != 1:
        raise Unsure
    try:
        return _check(fn(_walk(e.args[0], env)))
    except (ValueError, ZeroDivisionError, OverflowError):
        raise Unsure from None


def fvalue(e: Any, pt: dict[Any, float]) -> complex:
    """``e`` at the point ``pt`` (symbol -> value) as a Python complex, or ``Unsure``."""
    _STATE.complex_seen = any(complex(v).imag for v in pt.values())
    try:
        return _walk(e, {s: complex(v) for s, v in pt.items()})
    except (ZeroDivisionError, OverflowError, ValueError, TypeError, RecursionError):
        raise Unsure from None
