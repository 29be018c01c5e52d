"""Python floats with a bound on their rounding error, for deciding sampled comparisons without
sympy (``_sampled``).

Each value carries a rigorous bound on its absolute error (running error analysis: N. J. Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM 2002, sec. 3.3); ``NAMES`` maps the
names in the own reader's code (``_reader``: ``_n``, ``sqrt``, ``log``, ``sin``, ...) to their
bounded versions, with sympy's conventions (principal branches; ``x**0 = 1``; inverse sines past
+-1 on sympy's side of the cut; ``factorial``/``binomial`` of exact integers only). ``Unsure`` is
raised wherever the bound would be meaningless: values above 1e12 (sympy may hold ``zoo`` there,
as in ``tan(pi/2)``), poles, logarithms and roots near zero or near the cut after complex
arithmetic, large arguments of periodic functions, anything else a float cannot follow.
"""

from __future__ import annotations

import cmath
import math
from collections.abc import Callable
from typing import Any

__all__ = ["NAMES", "Bounded", "Unsure"]

_U = 2.0**-50  # a generous bound on one operation's relative rounding error (complex ops: a few ulps)
_HUGE = 1e12


class Unsure(Exception):
    """Floats cannot vouch for this value: the full check decides."""


class Bounded:
    """A complex float ``z`` with a bound ``e`` on its absolute error; ``cx``: complex arithmetic
    was seen (the exact value may then sit just off the real axis)."""

    __slots__ = ("cx", "e", "z")

    def __init__(self, z: complex, e: float, cx: bool = False) -> None:
        z = complex(z)
        a = abs(z)
        if not (math.isfinite(a) and math.isfinite(e)) or a > _HUGE:
            raise Unsure
        self.z, self.e, self.cx = z, e, cx or z.imag != 0

    def __add__(self, o: Bounded) -> Bounded:
        s = self.z + o.z
        return Bounded(s, self.e + o.e + _U * abs(s), self.cx or o.cx)

    def __sub__(self, o: Bounded) -> Bounded:
        return self + (-o)

    def __neg__(self) -> Bounded:
        return Bounded(-self.z, self.e, self.cx)

    def __pos__(self) -> Bounded:
        return self

    def __mul__(self, o: Bounded) -> Bounded:
        p = self.z * o.z
        e = abs(self.z) * o.e + abs(o.z) * self.e + self.e * o.e + _U * abs(p)
        return Bounded(p, e, self.cx or o.cx)

    def __truediv__(self, o: Bounded) -> Bounded:
        if o.e >= 1e-3 * abs(o.z):
            raise Unsure  # a zero or near-zero divisor: a pole
        q = self.z / o.z
        return Bounded(q, (self.e + abs(q) * o.e) / (abs(o.z) - o.e) + _U * abs(q), self.cx or o.cx)

    def __pow__(self, o: Bounded) -> Bounded:
        k = o.z.real
        if o.e == 0 and o.z.imag == 0 and k == int(k) and abs(k) <= 1000:
            return _int_pow(self, int(k))
        if self.z == 0 or self.e >= 1e-6 * abs(self.z) or o.e > 1e-6:
            raise Unsure
        if self.z.imag == 0 and self.z.real > 0 and o.z.imag == 0:
            r = complex(self.z.real**o.z.real)
            log_b = complex(math.log(self.z.real))
        else:
            log_b = cmath.log(_cut(self))
            r = cmath.exp(o.z * log_b)
        a = abs(r)
        e = a * 1.01 * (abs(o.z) * self.e / abs(self.z) + abs(log_b) * o.e)
        return Bounded(r, e + 4 * _U * a * (1 + abs(o.z * log_b)), self.cx or o.cx)


def _int_pow(b: Bounded, k: int) -> Bounded:
    """``b ** k`` by repeated squaring, so the error bound follows each product."""
    if k == 0:
        return Bounded(1, 0)  # sympy: x**0 = 1, 0**0 = 1
    if k < 0:
        return Bounded(1, 0) / _int_pow(b, -k)
    out: Bounded | None = None
    sq = b
    while k:
        if k & 1:
            out = sq if out is None else out * sq
        k >>= 1
        if k:
            sq = sq * sq
    assert out is not None
    return out


def _cut(x: Bounded) -> complex:
    """A logarithm's or root's argument: on the negative real axis after real arithmetic only
    (sympy's principal branch); near the cut otherwise, or near zero, unsure."""
    z = x.z
    if abs(z) <= 2 * x.e:
        raise Unsure
    if z.real < 0 and abs(z.imag) <= max(1e-9 * abs(z), 2 * x.e):
        if z.imag == 0 and not x.cx:
            return complex(z.real, 0.0)
        raise Unsure
    return z


def _smooth(
    fn: Callable[[complex], complex], deriv: Callable[[complex], complex], periodic: bool = False
) -> Callable[[Bounded], Bounded]:
    def f(x: Bounded) -> Bounded:
        if periodic and abs(x.z) > 1e4:
            raise Unsure  # a large argument's float error is a large phase error
        w, d = fn(x.z), deriv(x.z)
        return Bounded(w, 2 * abs(d) * x.e + 4 * _U * abs(w), x.cx)

    return f


def _real_arg(
    fn: Callable[[complex], complex], deriv: Callable[[complex], complex]
) -> Callable[[Bounded], Bounded]:
    """asin, acos, atan: real arguments only; past +-1, the side of the cut sympy takes."""

    def f(x: Bounded) -> Bounded:
        if x.cx or abs(abs(x.z.real) - 1) <= 2 * x.e + 1e-12:
            raise Unsure
        r = x.z.real
        z = complex(r, -0.0 if r > 0 else 0.0) if abs(r) > 1 else complex(r, 0.0)
        w = fn(z)
        return Bounded(w, 2 * abs(deriv(z)) * x.e + 4 * _U * abs(w), w.imag != 0)

    return f


def _log(x: Bounded, base: Bounded | None = None) -> Bounded:
    z = _cut(x)
    w = cmath.log(z)
    out = Bounded(w, 2 * x.e / abs(z) + 4 * _U * (abs(w) + 1), x.cx or w.imag != 0)
    return out if base is None else out / _log(base)


def _exact_int(x: Bounded) -> int:
    if x.e != 0 or x.cx or x.z.real != int(x.z.real) or not 0 <= x.z.real <= 170:
        raise Unsure
    return int(x.z.real)


def _factorial(x: Bounded) -> Bounded:
    v = math.factorial(_exact_int(x))
    return Bounded(float(v), _U * v)


def _binomial(n: Bounded, k: Bounded) -> Bounded:
    v = math.comb(_exact_int(n), _exact_int(k))
    return Bounded(float(v), _U * v)


def _number(t: str) -> Bounded:
    if t.isdigit() and len(t) <= 15:
        return Bounded(float(t), 0.0)  # an integer below 2**53: exact
    v = float(t)  # correctly rounded: within half an ulp
    return Bounded(v, _U * abs(v))


def _abs(x: Bounded) -> Bounded:
    a = abs(x.z)
    return Bounded(a, x.e + _U * a)


def _atan(x: Bounded) -> Bounded:
    if x.cx:
        raise Unsure  # complex arguments: branch conventions
    w = cmath.atan(complex(x.z.real))
    return Bounded(w, 2 * x.e / (1 + x.z.real**2) + 4 * _U * abs(w))


def _half() -> Bounded:
    return Bounded(0.5, 0.0)


NAMES: dict[str, Any] = {
    "_n": _number,
    "pi": Bounded(math.pi, _U * math.pi),
    "E": Bounded(math.e, _U * math.e),
    "sqrt": lambda x: x ** _half(),
    "root": lambda x, n: x ** (Bounded(1, 0) / n),
    "log": _log,
    "log10": lambda x: _log(x) / _log(Bounded(10, 0)),
    "exp": _smooth(cmath.exp, cmath.exp),
    "Abs": _abs,
    "factorial": _factorial,
    "binomial": _binomial,
    "sin": _smooth(cmath.sin, cmath.cos, True),
    "cos": _smooth(cmath.cos, lambda z: -cmath.sin(z), True),
    "tan": _smooth(cmath.tan, lambda z: 1 / cmath.cos(z) ** 2, True),
    "cot": _smooth(lambda z: 1 / cmath.tan(z), lambda z: 1 / cmath.sin(z) ** 2, True),
    "sec": _smooth(lambda z: 1 / cmath.cos(z), lambda z: cmath.tan(z) / cmath.cos(z), True),
    "csc": _smooth(lambda z: 1 / cmath.sin(z), lambda z: 1 / (cmath.sin(z) * cmath.tan(z)), True),
    "asin": _real_arg(cmath.asin, lambda z: 1 / cmath.sqrt(1 - z * z)),
    "acos": _real_arg(cmath.acos, lambda z: 1 / cmath.sqrt(1 - z * z)),
    "atan": _atan,
}
