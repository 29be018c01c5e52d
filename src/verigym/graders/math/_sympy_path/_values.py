"""Value types of the math grader's parsed answers, and the expression converter.

``Scalar`` (a sympy expression plus how it was written: decimal places, percent, degree, unit),
``Eqn`` (``lhs = rhs``; ``name`` when the left side is a label such as ``x``, ``f(x)``,
``Maximum``), ``Rel`` (an inequality chain), ``SetV`` (sympy intervals and unions), ``Seq``
(bracketed items: a tuple, or an interval when compared with one), ``Group`` (an unordered
collection), ``Mat`` and ``Text``. ``to_sympy`` converts one expression: a fast path for simple
LaTeX, else ``latex2sympy2_extended``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeAlias

import sympy
from latex2sympy2_extended import latex2sympy
from latex2sympy2_extended.math_normalization import NormalizationConfig

from verigym.graders.math._shared._matching import Seq, digits
from verigym.graders.math._shared._norm import Decor
from verigym.graders.math._sympy_path._fast import fast_sympy

__all__ = [
    "Eqn", "Group", "Mat", "ParseError", "Rel", "Scalar", "Seq", "SetV", "Text", "Value",
    "clear_value_caches", "decimal_scalar", "rel_to_set", "to_sympy",
]  # fmt: skip

_NC = NormalizationConfig(
    basic_latex=True, units=False, malformed_operators=False, nits=False, boxed="none", equations=False
)


@dataclass(frozen=True)
class Scalar:
    expr: Any
    raw: str
    places: int | None = None  # written as a decimal literal with this many places
    sig: int = 0  # significant digits of that literal
    decor: Decor = field(default_factory=Decor)


@dataclass(frozen=True)
class Eqn:
    lhs: Any
    rhs: Any
    name: str | None
    value: Value | None


@dataclass(frozen=True)
class Rel:
    exprs: tuple[Any, ...]
    ops: tuple[str, ...]


@dataclass(frozen=True)
class SetV:
    s: Any  # a sympy Set


@dataclass(frozen=True)
class Group:
    items: tuple[Value, ...]
    pm: bool = False  # the expansion of one "a \\pm b": its items belong to the enclosing list


def splice_pm(items: list[Value]) -> tuple[Value, ...]:
    out: list[Value] = []
    for it in items:
        out.extend(it.items if isinstance(it, Group) and it.pm else (it,))
    return tuple(out)


@dataclass(frozen=True)
class Mat:
    rows: tuple[tuple[Value, ...], ...]


@dataclass(frozen=True)
class Text:
    t: str


Value: TypeAlias = Scalar | Eqn | Rel | SetV | Seq["Value"] | Group | Mat | Text

_FRAC = re.compile(r"^([+-]?)(?:\\frac\{(\d+)\}\{(\d+)\}|(\d+)/(\d+))$")
_I = sympy.Symbol("i")
_WORDY = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{4,}")  # a word of 4+ letters outside a command


class ParseError(ValueError):
    """The answer could not be read as mathematics."""


def decimal_scalar(raw: str) -> Scalar:
    body = raw.lstrip("+-")
    frac = Fraction(body) if body not in (".", "") else Fraction(0)
    value = sympy.Rational(frac.numerator, frac.denominator) * (-1 if raw.startswith("-") else 1)
    places, sig = digits(raw)
    return Scalar(value, raw, places, sig)


@functools.lru_cache(maxsize=4096)
def to_sympy(s: str) -> Any:
    """Convert one expression (LaTeX or plain) to sympy; raises ``ParseError``."""
    s = s.strip()
    if not s:
        raise ParseError("empty expression")
    m = _FRAC.match(s)
    if m:
        num, den = (m[2], m[3]) if m[2] else (m[4], m[5])
        return sympy.Rational(int(num), int(den)) * (-1 if m[1] == "-" else 1)
    try:
        expr = fast_sympy(s)
        if expr is None:
            if _WORDY.search(re.sub(r"\\(?:text|mathrm|begin|end)\{[^{}]*\}", " ", s)):
                raise ParseError(f"{s[:60]!r} is prose, not an expression")  # the full parser would
                # read each word as a product of letters
            expr = latex2sympy(s, normalization_config=_NC)
        if isinstance(expr, sympy.MatrixExpr) and not isinstance(expr, sympy.MatrixBase):
            expr = expr.doit()
    except ParseError:
        raise
    except Exception as exc:  # the ANTLR parser raises bare Exception on syntax errors
        raise ParseError(f"cannot parse {s!r}: {(str(exc).splitlines() or [''])[0][:80]}") from exc
    if isinstance(expr, sympy.Basic) and not isinstance(expr, sympy.MatrixBase):
        if expr.has(sympy.Float):
            expr = expr.xreplace({f: sympy.Rational(str(f)) for f in expr.atoms(sympy.Float)})
        if _I in expr.free_symbols:
            expr = expr.xreplace({_I: sympy.I})
    return expr


_OPS = {
    "<": sympy.StrictLessThan,
    ">": sympy.StrictGreaterThan,
    "\\le": sympy.LessThan,
    "\\ge": sympy.GreaterThan,
}


def rel_to_set(r: Rel) -> Any:
    """An inequality chain in one variable as a sympy set; ``ParseError`` if it is not one.

    Kept per chain over a run (``solveset`` can take 0.1 s on one, and a reference is compared
    with many answers), except a chain in a function's value (``0 < f(x) < 1``): each of those
    gets its own unknown, as before."""
    exprs = list(r.exprs)
    calls = [e for e in exprs if isinstance(e, sympy.core.function.AppliedUndef)]
    if len(calls) == 1:  # "0 < f(x) < 1": the unknown is f(x)
        x = sympy.Dummy("u")
        exprs = [x if e == calls[0] else e for e in exprs]
        return _chain_set(Rel(tuple(exprs), r.ops))
    return _kept_chain_set(r)


def _chain_set(r: Rel) -> Any:
    syms = set().union(*(e.free_symbols for e in r.exprs))
    if len(syms) != 1:
        raise ParseError("inequality is not in one variable")
    (x,) = syms
    out: Any = sympy.S.Reals
    for a, op, b in zip(r.exprs, r.ops, r.exprs[1:], strict=False):
        if op == "\\ne":
            piece = sympy.Complement(sympy.S.Reals, sympy.FiniteSet(b if a == x else a))
        elif a == x and not b.free_symbols:  # x < b: built directly, solveset is slow
            piece = (
                sympy.Interval(-sympy.oo, b, right_open=op in ("<",))
                if op in ("<", "\\le")
                else (sympy.Interval(b, sympy.oo, left_open=op == ">"))
            )
        elif b == x and not a.free_symbols:
            piece = (
                sympy.Interval(a, sympy.oo, left_open=op == "<")
                if op in ("<", "\\le")
                else (sympy.Interval(-sympy.oo, a, right_open=op == ">"))
            )
        else:
            piece = _linear_piece(a - b, op, x)
            if piece is None:
                piece = _abs_piece(a, b, op, x)
            if piece is None:
                piece = sympy.solveset(_OPS[op](a, b), x, sympy.S.Reals)
        out = sympy.Intersection(out, piece)
    return out


_kept_chain_set = functools.lru_cache(maxsize=1024)(_chain_set)


def clear_value_caches() -> None:
    """Forget the converted expressions and the chains' sets."""
    to_sympy.cache_clear()
    _kept_chain_set.cache_clear()


_FLIP = {"<": ">", ">": "<", "\\le": "\\ge", "\\ge": "\\le"}


def _abs_piece(a: Any, b: Any, op: str, x: Any) -> Any:
    """``|c1 x + c0| op c`` (or ``c op |...|``) with rationals ``c1 != 0``, ``c0`` and ``c > 0``: the
    interval, or the two rays, that ``solveset`` returns, without it (its inequality solver takes
    30-100 ms on ``Abs``: periodicity, simplify); None for anything else."""
    if op not in _FLIP:
        return None
    if isinstance(b, sympy.Abs) and not a.free_symbols:
        a, b, op = b, a, _FLIP[op]
    if not isinstance(a, sympy.Abs) or b.free_symbols or not (b.is_Rational and b.is_positive):
        return None
    u = sympy.expand(a.args[0])
    if not u.is_polynomial(x):
        return None
    c1, c0 = u.coeff(x, 1), u.coeff(x, 0)
    if u != c1 * x + c0 or not (c1.is_Rational and c0.is_Rational) or c1 == 0:
        return None
    lo, hi = sorted(((-b - c0) / c1, (b - c0) / c1))
    if op in ("<", "\\le"):
        return sympy.Interval(lo, hi, op == "<", op == "<")
    strict = op == ">"
    return sympy.Union(
        sympy.Interval(-sympy.oo, lo, True, strict), sympy.Interval(hi, sympy.oo, strict, True)
    )


def _linear_piece(d: Any, op: str, x: Any) -> Any:
    """``d op 0`` for ``d = c1 x + c0`` with real constants: an interval without ``solveset``
    (``-x > -1`` is ``x < 1``); None for anything else."""
    if op not in _FLIP or not d.is_polynomial(x):
        return None
    d = sympy.expand(d)
    c1, c0 = d.coeff(x, 1), d.coeff(x, 0)
    if d != c1 * x + c0 or not (c1.is_number and c0.is_number and c1.is_real and c0.is_real) or c1 == 0:
        return None
    root, positive = -c0 / c1, c1.is_positive
    if positive is None:
        return None
    op = op if positive else _FLIP[op]
    if op in ("<", "\\le"):
        return sympy.Interval(-sympy.oo, root, right_open=op == "<")
    return sympy.Interval(root, sympy.oo, left_open=op == ">")
