"""One expression in floats, for the float path (``_sampled``): the own reader's code evaluated
at the full check's sampling points with rigorous error bounds (``_bounded``), and compared by the
full check's rules (``_numeric.expr_eq`` / ``scalar_eq``) wherever the bounds vouch for the verdict;
``Unsure`` elsewhere. No sympy.
"""

from __future__ import annotations

import functools
import math
import random
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from verigym.graders.math._exact_path._exactnum import Defer, Num
from verigym.graders.math._exact_path._exactnum import scalar_eq as scalar_eq_exact
from verigym.graders.math._float_path._bounded import NAMES, Bounded, Unsure
from verigym.graders.math._float_path._exactval import differ_clearly, gaussian, real_exact
from verigym.graders.math._shared._reader import Reading

__all__ = ["PARAMS", "Expr", "clear_values", "compiled", "expr_eq", "points", "scalar_eq"]

PARAMS = {"k", "n", "m", "t", "j", "l", "c", "s", "p", "q", "r", "z"}  # renamable parameters
_VOUCH = 1e-12  # error bounds must stay below this fraction of the values compared
_IRRATIONAL = re.compile(r"\b(?:pi|E|sqrt|root|log|log10|exp|sin|cos|tan|cot|sec|csc|asin|acos|atan)\b|\*\*")
_SMALL_POW = re.compile(r"\*\*\(\(?_n\('\d{1,2}'\)\)?\)")  # one power below 100: no huge integers
_LITERAL = re.compile(r"_n\('[\d.]+'\)")
_EXACT_FUNCS = re.compile(r"\b(?:factorial|binomial|Abs|sqrt)\(")  # exact on rationals (``_exactval``)


_GLOBALS: dict[str, Any] = {"__builtins__": {}, **NAMES}  # the reader's names; letters are locals


def evaluate(code: Any, env: dict[str, Bounded]) -> Bounded:
    """The reader's compiled ``code`` at ``env`` (its letters and symbols bound); ``Unsure`` where floats
    cannot decide (a domain error, a pole, a value that is not a number)."""
    try:
        v = eval(code, _GLOBALS, env)
    except Unsure:
        raise
    except Exception:  # a domain error, a pole, anything floats cannot evaluate
        raise Unsure from None
    if not isinstance(v, Bounded):
        raise Unsure
    return v


@functools.lru_cache(maxsize=4096)
def compiled(code: str) -> Any:
    """The reader's code compiled once (``_2``, ``x^2`` recur across answers)."""
    return compile(code, "<latex>", "eval")


def points(syms: list[Any], n: int, seed: int) -> list[dict[Any, float]]:
    """The sampling points of the full check (``_numeric.sample``), for symbols in this order."""
    return [dict(zip(syms, row, strict=True)) for row in _draws(len(syms), n, seed)]


@functools.lru_cache(maxsize=256)
def _draws(k: int, n: int, seed: int) -> tuple[tuple[float, ...], ...]:
    """``n`` points of ``k`` coordinates, drawn in ``_numeric.sample``'s order (seeding a generator
    costs more than the rest of a small comparison)."""
    rng = random.Random(seed)
    return tuple(tuple(rng.uniform(0.3, 2.7) for _ in range(k)) for _ in range(n))


@dataclass(frozen=True)
class Expr:
    """One expression: the reader's code, compiled, and a renaming of its symbols."""

    reading: Reading
    code: Any
    ren: dict[str, str] = field(default_factory=dict)
    deg: bool = False  # written with a degree sign (``_values.Scalar.decor.degree``)
    dec: tuple[int, int] | None = None  # a decimal literal: (places, significant digits)
    cplx: bool = False  # a constant in ``i``, the imaginary unit (``_values.to_sympy``)
    pct: bool = False  # written with a percent sign (``_values.Scalar.decor.percent``)

    def exact(self) -> Fraction | None:
        """The exact value of a rational constant (``+ - * /``, small integer powers; factorials,
        binomials, absolute values and square roots that sympy evaluates to a rational), else None."""
        code = self.reading.code
        rest = _LITERAL.sub("", _SMALL_POW.sub("", code))
        if self.reading.names():
            return None
        if code.count("**") > 1 or "**" in rest or set(rest) - set("+-*/() "):
            if not (_EXACT_FUNCS.search(code) or "**" in code):
                return None
            try:
                return real_exact(self.code)
            except Unsure:
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
        if self.cplx:
            return set()  # its only letter is the imaginary unit
        return {self.ren.get(n, n) for n in self.reading.names()}

    def renamed(self, m: dict[str, str]) -> Expr:
        return Expr(
            self.reading,
            self.code,
            {n: m.get(self.ren.get(n, n), self.ren.get(n, n)) for n in self.reading.names()},
            self.deg,
            self.dec,
            self.cplx,
            self.pct,
        )

    def radians(self) -> Expr:
        """The degree sign's reading ``value * pi / 180`` (``_numeric.scalar_eq``)."""
        r = self.reading
        if self.cplx:
            raise Unsure
        code = f"(({r.code}) * pi / _n('180'))"
        return Expr(Reading(code, r.letters, r.symbols, r.functions), compiled(code), self.ren)

    def hundredth(self) -> Expr:
        """The percent sign's reading ``value / 100``, a decimal keeping its significant digits
        with two more places (``_numeric._hundredth``)."""
        r = self.reading
        code = f"(({r.code}) / _n('100'))"
        dec = None if self.dec is None else (self.dec[0] + 2, self.dec[1])
        return Expr(Reading(code, r.letters, r.symbols, r.functions), compiled(code), self.ren, dec=dec)

    def at(self, pt: dict[str, float]) -> Bounded:
        """The value at ``pt`` with its error bound; remembered per (code, names, point) until
        ``clear_values``: lists compare their items pairwise, at the same points."""
        r = self.reading
        key = (r.code, tuple(r.symbols.items()), tuple(self.ren.items()), tuple(pt.items()))
        v = _VALUES.get(key)
        if v is None:
            v = self._at(pt)
            if len(_VALUES) >= _VALUES_MAX:
                _VALUES.clear()
            _VALUES[key] = v
        return v

    def _at(self, pt: dict[str, float]) -> Bounded:
        env: dict[str, Bounded] = {}
        for c in self.reading.letters:
            env[c] = Bounded(pt[self.ren.get(c, c)], 0.0)
        for ident, name in self.reading.symbols.items():
            env[ident] = Bounded(pt[self.ren.get(name, name)], 0.0)
        return evaluate(self.code, env)


_VALUES: dict[tuple[Any, ...], Bounded] = {}  # Expr.at's values (Bounded is never mutated)
_VALUES_MAX = 65_536
_RELEVANT: dict[tuple[Any, ...], bool] = {}  # _relevant's outcome per expression


def clear_values() -> None:
    """Forget the remembered values (``clear_caches``: cold checks do all the work again)."""
    _VALUES.clear()
    _RELEVANT.clear()


def _rename(g: set[str], p: set[str]) -> dict[str, str]:
    """``_numeric._rename``: one free parameter of the answer renamed to the reference's."""
    gs, ps = g - p, p - g
    if len(gs) == 1 and len(ps) == 1:
        (a,), (b,) = gs, ps
        if a.lower() in PARAMS and b.lower() in PARAMS:
            return {b: a}
    return {}


def _pair(g: Expr, p: Expr, pt: dict[str, float]) -> tuple[complex, complex, bool, float]:
    fa, fb = g.at(pt), p.at(pt)
    if (fa.e + fb.e) > _VOUCH * max(abs(fa.z), abs(fb.z)):
        raise Unsure  # near zero, cancellation, a pole: the bound cannot vouch
    return fa.z, fb.z, fa.cx or fb.cx, fa.e + fb.e


def _relevant(e: Expr) -> None:
    """Every name of ``e`` changes its value, or ``Unsure``: sympy cancels ``n - n`` and ``n/n``
    as it builds the expression, so a name that changes nothing may be missing from its free
    symbols, and those decide the renamed parameter and the sampling points. Remembered."""
    r = e.reading
    key = (r.code, tuple(r.symbols.items()), tuple(e.ren.items()), e.cplx)
    ok = _RELEVANT.get(key)
    if ok is None:
        try:
            _check_relevant(e)
            ok = True
        except Unsure:
            ok = False
        if len(_RELEVANT) >= _VALUES_MAX:
            _RELEVANT.clear()
        _RELEVANT[key] = ok
    if not ok:
        raise Unsure


def _check_relevant(e: Expr) -> None:
    base = {n: 1.3 + 0.173 * k for k, n in enumerate(sorted(e.names))}  # generic, distinct
    v0 = e.at(base)
    for n in base:
        v1 = e.at({**base, n: base[n] + 0.61})
        if abs(v1.z - v0.z) <= 10 * (v0.e + v1.e) + 1e-9 * max(abs(v0.z), abs(v1.z)):
            raise Unsure


def expr_eq(g: Expr, p: Expr) -> bool:
    """``_numeric.scalar_eq`` without decorations: ``expr_eq``'s sampling, or, for two constants,
    ``_const_eq``'s comparison within 1e-9 (two rationals are compared exactly there: deferred)."""
    if not g.names and not p.names:
        gq, pq = g.exact(), p.exact()
        if gq is not None and pq is not None:
            return gq == pq  # two sympy Rationals: compared exactly
        if g.cplx or p.cplx:
            return _gaussian_eq(g, p)
        if not (_IRRATIONAL.search(g.reading.code) or _IRRATIONAL.search(p.reading.code)):
            raise Unsure  # factorials, |x|: sympy may hold two rationals
    _relevant(g)
    _relevant(p)
    p = p.renamed(_rename(g.names, p.names))
    syms = sorted(g.names | p.names)
    const = not syms
    for pt in points(syms, 6, 1234) if syms else [{}]:  # a constant: every point is the same
        a, b, _, err = _pair(g, p, pt)
        diff, scale = abs(a - b), max(abs(a), abs(b))
        if diff > 1e-6 * scale:
            return False
        if diff > 1e-10 * scale or (const and diff > err):
            raise Unsure  # constants: only equal within rounding (sympy may hold two rationals)
    for pt in points(syms, 3, 4321) if syms else []:  # a constant equal above is equal there
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


def _gaussian_eq(g: Expr, p: Expr) -> bool:
    """Two constants, one with ``i``: ``_numeric._const_eq`` without decimal literals (the caller
    sends those to ``_decimal_eq``), that is equal values, or within a relative 1e-9 at 40
    digits. Decided when the exact values are equal or far apart; ``Unsure`` in between."""
    a, b = gaussian(g.code), gaussian(p.code)
    if a == b:
        return True
    if differ_clearly(a, b):
        return False
    raise Unsure


def scalar_eq(g: Expr, p: Expr) -> bool:
    """``_numeric.scalar_eq``'s readings: a degree sign on one side only adds that side's value
    in radians, a percent sign its hundredth; equal when any pair is (``Unsure`` only when no pair is and some pair is unsure)."""
    gs = [g, g.radians()] if g.deg and not p.deg else [g]
    ps = [p, p.radians()] if p.deg and not g.deg else [p]
    if g.pct and not p.pct:
        gs.append(g.hundredth())
    if p.pct and not g.pct:
        ps.append(p.hundredth())
    unsure = False
    for a in gs:
        for b in ps:
            try:
                if _decimal_eq(a, b) if (a.dec or b.dec) and not (a.names or b.names) else expr_eq(a, b):
                    return True
            except Unsure:
                unsure = True
    if unsure:
        raise Unsure
    return False


def _decimal_eq(g: Expr, p: Expr) -> bool:
    """``_numeric._const_eq`` with a decimal literal on one side (``decimal_match``'s rules):
    decided where the float value is far from every bound of the rule, else ``Unsure``; two
    rationals go to the exact path's rules (``_exactnum``)."""
    if g.dec and p.dec:
        gq, pq = g.exact(), p.exact()
        if gq is not None and gq == pq:
            return True
        raise Unsure  # two decimals: the exact path's rounding rules
    d, c, ref = (g, p, True) if g.dec else (p, g, False)
    assert d.dec is not None
    places, sig = d.dec
    q, cq = d.exact(), c.exact()
    if q is None:
        raise Unsure
    if cq is not None:  # two sympy Rationals: the exact rules
        dn, cn = Num(q, places, sig), Num(cq)
        try:
            return scalar_eq_exact(dn, cn) if ref else scalar_eq_exact(cn, dn)
        except Defer:
            raise Unsure from None
    if not _IRRATIONAL.search(c.reading.code):
        raise Unsure  # factorials, |x|: sympy may hold a rational
    v = c.at({})
    if v.cx or v.z.imag != 0:
        raise Unsure
    w, qf = v.z.real, float(q)
    step = 10.0**-places
    err = v.e + 1e-12 * (abs(qf) + abs(w)) + 1e-6 * step
    diff = abs(qf - w)
    far = diff - err > 1e-6 * max(abs(qf), abs(w))  # not equal, not within 1e-9
    not_int = abs(w - round(w)) > err + 1e-6  # sympy cannot hold an Integer here
    rounds = diff + err < 0.5 * step * (1 - 1e-6)
    no_round = diff - err > 0.5 * step * (1 + 1e-6)
    if ref:  # the reference is the decimal: rounded (3 significant digits), or truncated
        t = (w - qf) * (1 if qf >= 0 else -1)
        cut = err < t < step * (1 - 1e-6) - err
        no_cut = t < -err - 1e-12 * max(1.0, abs(qf)) or t > step + err
        if sig >= 3 and not_int and (rounds or cut):
            return True
        if far and (sig < 3 or (no_round and no_cut)):
            return False
        raise Unsure
    if sig >= 4 and rounds and (places > 0 or not_int):
        return True
    if far and (no_round or sig < 2 or (sig < 4 and _irrational(c))):
        return False  # decimal_match: too few significant digits to be a rounding of it
    raise Unsure


_IRRATIONAL_CONST = re.compile(r"-?\s*(?:pi|E|sqrt\(\(?_n\('(\d+)'\)\)?\))")


def _irrational(e: Expr) -> bool:
    """``e`` is pi, e or the square root of a non-square integer: never a sympy Rational."""
    m = _IRRATIONAL_CONST.fullmatch(e.reading.code)
    if m is None:
        return False
    return m[1] is None or math.isqrt(int(m[1])) ** 2 != int(m[1])
