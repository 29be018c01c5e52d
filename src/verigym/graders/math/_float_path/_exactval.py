"""Exact values of constant expressions for the float path (``_sampledexpr``): the own reader's
code evaluated on Gaussian rationals (``a + b i`` with ``a``, ``b`` exact fractions), no sympy.

The full check reads ``i`` as sympy's imaginary unit (``_values.to_sympy``) and evaluates
``factorial``/``binomial`` of non-negative integers, ``Abs`` of a rational or a Gaussian rational
whose modulus is rational, ``sqrt`` of a perfect square and integer powers exactly. Those are
computed here exactly; anything else (``pi``, ``E``, functions, a square root that is not
rational, a huge result) raises ``Unsure`` and the caller defers. ``real_exact`` is the value of
an expression sympy holds as a ``Rational`` (no ``i`` anywhere: sympy compares those exactly);
``gaussian`` the value of one with ``i``, which the full check compares within a relative 1e-9
(``_numeric._const_close``), so only "equal" and "far apart" are decisions there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from verigym.graders.math._float_path._bounded import Unsure

__all__ = ["Gauss", "differ_clearly", "gaussian", "real_exact"]

_MAX_BITS = 1 << 16  # 2006! has ~19,000 bits; anything much larger is not worth exact work
_MAX_FACT = 5000
_MAX_POW = 64  # of a Gaussian rational (repeated products)
_MAX_REAL_POW = 1000  # of a rational (10^{-400})


@dataclass(frozen=True)
class Gauss:
    """``re + im * i`` with exact parts."""

    re: Fraction
    im: Fraction = Fraction(0)

    def _size(self) -> Gauss:
        for q in (self.re, self.im):
            if q.numerator.bit_length() > _MAX_BITS or q.denominator.bit_length() > _MAX_BITS:
                raise Unsure
        return self

    def __add__(self, o: Any) -> Gauss:
        o = _g(o)
        return Gauss(self.re + o.re, self.im + o.im)._size()

    __radd__ = __add__

    def __neg__(self) -> Gauss:
        return Gauss(-self.re, -self.im)

    def __pos__(self) -> Gauss:
        return self

    def __sub__(self, o: Any) -> Gauss:
        return self + -_g(o)

    def __rsub__(self, o: Any) -> Gauss:
        return _g(o) + -self

    def __mul__(self, o: Any) -> Gauss:
        o = _g(o)
        if self.im == 0 and o.im == 0:  # rationals: one product (huge factorials make each costly)
            return Gauss(self.re * o.re)._size()
        return Gauss(self.re * o.re - self.im * o.im, self.re * o.im + self.im * o.re)._size()

    __rmul__ = __mul__

    def _inverse(self) -> Gauss:
        if self.im == 0:
            if self.re == 0:
                raise Unsure  # sympy: zoo, and the full parser's other reading
            return Gauss(1 / self.re)
        n = self.re * self.re + self.im * self.im
        return Gauss(self.re / n, -self.im / n)._size()

    def __truediv__(self, o: Any) -> Gauss:
        return self * _g(o)._inverse()

    def __rtruediv__(self, o: Any) -> Gauss:
        return _g(o) * self._inverse()

    def __pow__(self, o: Any) -> Gauss:
        e = _g(o)
        if e.im != 0 or e.re.denominator != 1 or abs(e.re) > _MAX_REAL_POW:
            raise Unsure  # a root or a huge power: sympy keeps a Pow or a radical
        k = int(e.re)
        if self.re == 0 and self.im == 0 and k <= 0:
            raise Unsure  # 0^0, 1/0
        if self.im == 0:  # a rational to an integer power: sympy's Rational, exact
            if abs(k) * max(self.re.numerator.bit_length(), self.re.denominator.bit_length()) > _MAX_BITS:
                raise Unsure
            return Gauss(self.re**k)._size()
        if abs(k) > _MAX_POW:
            raise Unsure
        if k == 0:
            return Gauss(Fraction(1))
        base = self if k > 0 else self._inverse()
        out = Gauss(Fraction(1))
        for _ in range(abs(k)):
            out = out * base
        return out

    def __rpow__(self, o: Any) -> Gauss:
        return _g(o) ** self

    @property
    def real(self) -> bool:
        return self.im == 0


def _g(x: Any) -> Gauss:
    if isinstance(x, Gauss):
        return x
    if isinstance(x, Fraction):
        return Gauss(x)
    raise Unsure


def _int(x: Any, top: int) -> int:
    g = _g(x)
    if not g.real or g.re.denominator != 1 or not 0 <= g.re <= top:
        raise Unsure  # factorial(-1) is zoo, of 1/2 a gamma value: the full check's
    return int(g.re)


def _factorial(x: Any) -> Gauss:
    return Gauss(Fraction(math.factorial(_int(x, _MAX_FACT))))._size()


def _binomial(n: Any, k: Any) -> Gauss:
    return Gauss(Fraction(math.comb(_int(n, _MAX_FACT), _int(k, _MAX_FACT))))._size()


def _rational_sqrt(q: Fraction) -> Fraction:
    if q < 0:
        raise Unsure
    a, b = math.isqrt(q.numerator), math.isqrt(q.denominator)
    if a * a != q.numerator or b * b != q.denominator:
        raise Unsure  # an irrational: sympy keeps a radical
    return Fraction(a, b)


def _sqrt(x: Any) -> Gauss:
    g = _g(x)
    if not g.real:
        raise Unsure
    return Gauss(_rational_sqrt(g.re))


def _abs(x: Any) -> Gauss:
    g = _g(x)
    return Gauss(_rational_sqrt(g.re * g.re + g.im * g.im))  # |a + bi| = sqrt(a^2 + b^2): rational or Unsure


def _number(text: str) -> Gauss:
    return Gauss(Fraction(text))  # ``_fast``'s ``_n`` is sympy's Rational: exact, decimals too


_NAMES: dict[str, Any] = {
    "__builtins__": {},
    "_n": _number,
    "factorial": _factorial,
    "binomial": _binomial,
    "sqrt": _sqrt,
    "Abs": _abs,
}


def _eval(code: Any, i: bool) -> Gauss:
    names = dict(_NAMES)
    if i:
        names["i"] = Gauss(Fraction(0), Fraction(1))
    try:
        v = eval(code, names)
    except Unsure:
        raise
    except Exception:  # an unknown name (pi, E, a function), a syntax the walk does not cover
        raise Unsure from None
    if not isinstance(v, Gauss):
        raise Unsure
    return v


def real_exact(code: Any) -> Fraction:
    """The exact value of a constant with no ``i`` (sympy holds a ``Rational``), or ``Unsure``."""
    v = _eval(code, False)
    if not v.real:
        raise Unsure  # sqrt of a negative number: not read here
    return v.re


def gaussian(code: Any) -> Gauss:
    """The exact value of a constant in which ``i`` is the imaginary unit, or ``Unsure``."""
    return _eval(code, True)


def differ_clearly(a: Gauss, b: Gauss) -> bool:
    """``a != b`` by far more than the full check's relative 1e-9 (``_const_close``)."""
    d = a - b
    dist2 = d.re * d.re + d.im * d.im
    scale2 = max(a.re * a.re + a.im * a.im, b.re * b.re + b.im * b.im)
    return dist2 > Fraction(1, 10**12) * scale2  # |a - b| > 1e-6 * max(|a|, |b|)
