"""Expressions (in letters or not), lists, tuples, intervals, sets and named values decided in
floats, without sympy: the full check's comparison rules run on the own reader's code (``_reader``).

The full check reads ``x^2 - 1`` and ``(x-1)(x+1)`` into sympy and samples both at six random
positive points (``_numeric.sample``: equal within 1e-8, at least three points) and at three
negative points where both are real; constants compare within 1e-9. Building sympy trees costs
about a millisecond per line; this path evaluates the reader's code directly in floats with
error bounds (``_sampledexpr``, ``_bounded``) at the same points (same seeds, same symbol order,
the same renamed parameter) and decides only where floats vouch for the full check's verdict:
error bounds below 1e-12 of the values, and the full check's margins (agree within 1e-10, differ
above 1e-6, where its bound is 1e-8). Structure follows ``_parse`` and ``_compare.equal`` for a
subset: one expression (a degree sign adds its value in radians), a list or set of items (as
multisets, ``_rules.multiset_eq``), tuples and intervals (``_rules.interval_kinds_differ``),
``name = value`` (accepted when the values match; rejections there need the full check's other
readings of an equation), and sets with constant ends (``_intervals``: inequality chains in one
variable, unions with ``\\cup``, set-builder ``\\{x | cond\\}``, a list holding sets) compared
as ``sets_eq`` compares sympy's. Everything else returns None and the full check decides:
decimals written as numbers (rounding rules), two constants that are not equal within the
rounding bounds (sympy may hold two rationals, compared exactly there; plain rational
arithmetic is evaluated exactly here), units and percent signs, text, ``\\ne``, ``\\pm``,
function applications, ``floor``, ``min``/``max``, sums, ``i``, sets sympy would merge or
empty, and any point the bounds cannot decide. A property test checks it never decides
differently from the full check.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from verigym.graders.math._bounded import Unsure
from verigym.graders.math._intervals import End, Piece, chain_piece, interval, minus, pieces_eq, point, union
from verigym.graders.math._norm import Decor, split_decor, split_top
from verigym.graders.math._reader import read
from verigym.graders.math._rules import (
    NUM_RE,
    Answers,
    bracketed,
    expand_pm,
    flat,
    interval_kinds_differ,
    is_name,
    is_text,
    is_word,
    multiset_eq,
    prepare,
    readings_prefix,
    strip_answer,
)
from verigym.graders.math._sampledexpr import Expr, compiled, expr_eq, scalar_eq

__all__ = ["clear_sampled_caches", "sampled_check", "sampled_decide"]

_NOT_READ = re.compile(r"\boo\b|\b(?:Sum|Product|floor|ceiling|Min|Max|_f\d+)\(")
_DEFER = re.compile(
    r"[;:<>|]|\\(?:text|mathrm|pm|mp|approx|in|ne|neq|le|ge|leq|geq|cup|cap|setminus|begin|langle)"
    r"(?![a-zA-Z])|\b(?:and|or)\b"
)


@dataclass(frozen=True)
class _Group:  # _values.Group: an unordered list or set literal
    items: tuple[_Val, ...]
    pm: bool = False  # the variants of one "a \\pm b": spliced into the enclosing list


@dataclass(frozen=True)
class _Seq:  # _values.Seq: a tuple or interval
    open: str
    close: str
    items: tuple[_Val, ...]


@dataclass(frozen=True)
class _Eqn:  # _values.Eqn with a name (or constant sides) and a value
    name: str | None
    value: _Val
    lhs: str = ""  # "y" for a plain symbol, "f" for a function application "f(x)", else ""


@dataclass(frozen=True)
class _Inf:  # a signed infinity, as an interval's end
    sign: int


@dataclass(frozen=True)
class _Set:  # _values.SetV, or a one-variable inequality chain (its rel_to_set)
    pieces: tuple[Piece, ...]


_Val = Expr | _Group | _Seq | _Eqn | _Inf | _Set


def _parse(s: str) -> tuple[tuple[str, ...], _Val]:
    """``_parse.parse`` for the subset this path reads: the extra number readings of the whole
    answer (``1,3`` is also 1.3) and the value; ``Unsure`` for anything else."""
    s = strip_answer(s)
    literals, only = readings_prefix(s)
    if not s or ";" in s or only:
        raise Unsure
    s = re.sub(r"\\text\{\s*(and|or|,)\s*\}", r" \1 ", s)  # _parse._parse_list: "1 \text{ and } 3"
    parts = [re.sub(r"^(?:and|or)\s+", "", p) for p in split_top(s, (",", " and ", " or ")) if p]
    return tuple(literals), (_item(parts[0]) if len(parts) == 1 else _Group(_splice(parts)))


def _splice(parts: list[str]) -> tuple[_Val, ...]:
    """``_values.splice_pm``: the items of a list, each ``\\pm`` expansion spliced in."""
    out: list[_Val] = []
    for v in (_item(p) for p in parts):
        out.extend(v.items if isinstance(v, _Group) and v.pm else (v,))
    return tuple(out)


def _item(s: str) -> _Val:
    s = re.sub(r"(?<=[})a-zA-Z])\s*\.$", "", s.strip())  # _parse._parse_item: a stray period
    if re.search(r"^[A-Za-z]+(?:\s+\d+)?\s*:\s+", s):
        raise Unsure  # a label
    if ("\\pm" in s or "\\mp" in s) and not s.startswith("\\{") and len(variants := expand_pm(s)) > 1:
        return _Group(tuple(_item(v) for v in variants), pm=True)
    if re.search(r"\\(?:pm|mp|approx)(?![a-zA-Z])", s):
        raise Unsure  # an approximation, too many signs
    s = re.sub(r"^[A-Za-z]\w*\s*\\in(?![a-zA-Z])\s*", "", s)  # "a \in (1, 2)"
    eq = [p.strip() for p in split_top(s, ("=",))]
    if len(eq) == 1 and (found := _set_item(s)) is not None:
        return found
    if _DEFER.search(s):
        raise Unsure
    if m := re.fullmatch(r"([+-]?)\s*\\infty", s):
        return _Inf(-1 if m[1] == "-" else 1)
    if len(eq) > 1:
        return _equation(eq)
    if s.startswith("\\{") and len(split_top(s, ("-",))) > 1:
        raise Unsure  # a set difference
    br = bracketed(s)
    if br is not None:
        o, c, inner = br
        items = [p for p in split_top(inner, (",",)) if p]
        if o == "\\{":
            return _Group(_splice(items))
        if len(items) >= 2 or o != "(" or c != ")":
            if o not in "([" or c not in ")]":
                raise Unsure
            return _Seq(o, c, tuple(_item(p) for p in items))
    elif s.startswith("\\{"):
        raise Unsure
    core, decor = split_decor(s)
    deg = decor == Decor(degree=True) and re.fullmatch(re.escape(core) + r"\s*\^\\circ", s) is not None
    if (
        "\\circ" in core
        or (core != s and not deg)
        or (decor != Decor() and not deg)
        or (NUM_RE.match(core) and "." in core)
        or is_text(core)
        or is_word(core)
    ):
        raise Unsure  # decorations and decimal literals have their own rules; text is text
    reading = read(core)
    if reading is None or _NOT_READ.search(reading.code) or reading.functions or "i" in reading.names():
        raise Unsure  # the ANTLR parser's reading, function applications, i = sqrt(-1)
    return Expr(reading, compiled(reading.code), deg=deg)


_REL_OPS = ("\\le ", "\\ge ", "\\ne ", "<", ">")  # _parse._REL_OPS


def _set_item(s: str) -> _Set | None:
    """``_parse._parse_item``'s sets: an inequality chain, a union (``\\cup``) of intervals,
    points and chains, a set-builder ``\\{x | cond\\}``; None when ``s`` is none of those."""
    if len(split_top(s, _REL_OPS)) > 1 and not s.startswith("\\{"):
        return _chain(s)
    sides = split_top(s, ("-",)) if s.startswith("\\{") else []
    if len(sides) == 2 and all(bracketed(p) and p.startswith("\\{") and p.endswith("\\}") for p in sides):
        sides = [sides[0], "\\setminus", sides[1]]  # "\\{x | x < 2\\} - \\{-6\\}": a set difference
    elif len(sides) > 1:
        raise Unsure
    else:
        sides = split_top(s, ("\\setminus",))
    if len(sides) > 1:
        a, b = sides[0], sides[-1]
        if (
            len(sides) > 3
            or (len(sides) == 3 and sides[1] != "\\setminus")
            or not (bracketed(a) and bracketed(b))
        ):
            raise Unsure
        return _Set(minus(union(_to_set(_item(a))), _to_set(_item(b))))
    parts = split_top(s, ("\\cup",))
    if len(parts) > 1:
        return _Set(union([piece for part in parts for piece in _to_set(_item(part))]))
    br = bracketed(s)
    if br is not None and br[0] == "\\{" and "|" in br[2]:
        return _Set(union(list(_to_set(_item(br[2].split("|", 1)[1].strip())))))
    return None


def _const(s: str) -> Expr:
    """A constant as ``to_sympy`` reads it (no decorations: ``_parse._parse_rel``)."""
    reading = read(s)
    if reading is None or reading.names() or _NOT_READ.search(reading.code) or reading.functions:
        raise Unsure
    return Expr(reading, compiled(reading.code))


def _chain(s: str) -> _Set:
    """``_parse._parse_rel`` then ``rel_to_set``: a chain in one variable with constant bounds."""
    pieces = re.split(r"(\\le |\\ge |\\ne |<|>)", s)
    exprs, ops = [p.strip() for p in pieces[::2]], [p.strip() for p in pieces[1::2]]
    if not all(exprs) or ("\\ne" in ops and len(ops) > 1) or len(exprs) not in (2, 3):
        raise Unsure
    var = [k for k, e in enumerate(exprs) if (r := read(e)) is not None and r.names()]
    if len(var) != 1:
        raise Unsure
    v = read(exprs[var[0]])
    assert v is not None
    if v.code not in v.letters | set(v.symbols) or v.functions or "i" in v.names():
        raise Unsure  # the variable alone in its slot
    bounds: list[End | None] = [None if k == var[0] else _const(e) for k, e in enumerate(exprs)]
    return _Set(chain_piece(bounds, ops))


def _end(v: _Val, lo: bool) -> End | None:
    if isinstance(v, _Inf) and v.sign == (-1 if lo else 1):
        return None
    if isinstance(v, Expr) and not v.names:
        return v
    raise Unsure  # a symbolic end, an infinity at the wrong end (sympy: empty)


def _to_set(v: _Val) -> tuple[Piece | None, ...]:
    """``_parse._to_set``: the pieces of a union's part (``Unsure`` where that raises)."""
    if isinstance(v, _Set):
        return v.pieces
    if isinstance(v, _Seq) and len(v.items) == 2 and v.open in "([" and v.close in ")]":
        a, b = v.items
        return (interval(_end(a, True), _end(b, False), v.open == "(", v.close == ")"),)
    if isinstance(v, _Group):
        return tuple(point(_end_point(i)) for i in v.items)
    raise Unsure


def _end_point(v: _Val) -> End:
    if isinstance(v, Expr) and not v.names:
        return v
    raise Unsure


def _as_set(v: _Val) -> tuple[Piece, ...] | None:
    """``_compare._as_set``: a set, an interval-shaped tuple, a list holding sets; else None."""
    if isinstance(v, _Set):
        return v.pieces
    if isinstance(v, _Seq):
        return union(_to_set(v)) if len(v.items) == 2 and v.open in "([" and v.close in ")]" else None
    if isinstance(v, _Group) and any(isinstance(i, _Set) for i in v.items):
        pieces: list[Piece | None] = []
        for i in v.items:
            if isinstance(i, _Eqn) and isinstance(i.value, Expr):
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


def _equation(parts: list[str]) -> _Eqn:
    """``_parse._parse_eq`` for ``name = value`` and constant sides: the value is the last part."""
    if len(parts) < 2 or not all(parts) or (len(parts) > 2 and not all(is_name(q) for q in parts[:-1])):
        raise Unsure  # "x = y = z = 1/2" names one value; other chains: the full check
    named = is_name(parts[0])
    constant = not named and not any(re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", p)) for p in parts)
    if not (named or constant) or any(
        (br := bracketed(p)) is not None and len(split_top(br[2], (",",))) > 1 for p in parts
    ):
        raise Unsure
    lhs = read(parts[0]) if named else None
    kind = ""
    if lhs is not None and re.fullmatch(r"_f\d+\((?:[a-z]|_v\d+)\)", lhs.code) and len(lhs.functions) == 1:
        kind = "f"  # f(x): sympy's AppliedUndef, which no point evaluates
    elif lhs is not None and lhs.code in lhs.names() | set(lhs.symbols) and len(lhs.names()) == 1:
        kind = "y"
    name = re.sub(r"\s+", "", parts[0]) if named else None
    return _Eqn(name, _item(parts[-1]), kind)


def _end_eq(a: End, b: End) -> bool:
    """``_compare._endpoint_eq`` of two finite constant ends."""
    assert isinstance(a, Expr) and isinstance(b, Expr)
    return expr_eq(a, b)


def _bound_rename(gname: str, pname: str, pval: _Val) -> _Val:
    """``_compare._bound_rename``: ``f(z) = z`` and ``f(x) = x`` define the same function."""
    ga, pa = gname.partition("(")[2].rstrip(")"), pname.partition("(")[2].rstrip(")")
    if not (ga.isalpha() and pa.isalpha() and len(ga) == len(pa) == 1 and ga != pa):
        return pval
    return pval.renamed({pa.lower(): ga.lower()}) if isinstance(pval, Expr) else pval


def _name_key(name: str) -> tuple[str, int]:
    return name.split("(")[0].lower(), name.count(",") + ("(" in name)


def _no_substitution(g: _Eqn, p: _Val) -> bool:
    """``y = rhs`` against ``p`` (values not equal): ``_compare._eqn_eq`` then puts ``p`` in for
    each variable of ``y - rhs`` that ``p`` lacks; with ``rhs``'s variables all in ``p`` and ``y``
    not in ``rhs`` that is ``y`` alone, and the sampling already done (no parameter renamed)."""
    if not (isinstance(g.value, Expr) and isinstance(p, Expr)) or g.name is None:
        return False
    y = read(g.name)
    return y is not None and not (y.names() & g.value.names) and g.value.names <= p.names


def _equal(g: _Val, p: _Val) -> bool:
    """``_compare.equal`` on the subset; ``Unsure`` where it would need more than floats."""
    g, p = flat(g, _Group), flat(p, _Group)
    if isinstance(g, _Eqn):
        if isinstance(p, _Eqn):
            named = g.name and p.name and _name_key(g.name) == _name_key(p.name)
            if named and _equal(g.value, _bound_rename(g.name or "", p.name or "", p.value)):
                return True
            if named and g.lhs == p.lhs == "f":
                return False  # proportional sides and substitution need values of f: none
        elif _equal(g.value, p):
            return True
        elif g.lhs == "y" and _no_substitution(g, p):
            return False
        raise Unsure  # proportional sides, substitution: the full check's other readings
    if isinstance(p, _Eqn):
        return _equal(g, p.value)
    if isinstance(g, Expr) and isinstance(p, Expr):
        return scalar_eq(g, p)
    if isinstance(g, _Group) and isinstance(p, _Group):
        return multiset_eq(g.items, p.items, _equal)
    if isinstance(g, _Seq) and isinstance(p, _Seq):
        if len(g.items) != len(p.items):
            return False
        if interval_kinds_differ(g.open, g.close, p.open, p.close, len(g.items)):
            return False
        if all(_equal(a, b) for a, b in zip(g.items, p.items, strict=True)):
            return True
        if any(isinstance(i, Expr) and i.names for i in g.items + p.items):
            raise Unsure  # a renamed parameter across the tuple (_compare._rename_parameter)
        return False
    if isinstance(g, _Seq | _Group) and isinstance(p, _Seq | _Group):
        return len(g.items) == len(p.items) and all(
            _equal(a, b) for a, b in zip(g.items, p.items, strict=True)
        )
    if (isinstance(g, _Seq | _Group) and isinstance(p, Expr | _Inf)) or (
        isinstance(p, _Seq | _Group) and isinstance(g, Expr | _Inf)
    ):
        return False  # a list or tuple against a number (``_compare._as_set`` of a number: None)
    if isinstance(g, _Set) or isinstance(p, _Set):
        gs, ps = _as_set(g), _as_set(p)
        return gs is not None and ps is not None and pieces_eq(gs, ps, _end_eq)
    if isinstance(g, _Inf) and isinstance(p, _Inf):
        return g.sign == p.sign
    other = p if isinstance(g, _Inf) else g if isinstance(p, _Inf) else None
    if isinstance(other, Expr) and not other.names:
        return False  # infinity and a number (``_const_eq``: oo is not finite)
    raise Unsure  # a number against a set, an interval read as a set: sympy's sets


def sampled_check(
    gold: str, pred: str, mode: str = "equivalent", question: str | None = None
) -> tuple[bool, str, str | None] | None:
    """``_check.check``'s verdict when floats vouch for it, else None."""
    if mode.strip() != "equivalent" or len(pred) > 4000 or len(gold) > 4000:
        return None
    ans = prepare(gold, pred, question)
    return sampled_decide(ans) if isinstance(ans, Answers) else ans


@functools.lru_cache(maxsize=4096)
def _value(s: str) -> tuple[tuple[str, ...], _Val] | None:
    """``_parse`` remembered (a reference is read once for all its responses); None: defer."""
    try:
        return _parse(s)
    except (Unsure, RecursionError):
        return None


def clear_sampled_caches() -> None:
    _value.cache_clear()
    compiled.cache_clear()


def sampled_decide(ans: Answers) -> tuple[bool, str, str | None] | None:
    """``sampled_check`` on extracted answers (mode ``equivalent``)."""
    gv = _value(ans.gold)
    pv = None if gv is None else _value(ans.answer)  # a reference out of reach: done
    if gv is None or pv is None or (gv[0] and pv[0]):
        return None
    (glit, g), (plit, p) = gv, pv
    if ans.boxes > 1 and not isinstance(g, _Group):
        return False, f"hedged: {ans.boxes} different boxed answers", ans.answer
    try:
        same = _equal(g, p)
        if (
            not same
            and (glit or plit)
            and not isinstance(flat(p if glit else g, _Group), _Group | _Seq | _Set)
        ):
            return None  # the decimal reading ("1,3" is 1.3) against a number: the rounding rules
    except (Unsure, RecursionError):
        return None
    return (
        (True, "equivalent", ans.answer) if same else (False, "not equivalent to the reference", ans.answer)
    )
