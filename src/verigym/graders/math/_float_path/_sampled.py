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
multisets, ``_matching.multiset_eq``), tuples and intervals (``_matching.interval_kinds_differ``),
equations (the named value, then the full check's other readings: proportional sides,
substitution, ``expr = simplified``, in ``_equations``), and sets with constant ends (``_intervals``: inequality chains in one
variable, unions with ``\\cup``, set-builder ``\\{x | cond\\}``, a list holding sets) compared
as ``sets_eq`` compares sympy's. Everything else returns None and the full check decides:
decimals written as numbers (rounding rules), two constants that are not equal within the
rounding bounds (sympy may hold two rationals, compared exactly there; plain rational
arithmetic is evaluated exactly here), units and percent signs, text, ``\\ne``, ``\\pm``,
function applications, ``floor``, ``min``/``max``, sums, ``i`` beside a letter (constants in
``i``, factorials and binomials are exact, ``_exactval``), sets sympy would merge or
empty, and any point the bounds cannot decide. A property test checks it never decides
differently from the full check. Matrix literals compare entry by entry (a tuple as a column).
Reading is here; the values and their comparison are in ``_sampledcmp``.
"""

from __future__ import annotations

import functools
import re

from verigym.graders.math._float_path._bounded import Unsure
from verigym.graders.math._float_path._equations import Ineq
from verigym.graders.math._float_path._intervals import End, chain_piece, minus, union
from verigym.graders.math._float_path._sampledcmp import (
    Eqn,
    Group,
    Inf,
    Mat,
    Seq,
    SetOf,
    Val,
    equal,
    to_set,
)
from verigym.graders.math._float_path._sampledexpr import Expr, clear_values, compiled
from verigym.graders.math._shared._matching import digits, flat
from verigym.graders.math._shared._norm import Decor, split_decor, split_top
from verigym.graders.math._shared._reader import Reading, read
from verigym.graders.math._shared._rules import (
    IN_PREFIX,
    LABEL,
    NUM_RE,
    STRAY_PERIOD,
    Answers,
    approx_side,
    bracketed,
    decide_texts,
    expand_pm,
    is_name,
    is_text,
    is_word,
    matrix_cells,
    readings_prefix,
    strip_answer,
)

__all__ = ["clear_sampled_caches", "sampled_check", "sampled_decide"]

_PM = re.compile(r"\\(?:pm|mp|approx)(?![a-zA-Z])")
_PLUS_MINUS = re.compile(r"\\(?:pm|mp)(?![a-zA-Z])")
_MINUTES = re.compile(r"(.*?)\^\\circ\s*(\d+)\s*'")
_INFTY = re.compile(r"([+-]?)\s*\\infty")
_read = functools.lru_cache(maxsize=4096)(read)  # the same strings recur in one answer's readings
_NOT_READ = re.compile(r"\boo\b|\b(?:Sum|Product|floor|ceiling|Min|Max|_f\d+)\(")
_DEFER = re.compile(
    r"[;<>|]|^\d{1,2}:\d{2}$|\\(?:text|mathrm|pm|mp|approx|in|ne|neq|le|ge|leq|geq|cup|cap|setminus|begin|langle)"
    r"(?![a-zA-Z])|\b(?:and|or)\b"
)
_ONE_ABS = re.compile(r"[^|]*\|[^|]+\|[^|]*")  # exactly two bars, something between
_TEXT_JOIN = re.compile(r"\\text\{\s*(and|or|,)\s*\}")
_LEAD_JOIN = re.compile(r"^(?:and|or)\s+")


def _parse(s: str) -> tuple[tuple[str, ...], Val]:
    """``_parse.parse`` for the subset this path reads: the extra number readings of the whole
    answer (``1,3`` is also 1.3) and the value; ``Unsure`` for anything else."""
    s = strip_answer(s)
    literals, only = readings_prefix(s)
    if not s or ";" in s or only:
        raise Unsure
    s = _TEXT_JOIN.sub(r" \1 ", s)  # _parse._parse_list: "1 \text{ and } 3"
    parts = [_LEAD_JOIN.sub("", p) for p in split_top(s, (",", " and ", " or ")) if p]
    return tuple(literals), (_item(parts[0]) if len(parts) == 1 else Group(_splice(parts)))


def _splice(parts: list[str]) -> tuple[Val, ...]:
    """``_values.splice_pm``: the items of a list, each ``\\pm`` expansion spliced in."""
    out: list[Val] = []
    for v in (_item(p) for p in parts):
        out.extend(v.items if isinstance(v, Group) and v.pm else (v,))
    return tuple(out)


def _own(s: str) -> str:
    """``s`` without the signs of a set literal's items: the literal expands item by item
    (``_parse._parse_item``), so those signs are the items' to read."""
    br = bracketed(s)
    return _PLUS_MINUS.sub(" ", s) if br is not None and br[:2] == ("\\{", "\\}") else s


def _one_abs(s: str) -> str:
    """``s`` without its bars when they are one absolute value (``|x|``, ``\\sqrt{x^2} - |x-1|``),
    which both paths read as ``Abs`` with the same reader; other bars still defer."""
    return s.replace("|", " ") if _ONE_ABS.fullmatch(s) and "\\{" not in s else s


def _item(s: str) -> Val:
    s = STRAY_PERIOD.sub("", s.strip())  # _parse._parse_item: a stray period
    if LABEL.match(s):
        raise Unsure  # a label
    if ("\\pm" in s or "\\mp" in s) and not s.startswith("\\{") and len(variants := expand_pm(s)) > 1:
        return Group(tuple(_item(v) for v in variants), pm=True)
    if len(approx := split_top(s, ("\\approx",))) > 1:  # "1/3 \approx 0.33": the exact value
        s = approx_side(approx)
    if _PM.search(_own(s)):
        raise Unsure  # an approximation, too many signs
    s = IN_PREFIX.sub("", s)  # "a \in (1, 2)"
    eq = [p.strip() for p in split_top(s, ("=",))]
    if len(eq) == 1 and (found := _set_item(s)) is not None:
        return found
    if len(eq) == 1 and "\\begin{" in s and re.search(r"matrix|array", s):
        return _matrix(s)
    if _DEFER.search(_one_abs(_own(s)) if len(eq) == 1 else _own(s)):
        raise Unsure
    if m := _INFTY.fullmatch(s):
        return Inf(-1 if m[1] == "-" else 1)
    if len(eq) > 1:
        return _equation(eq)
    if s.startswith("\\{") and len(split_top(s, ("-",))) > 1:
        raise Unsure  # a set difference
    br = bracketed(s)
    if br is not None:
        o, c, inner = br
        items = [p for p in split_top(inner, (",",)) if p]
        if o == "\\{":
            return Group(_splice(items))
        if len(items) >= 2 or o != "(" or c != ")":
            if o not in "([" or c not in ")]":
                raise Unsure
            return Seq(o, c, tuple(_item(p) for p in items))
    elif s.startswith("\\{"):
        raise Unsure
    if m := _MINUTES.fullmatch(s):  # 60^\\circ 42': degrees and minutes (_parse._parse_atom)
        r = _read(m[1])
        if r is None or r.names() or _NOT_READ.search(r.code):
            raise Unsure
        code = f"(({r.code}) + _n('{int(m[2])}') / _n('60'))"
        return Expr(Reading(code, r.letters, r.symbols, r.functions), compiled(code), deg=True)
    core, decor = split_decor(s)
    deg = decor == Decor(degree=True) and re.fullmatch(re.escape(core) + r"\s*\^\\circ", s) is not None
    pct = decor == Decor(percent=True)  # _numeric.scalar_eq: the value, and a hundredth of it
    if (
        "\\circ" in core
        or (core != s and not (deg or pct))
        or (decor != Decor() and not (deg or pct))
        or is_text(core)
        or is_word(core)
    ):
        raise Unsure  # decorations and decimal literals have their own rules; text is text
    reading = _read(core)
    if reading is None or _NOT_READ.search(reading.code) or reading.functions:
        raise Unsure  # the ANTLR parser's reading, function applications
    cplx = "i" in reading.names()  # i = sqrt(-1): decided exactly, in a constant only
    if cplx and (reading.names() != {"i"} or reading.symbols or deg or pct):
        raise Unsure
    dec = None
    if NUM_RE.match(core):  # a decimal literal: _values.decimal_scalar
        places, sig = digits(core)
        dec = None if places is None else (places, sig)
    return Expr(reading, compiled(reading.code), deg=deg, dec=dec, cplx=cplx, pct=pct)


_REL_OPS = ("\\le ", "\\ge ", "\\ne ", "<", ">")  # _parse._REL_OPS


def _set_item(s: str) -> SetOf | Ineq | None:
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
        return SetOf(minus(union(to_set(_item(a))), to_set(_item(b))))
    parts = split_top(s, ("\\cup",))
    if len(parts) > 1:
        return SetOf(union([piece for part in parts for piece in to_set(_item(part))]))
    br = bracketed(s)
    if br is not None and br[0] == "\\{" and "|" in br[2]:
        return SetOf(union(list(to_set(_item(br[2].split("|", 1)[1].strip())))))
    return None


def _matrix(s: str) -> Mat:
    """``_parse._parse_matrix`` of a literal (anything else goes through sympy there)."""
    rows = matrix_cells(s)
    if rows is None:
        raise Unsure
    return Mat(tuple(tuple(_item(c) for c in r) for r in rows))


def _const(s: str) -> Expr:
    """A constant as ``to_sympy`` reads it (no decorations: ``_parse._parse_rel``)."""
    reading = _read(s)
    if reading is None or reading.names() or _NOT_READ.search(reading.code) or reading.functions:
        raise Unsure
    return Expr(reading, compiled(reading.code))


def _chain(s: str) -> SetOf | Ineq:
    """``_parse._parse_rel`` then ``rel_to_set``: a chain in one variable with constant bounds;
    one inequality with the variable elsewhere (``3^x \\ge x^2``) as its two sides."""
    pieces = re.split(r"(\\le |\\ge |\\ne |<|>)", s)
    exprs, ops = [p.strip() for p in pieces[::2]], [p.strip() for p in pieces[1::2]]
    if not all(exprs) or ("\\ne" in ops and len(ops) > 1) or len(exprs) not in (2, 3):
        raise Unsure
    var = [k for k, e in enumerate(exprs) if (r := _read(e)) is not None and r.names()]
    if len(var) == 2 and len(exprs) == 2 and ops[0] != "\\ne":
        return _ineq(exprs, ops[0])
    if len(var) != 1:
        raise Unsure
    v = _read(exprs[var[0]])
    assert v is not None
    if len(exprs) == 2 and ops[0] != "\\ne" and v.code not in v.letters | set(v.symbols):
        return _ineq(exprs, ops[0])
    if v.code not in v.letters | set(v.symbols) or v.functions or "i" in v.names():
        raise Unsure  # the variable alone in its slot
    bounds: list[End | None] = [None if k == var[0] else _const(e) for k, e in enumerate(exprs)]
    return SetOf(chain_piece(bounds, ops))


def _ineq(exprs: list[str], op: str) -> Ineq:
    """``lhs op rhs`` in one variable, each side as ``to_sympy`` reads it."""
    sides = []
    for e in exprs:
        r = _read(e)
        if r is None or _NOT_READ.search(r.code) or r.functions or "i" in r.names():
            raise Unsure
        sides.append(Expr(r, compiled(r.code)))
    names = sides[0].names | sides[1].names
    if len(names) != 1:
        raise Unsure
    return Ineq(sides[0], op, sides[1], next(iter(names)))


def _equation(parts: list[str]) -> Eqn:
    """``_parse._parse_eq``: the name (the first label before the last ``=``), the value (the last
    part, when named or constant: "x = 5+5+1 = 11" states 11) and both sides as expressions."""
    if len(parts) < 2 or not all(parts):
        raise Unsure
    names = [q for q in parts[:-1] if is_name(q)]
    if any(
        (br := bracketed(q)) is not None and len(split_top(br[2], (",",))) > 1 for q in (parts[0], parts[-1])
    ):  # "(x, y) = (1, 2)": compared by its value only
        return Eqn(re.sub(r"\s+", "", names[0]) if names else None, _item(parts[-1]), "tuple")
    constant = not names and not any(re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", p)) for p in parts)
    lhs = _read(parts[0]) if is_name(parts[0]) else None
    kind = ""
    if lhs is not None and re.fullmatch(r"_f\d+\((?:[a-z]|_v\d+)\)", lhs.code) and len(lhs.functions) == 1:
        kind = "f"  # f(x): sympy's AppliedUndef, which no point evaluates
    elif lhs is not None and lhs.code in lhs.names() | set(lhs.symbols) and len(lhs.names()) == 1:
        kind = "y"
    name = re.sub(r"\s+", "", names[0]) if names else None
    left, right = _side(parts[0]), _side(parts[-1])
    sides = (left, right) if left is not None and right is not None else None
    value = _item(parts[-1]) if names or constant else None
    if value is None and sides is None:
        raise Unsure
    return Eqn(name, value, kind, sides)


def _side(s: str) -> Expr | None:
    """One side of an equation as ``to_sympy`` reads it, when the own reader covers it as a
    plain expression (no decorations, functions or ``i``); None otherwise."""
    core, decor = split_decor(s)
    if decor != Decor() or core.strip() != s.strip() or is_text(core) or is_word(core):
        return None
    reading = _read(s)
    if reading is None or _NOT_READ.search(reading.code) or reading.functions or "i" in reading.names():
        return None
    return Expr(reading, compiled(reading.code))


@functools.lru_cache(maxsize=4096)
def _value(s: str) -> tuple[tuple[str, ...], Val] | None:
    """``_parse`` remembered (a reference is read once for all its responses); None: defer."""
    try:
        return _parse(s)
    except (Unsure, RecursionError):
        return None


def clear_sampled_caches() -> None:
    _value.cache_clear()
    compiled.cache_clear()
    clear_values()
    _read.cache_clear()


def sampled_decide(ans: Answers) -> tuple[bool, str, str | None] | None:
    """``sampled_check`` on extracted answers (mode ``equivalent``)."""
    gv = _value(ans.gold)
    pv = None if gv is None else _value(ans.answer)  # a reference out of reach: done
    if gv is None or pv is None or (gv[0] and pv[0]):
        return None
    (glit, g), (plit, p) = gv, pv
    if ans.boxes > 1 and not isinstance(g, Group):
        return False, f"hedged: {ans.boxes} different boxed answers", ans.answer
    try:
        same = equal(g, p)
        if not same and (glit or plit) and not isinstance(flat(p if glit else g, Group), Group | Seq | SetOf):
            return None  # the decimal reading ("1,3" is 1.3) against a number: the rounding rules
    except (Unsure, RecursionError):
        return None
    return (
        (True, "equivalent", ans.answer) if same else (False, "not equivalent to the reference", ans.answer)
    )


# sampled_check(gold, pred, mode="equivalent", question=None): its verdict on whole texts, else None
sampled_check = functools.partial(decide_texts, sampled_decide)
