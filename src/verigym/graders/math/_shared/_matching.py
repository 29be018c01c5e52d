"""How the values an answer is read as compare, for both paths of the math grader (the exact fast
path's ``_rational``, ``_exactnum``, ``_text``; the full check's ``_compare``, ``_numeric``,
``_values``; the float path's ``_sampled``, ``_sampledcmp``, ``_intervals``), each with its own item
equality: one copy, so the paths cannot drift apart. How an answer is read is ``_rules``'s.

* ``flat``, ``multiset_eq``, ``interval_kinds_differ``, ``Seq`` / ``seq_eq``, ``matrix_eq``: how
  lists, tuples, intervals and matrices compare, for any item equality;
* ``chain_ends``: the bounds an inequality chain in one variable puts on it;
* ``digits``, ``Written``: the decimal places and significant digits of a number literal as written;
* ``decimal_match``: when a decimal stands for a value (rounded with enough significant digits,
  or a reference truncated), given each path's own exact ``rounds`` / ``truncates`` tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = [
    "Seq",
    "Written",
    "chain_ends",
    "decimal_match",
    "digits",
    "flat",
    "interval_kinds_differ",
    "matrix_eq",
    "multiset_eq",
    "seq_eq",
]

T = TypeVar("T")
V = TypeVar("V")  # a path's value type, the items of its Seq


def flat(v: Any, group: type) -> Any:
    """A one-item unordered group is its item."""
    while isinstance(v, group) and len(getattr(v, "items", ())) == 1:
        v = getattr(v, "items")[0]  # noqa: B009
    return v


def multiset_eq(gs: Sequence[T], ps: Sequence[T], eq: Callable[[T, T], bool]) -> bool:
    """Unordered lists: item by item when the sizes agree, else as sets (repeats count once)."""
    if len(gs) == len(ps):
        used: set[int] = set()
        for gi in gs:
            for j, pj in enumerate(ps):
                if j not in used and eq(gi, pj):
                    used.add(j)
                    break
            else:
                break
        else:
            return True
    if max(len(gs), len(ps)) > 30:
        return False
    return all(any(eq(g, p) for p in ps) for g in gs) and all(any(eq(g, p) for g in gs) for p in ps)


def chain_ends(
    bounds: Sequence[T | None], ops: Sequence[str]
) -> tuple[T | None, bool, T | None, bool] | None:
    """``a < x \\le b``, ``x > 3``, ``2 \\ge x`` (the variable's slot None in ``bounds``, the
    constants elsewhere; ``ops`` without ``\\ne``) as (lo, lo_open, hi, hi_open), an end None where
    unbounded; None when two constants or the variable twice are compared, or a side is bounded
    twice (each path then defers)."""
    lo: T | None = None
    hi: T | None = None
    lo_open = hi_open = True
    for k, op in enumerate(ops):
        a, b = bounds[k], bounds[k + 1]
        if (a is None) == (b is None):
            return None
        upper = (op in ("<", "\\le")) == (a is None)  # "x < c" or "c > x": c bounds x above
        if upper:
            if hi is not None:
                return None
            hi, hi_open = b if a is None else a, op in ("<", ">")
        else:
            if lo is not None:
                return None
            lo, lo_open = b if a is None else a, op in ("<", ">")
    return lo, lo_open, hi, hi_open


def interval_kinds_differ(g_open: str, g_close: str, p_open: str, p_close: str, n: int) -> bool:
    """Two-item brackets read as intervals: open and closed ends must agree."""
    kinds = {g_open + g_close, p_open + p_close}
    return n == 2 and kinds <= {"()", "[]", "(]", "[)"} and len(kinds) > 1


def matrix_eq(g: Any, p: Any, eq: Callable[[Any, Any], bool], mat: type[Any], seq: type[Any]) -> bool:
    """Matrices (``mat``, with ``rows``) entry by entry, a tuple (``seq``) read as a column: the
    entry counts must agree, and the shapes too unless either has a dimension of 1."""

    def cells(v: Any) -> tuple[tuple[int, int], list[Any]] | None:
        if isinstance(v, mat):
            rows = v.rows
            return (len(rows), len(rows[0]) if rows else 0), [c for r in rows for c in r]
        if isinstance(v, seq):
            return (len(v.items), 1), list(v.items)
        return None

    a, b = cells(g), cells(p)
    if a is None or b is None or len(a[1]) != len(b[1]) or (a[0] != b[0] and 1 not in a[0] + b[0]):
        return False
    return all(eq(x, y) for x, y in zip(a[1], b[1], strict=True))


@dataclass(frozen=True)
class Seq(Generic[V]):
    """Bracketed items, a tuple or (compared with one) an interval: the ``Seq`` of every path, whose
    items are that path's values."""

    open: str
    close: str
    items: tuple[V, ...]


def seq_eq(g: Seq[Any], p: Seq[Any], eq: Callable[[Any, Any], bool]) -> bool | None:
    """Tuples and intervals item by item: False when the sizes or an interval's ends differ, True
    when every item agrees, None when some item does not (each path then tries its own readings)."""
    if len(g.items) != len(p.items):
        return False
    if interval_kinds_differ(g.open, g.close, p.open, p.close, len(g.items)):
        return False
    return True if all(eq(a, b) for a, b in zip(g.items, p.items, strict=True)) else None


def digits(raw: str) -> tuple[int | None, int]:
    """Decimal places and significant digits of a number literal as written (``"-0.050"``:
    3 and 2); no decimal point: (None, 0)."""
    body = raw.lstrip("+-")
    if "." not in body:
        return None, 0
    return len(body.split(".")[1]), len(body.replace(".", "").lstrip("0"))


@dataclass(frozen=True)
class Written:
    """How a number was written: decimal places and significant digits of a decimal literal
    (``places`` None otherwise), and whether its value is rational / an integer."""

    places: int | None
    sig: int
    rational: bool
    integer: bool


def decimal_match(
    g: Written, p: Written, rounds: Callable[[str], bool], truncates: Callable[[], bool]
) -> bool:
    """Values that differ, one of them written as a decimal: the decimal stands for the other
    value when it is that value rounded, with enough significant digits to be a rounding (2 for a
    rational, 4 for an irrational such as pi; an integer never rounds), or when the *reference*
    is a truncation of the answer's exact value (``41.494`` for 17 + 10 sqrt 6 = 41.4949...).
    ``rounds("p")``: the answer's decimal is the reference rounded; ``rounds("g")`` the reverse."""
    need = 2 if g.rational else 4
    if p.places is not None and g.places is None and p.sig >= need:
        return rounds("p") and not (g.integer and p.places == 0)
    if g.places is not None and p.places is None and g.sig >= 3 and not p.integer:
        return rounds("g") or truncates()
    if g.places is not None and p.places is not None and g.places != p.places:
        coarse = g if g.places < p.places else p
        return coarse.sig >= 3 and rounds("g" if coarse is g else "p")
    return False
