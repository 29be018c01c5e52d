"""Unions of intervals and points with constant ends, compared as the full check compares sympy
sets (``_compare.sets_eq``), without sympy: for the float path (``_sampled``).

sympy simplifies a ``Union`` as it builds it: it merges intervals that overlap or touch at a
closed end, absorbs points lying in an interval, empties ``(a, b)`` with ``a >= b`` and forces
infinite ends open. ``union`` therefore accepts only pieces that sympy keeps as written: each
interval provably non-empty, consecutive pieces provably apart (or touching at one exact rational
point where both ends are open, as ``(-oo, -6) U (-6, 3/2)``); anything closer raises ``Unsure``.
``pieces_eq`` is then ``sets_eq``: the same number of pieces, sorted by their left ends, with the
same open/closed ends and ends equal under the constants' rule (``eq``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from verigym.graders.math._float_path._bounded import Bounded, Unsure
from verigym.graders.math._shared._matching import chain_ends

__all__ = ["End", "Piece", "chain_piece", "interval", "minus", "pieces_eq", "point", "union"]


class End(Protocol):
    """A constant end: its value with an error bound, and its exact value when rational."""

    def at(self, pt: dict[str, float]) -> Bounded: ...

    def exact(self) -> Fraction | None: ...


@dataclass(frozen=True)
class Piece:
    """An interval (``lo``/``hi`` None: minus/plus infinity) or a point (``lo is hi``, closed)."""

    lo: End | None
    hi: End | None
    lo_open: bool
    hi_open: bool


def _real(e: End) -> tuple[float, float]:
    """(lowest, highest) value ``e`` can have."""
    v = e.at({})
    if v.cx or v.z.imag != 0:
        raise Unsure  # sympy's sets of non-real ends: not modelled
    return v.z.real - v.e, v.z.real + v.e


def _before(a: End, b: End, both_open: bool) -> bool:
    """``a < b`` provably; with ``both_open``, ``a == b`` exactly (two rationals) also counts."""
    if _real(a)[1] < _real(b)[0]:
        return True
    if both_open:
        qa, qb = a.exact(), b.exact()
        return qa is not None and qa == qb
    return False


def interval(lo: End | None, hi: End | None, lo_open: bool, hi_open: bool) -> Piece | None:
    """``sympy.Interval(lo, hi, ...)`` when sympy keeps it an interval, None when provably empty
    (``hi < lo``: sympy's ``EmptySet``, which a union drops); ``Unsure`` otherwise (a point)."""
    if lo is not None and hi is not None and not _before(lo, hi, False):
        if _before(hi, lo, False):
            return None
        raise Unsure  # lo == hi, or too close to tell: a point or empty
    return Piece(lo, hi, lo is None or lo_open, hi is None or hi_open)


def point(e: End) -> Piece:
    _real(e)
    return Piece(e, e, False, False)


def union(parts: Sequence[Piece | None]) -> tuple[Piece, ...]:
    """The pieces sorted (empty ones dropped), when sympy's ``Union`` keeps every one of them;
    ``Unsure`` otherwise, and for an empty union."""
    pieces = [p for p in parts if p is not None]
    if not pieces:
        raise Unsure  # sympy's EmptySet
    keyed = sorted(
        ((-float("inf") if p.lo is None else sum(_real(p.lo)) / 2), k) for k, p in enumerate(pieces)
    )
    out = tuple(pieces[k] for _, k in keyed)
    for a, b in itertools.pairwise(out):
        if a.hi is None or b.lo is None or not _before(a.hi, b.lo, a.hi_open and b.lo_open):
            raise Unsure  # overlapping or touching: sympy merges them
    return out


def minus(pieces: tuple[Piece, ...], points: Sequence[Piece | None]) -> tuple[Piece, ...]:
    """``sympy.Complement(A, {b, ...})``: a point strictly inside an interval of ``A`` splits it
    (open at the point), a point provably outside ``A`` leaves it; anything closer: ``Unsure``."""
    out = list(pieces)
    for b in points:
        if b is None or b.lo is not b.hi or b.lo is None:
            raise Unsure  # not a point
        c = b.lo
        kept: list[Piece | None] = []
        for q in out:
            below = q.lo is not None and _before(c, q.lo, False)
            above = q.hi is not None and _before(q.hi, c, False)
            if below or above:
                kept.append(q)
            elif (
                q.lo is not q.hi
                and (q.lo is None or _before(q.lo, c, False))
                and (q.hi is None or _before(c, q.hi, False))
            ):
                kept += [Piece(q.lo, c, q.lo_open, True), Piece(c, q.hi, True, q.hi_open)]
            else:
                raise Unsure  # on an end, or the point itself: sympy's other simplifications
        out = list(union(kept))
    return tuple(out)


def chain_piece(bounds: list[End | None], ops: list[str]) -> tuple[Piece, ...]:
    """``_values.rel_to_set`` of a chain in one variable (its slot None, the others constants):
    ``3 < x``, ``x \\le 4``, ``a < x \\le b``, ``x \\ne c`` (two open pieces)."""
    if ops == ["\\ne"] and len(bounds) == 2:
        c = bounds[0] or bounds[1]
        if c is None:
            raise Unsure
        return union([Piece(None, c, True, True), Piece(c, None, True, True)])
    ends = chain_ends(bounds, ops)
    if ends is None:
        raise Unsure
    lo, lo_open, hi, hi_open = ends
    return union([interval(lo, hi, lo_open, hi_open)])


def pieces_eq(a: tuple[Piece, ...], b: tuple[Piece, ...], eq: Callable[[End, End], bool]) -> bool:
    """``_compare.sets_eq`` on two unions built by ``union``."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if (x.lo_open, x.hi_open) != (y.lo_open, y.hi_open):
            return False
        for u, v in ((x.lo, y.lo), (x.hi, y.hi)):
            if (u is None) != (v is None):
                return False
            if u is not None and v is not None and not eq(u, v):
                return False
    return True
