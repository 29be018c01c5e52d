"""The float path's values and their comparison (``_sampled`` reads answers into them): the full
check's ``_compare.equal`` on the subset of ``_values`` that floats can decide, ``Unsure`` where it
would need more (a solved variable accepted on sympy's exact zero, a renamed parameter across a
tuple, sets sympy would simplify). Expressions compare in ``_sampledexpr``, equations' other
readings in ``_equations``, sets with constant ends in ``_intervals``. No sympy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from verigym.graders.math._float_path._bounded import Unsure
from verigym.graders.math._float_path._equations import (
    Ineq,
    changes,
    ineq_eq,
    linear_in,
    nonzero,
    ratio_const,
    relevant,
    sample,
    side,
    sides_fn,
    substituted,
)
from verigym.graders.math._float_path._intervals import End, Piece, interval, pieces_eq, point, union
from verigym.graders.math._float_path._sampledexpr import Expr, expr_eq, points, scalar_eq
from verigym.graders.math._shared._matching import Seq, flat, matrix_eq, multiset_eq, seq_eq
from verigym.graders.math._shared._reader import read

__all__ = ["Eqn", "Group", "Inf", "Mat", "Seq", "SetOf", "Val", "equal", "to_set"]


@dataclass(frozen=True)
class Group:  # _values.Group: an unordered list or set literal
    items: tuple[Val, ...]
    pm: bool = False  # the variants of one "a \\pm b": spliced into the enclosing list


@dataclass(frozen=True)
class Eqn:  # _values.Eqn: a name, a value (when named or constant) and the two sides
    name: str | None
    value: Val | None
    lhs: str = ""  # "y": a plain symbol; "f": a function application "f(x)"; "tuple": "(x, y) = ..."
    sides: tuple[Expr, Expr] | None = None  # None: sides the own reader does not cover (or a tuple)


@dataclass(frozen=True)
class Inf:  # a signed infinity, as an interval's end
    sign: int


@dataclass(frozen=True)
class SetOf:  # _values.SetV, or a one-variable inequality chain (its rel_to_set)
    pieces: tuple[Piece, ...]


@dataclass(frozen=True)
class Mat:  # _values.Mat: a matrix literal, entry by entry
    rows: tuple[tuple[Val, ...], ...]


Val: TypeAlias = Expr | Group | Seq["Val"] | Eqn | Inf | SetOf | Mat | Ineq


def _end(v: Val, lo: bool) -> End | None:
    if isinstance(v, Inf) and v.sign == (-1 if lo else 1):
        return None
    if isinstance(v, Expr) and not v.names and not v.cplx:
        return v
    raise Unsure  # a symbolic or complex end, an infinity at the wrong end (sympy: empty)


def to_set(v: Val) -> tuple[Piece | None, ...]:
    """``_parse.to_set``: the pieces of a union's part (``Unsure`` where that raises)."""
    if isinstance(v, SetOf):
        return v.pieces
    if isinstance(v, Seq) and len(v.items) == 2 and v.open in "([" and v.close in ")]":
        a, b = v.items
        return (interval(_end(a, True), _end(b, False), v.open == "(", v.close == ")"),)
    if isinstance(v, Group):
        return tuple(point(_end_point(i)) for i in v.items)
    raise Unsure


def _end_point(v: Val) -> End:
    if isinstance(v, Expr) and not v.names and not v.cplx:
        return v
    raise Unsure


def _as_set(v: Val) -> tuple[Piece, ...] | None:
    """``_compare._as_set``: a set, an interval-shaped tuple, a list holding sets; else None."""
    if isinstance(v, SetOf):
        return v.pieces
    if isinstance(v, Seq):
        return union(to_set(v)) if len(v.items) == 2 and v.open in "([" and v.close in ")]" else None
    if isinstance(v, Group) and any(isinstance(i, SetOf) for i in v.items):
        pieces: list[Piece | None] = []
        for i in v.items:
            if isinstance(i, Eqn) and isinstance(i.value, Expr):
                pieces.append(point(_end_point(i.value)))
            elif isinstance(i, Expr):
                pieces.append(point(_end_point(i)))
            else:
                sub = _as_set(i)
                if sub is None:
                    return None
                pieces += sub
        return union(pieces)
    return None


def _end_eq(a: End, b: End) -> bool:
    """``_compare._endpoint_eq`` of two finite constant ends."""
    assert isinstance(a, Expr) and isinstance(b, Expr)
    return expr_eq(a, b)


def _bound_rename(gname: str, pname: str, pval: Val) -> Val:
    """``_compare._bound_rename``: ``f(z) = z`` and ``f(x) = x`` define the same function."""
    ga, pa = gname.partition("(")[2].rstrip(")"), pname.partition("(")[2].rstrip(")")
    if not (ga.isalpha() and pa.isalpha() and len(ga) == len(pa) == 1 and ga != pa):
        return pval
    return pval.renamed({pa.lower(): ga.lower()}) if isinstance(pval, Expr) else pval


def _name_key(name: str) -> tuple[str, int]:
    return name.split("(")[0].lower(), name.count(",") + ("(" in name)


def _no_substitution(g: Eqn, p: Val) -> bool:
    """``y = rhs`` against ``p`` (values not equal): ``_compare._eqn_eq`` then puts ``p`` in for
    each variable of ``y - rhs`` that ``p`` lacks (``y`` not in ``rhs``). For ``y`` itself that is
    the sampling already done; for a variable of ``rhs`` it compares ``y`` with an expression
    without ``y`` when ``p`` lacks ``y`` too (never equal at random points); with ``rhs``'s
    variables all in ``p`` there is nothing else to put in."""
    if not (isinstance(g.value, Expr) and isinstance(p, Expr)) or g.name is None:
        return False
    y = read(g.name)
    if y is None or y.names() & g.value.names:
        return False
    return not (y.names() & p.names) or g.value.names <= p.names


def equal(g: Val, p: Val) -> bool:
    """``_compare.equal`` on the subset; ``Unsure`` where it would need more than floats."""
    g, p = flat(g, Group), flat(p, Group)
    if isinstance(g, Ineq) or isinstance(p, Ineq):
        if isinstance(g, Ineq) and isinstance(p, Ineq):
            return ineq_eq(g, p)
        raise Unsure
    if isinstance(g, Eqn):
        if g.value is None or (isinstance(p, Eqn) and p.value is None):
            return eqn_eq(g, p)
        if isinstance(p, Eqn):
            assert p.value is not None
            named = g.name and p.name and _name_key(g.name) == _name_key(p.name)
            if named and equal(g.value, _bound_rename(g.name or "", p.name or "", p.value)):
                return True
            if named and g.lhs == p.lhs == "f":
                return False  # proportional sides and substitution need values of f: none
            if "tuple" in (g.lhs, p.lhs):  # no sides to compare or solve: the values, if one is unnamed
                return (g.name is None or p.name is None) and equal(g.value, p.value)
        elif equal(g.value, p):
            return True
        elif g.lhs == "y" and _no_substitution(g, p):
            return False
        elif g.lhs == "f" and isinstance(p, Expr):
            return False  # f(x) = rhs: no variable to solve for, and f has no values to sample
        elif g.lhs == "tuple":
            return False
        return _eqn_tail(g, p)  # proportional sides, substitution: the full check's other readings
    if isinstance(p, Eqn):
        if p.value is None:
            ident = _identity(p)
            return ident is not None and equal(g, ident)
        return equal(g, p.value)
    if isinstance(g, Expr) and isinstance(p, Expr):
        return scalar_eq(g, p)
    if isinstance(g, Group) and isinstance(p, Group):
        return multiset_eq(g.items, p.items, equal)
    if isinstance(g, Seq) and isinstance(p, Seq):
        same = seq_eq(g, p, equal)
        if same is None and any(isinstance(i, Expr) and i.names for i in g.items + p.items):
            raise Unsure  # a renamed parameter across the tuple (_compare._rename_parameter)
        return bool(same)
    if isinstance(g, Seq | Group) and isinstance(p, Seq | Group):
        return len(g.items) == len(p.items) and all(
            equal(a, b) for a, b in zip(g.items, p.items, strict=True)
        )
    if isinstance(g, Mat) or isinstance(p, Mat):
        return matrix_eq(g, p, equal, Mat, Seq)
    if (isinstance(g, Seq | Group) and isinstance(p, Expr | Inf)) or (
        isinstance(p, Seq | Group) and isinstance(g, Expr | Inf)
    ):
        return False  # a list or tuple against a number (``_compare._as_set`` of a number: None)
    if isinstance(g, SetOf) or isinstance(p, SetOf):
        gs, ps = _as_set(g), _as_set(p)
        return gs is not None and ps is not None and pieces_eq(gs, ps, _end_eq)
    if isinstance(g, Inf) and isinstance(p, Inf):
        return g.sign == p.sign
    other = p if isinstance(g, Inf) else g if isinstance(p, Inf) else None
    if isinstance(other, Expr) and not other.names:
        return False  # infinity and a number (``_const_eq``: oo is not finite)
    raise Unsure  # a number against a set, an interval read as a set: sympy's sets


def eqn_eq(g: Eqn, p: Val) -> bool:
    """``_compare._eqn_eq`` in full (an equation without a value, or against one)."""
    if not isinstance(p, Eqn) and g.value is None:
        ident = _identity(g)
        if ident is not None and equal(ident, p):
            return True
    named = isinstance(p, Eqn) and g.name and p.name and g.value is not None and p.value is not None
    if named and isinstance(p, Eqn) and _name_key(g.name or "") == _name_key(p.name or ""):
        assert g.value is not None and p.value is not None
        if equal(g.value, _bound_rename(g.name or "", p.name or "", p.value)):
            return True
    return _eqn_tail(g, p)


def _identity(e: Eqn) -> Val | None:
    """``_compare._identity_value``: ``expr = simplified`` (both sides the same function) states
    the value ``simplified``."""
    if e.value is not None or e.lhs == "tuple":
        return e.value
    if e.sides is None:
        raise Unsure
    lhs, rhs = e.sides
    if not lhs.names:
        return None  # no free symbols on the left
    return rhs if expr_eq(lhs, rhs) else None


def _eqn_tail(g: Eqn, p: Val) -> bool:
    """``_compare._eqn_eq`` past the named value: proportional sides, the values of an unnamed
    side, the solved variable; for a plain answer, the value, then substitution."""
    if isinstance(p, Eqn):
        if "tuple" not in (g.lhs, p.lhs):  # a tuple side has no sympy sides: no ratio
            if g.sides is None or p.sides is None:
                raise Unsure
            d1, d2 = sides_fn(*g.sides), sides_fn(*p.sides)
            if ratio_const(d1, _names(g.sides), d2, _names(p.sides)):
                return True
        if g.value is not None and p.value is not None and (g.name is None or p.name is None):
            return equal(g.value, p.value)
        return not (_not_solved(g, p) and _not_solved(p, g)) and _unsure()
    if g.value is not None and equal(g.value, p):
        return True
    if isinstance(p, Inf):
        raise Unsure  # sympy's oo is a Scalar: substitution would try it
    if not isinstance(p, Expr) or g.lhs == "tuple":
        return False
    if g.sides is None:
        raise Unsure
    return _substitution(g, p)


def _unsure() -> bool:
    raise Unsure


def _names(sides: tuple[Expr, Expr]) -> set[str]:
    return sides[0].names | sides[1].names


def _not_solved(eq: Eqn, named: Eqn) -> bool:
    """``_compare._solves(eq, named)`` is False for sure (True only when sympy's substituted tree
    is exactly 0, which floats cannot see: ``Unsure`` then)."""
    if not named.name or named.value is None or eq.lhs == "tuple":
        return True
    if isinstance(named.value, Inf):
        raise Unsure
    if not isinstance(named.value, Expr) or named.lhs in ("f", "tuple"):
        return True
    if eq.sides is None or named.sides is None:
        raise Unsure
    if named.lhs != "y":
        return True  # named.lhs is not a sympy Symbol
    (y,) = named.sides[0].names
    d, dnames = sides_fn(*eq.sides), _names(eq.sides)
    if y not in dnames:
        return True
    vnames = named.value.names
    if y in vnames and y in relevant(side(named.value), vnames):
        return True  # the value holds the variable it solves for
    relevant(d, dnames)  # y is among d's free symbols
    return nonzero(substituted(d, y, side(named.value)), (dnames - {y}) | vnames)


def _substitution(g: Eqn, p: Expr) -> bool:
    """``xy = 6`` answered ``6/x``: for a variable of ``lhs - rhs`` the answer lacks, in which the
    equation is linear, the answer put in satisfies it (``_compare._eqn_eq``'s last loop)."""
    assert g.sides is not None
    lhs, rhs = g.sides
    d, dnames = sides_fn(lhs, rhs), _names(g.sides)
    pfree = relevant(side(p), p.names) if p.names else set()
    pt = points(sorted(dnames), 1, 99)[0] if dnames else {}
    unsure = False
    for y in sorted(dnames - pfree):  # d's free symbols are among its names
        sat = _tri(lambda y=y: _satisfies(lhs, rhs, y, p))  # type: ignore[misc]
        if sat is False:
            continue
        lin = _tri(lambda y=y: linear_in(lhs, rhs, d, dnames, y, pt))  # type: ignore[misc]
        if lin is False:
            continue
        if sat and lin and changes(d, dnames, y):
            return True
        unsure = True
    if unsure:
        raise Unsure
    return False


def _tri(f: Callable[[], bool]) -> bool | None:
    try:
        return f()
    except Unsure:
        return None


def _satisfies(lhs: Expr, rhs: Expr, y: str, value: Expr) -> bool:
    """``_compare._satisfies``: both sides with ``value`` put in for ``y`` agree at the sampling
    points of their free symbols."""
    v = side(value)
    left = substituted(side(lhs), y, v) if y in lhs.names else side(lhs)
    right = substituted(side(rhs), y, v) if y in rhs.names else side(rhs)
    lnames = (lhs.names - {y}) | (value.names if y in lhs.names else set())
    rnames = (rhs.names - {y}) | (value.names if y in rhs.names else set())
    syms = (relevant(left, lnames) if lnames else set()) | (relevant(right, rnames) if rnames else set())
    return sample(left, right, sorted(syms))
