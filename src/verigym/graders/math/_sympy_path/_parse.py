"""Parse an extracted answer string into the math grader's value tree (see ``_values``).

Top-level lists (``,``, ``;``, "and", "or") become unordered groups; ``\\pm`` expands into its two
values; ``lhs = rhs`` chains keep a name when the left side is a label; inequalities, unions,
set-builder sets, brackets (tuple or interval), matrices, percent/degree/unit decorations and
plain text are recognised here. Expressions go to ``to_sympy``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import sympy

from verigym.graders.math._shared._norm import Decor, split_decor, split_top
from verigym.graders.math._shared._rules import (
    IN_PREFIX,
    NUM_RE,
    approx_side,
    bracketed,
    expand_pm,
    is_name,
    is_text,
    is_word,
    list_words,
    matrix_cells,
    norm_text,
    readings_prefix,
    strip_answer,
    strip_item,
)
from verigym.graders.math._sympy_path._values import (
    Eqn,
    Group,
    Mat,
    ParseError,
    Rel,
    Scalar,
    Seq,
    SetV,
    Text,
    Value,
    decimal_scalar,
    rel_to_set,
    splice_pm,
    to_sympy,
)

__all__ = ["parse"]

_REL_OPS = ("\\le ", "\\ge ", "\\ne ", "<", ">")


@functools.lru_cache(maxsize=2048)
def parse(s: str) -> tuple[Value, ...]:
    """All plausible readings of an answer string (usually one). Cached: a reference answer is
    parsed once for all the samples graded against it."""
    s = strip_answer(s)
    if not s:
        raise ParseError("empty answer")
    # "7,425,000" / "1 000" (thousands) and "1,22" / "0,111" (decimal comma) are also one number.
    literals, only = readings_prefix(s)
    readings: list[Value] = [decimal_scalar(x) for x in literals]
    if only:
        return tuple(readings)  # "1 000" has no other reading (the full parser: 1*000 = 0)
    readings.append(_parse_list(s))
    return tuple(readings)


def _parse_list(s: str) -> Value:
    s = list_words(s)
    groups = [g for g in split_top(s, (";",)) if g]
    if len(groups) > 1 and any(len(split_top(g, (",",))) > 1 for g in groups):
        return Group(tuple(_parse_list(g) for g in groups))
    parts = [p for p in split_top(s, (",", ";", " and ", " or ")) if p]
    parts = [re.sub(r"^(?:and|or)\s+", "", p) for p in parts]
    if len(parts) == 1:
        return _parse_item(parts[0])
    return Group(splice_pm([_parse_item(p) for p in parts]))


def _top_has(s: str, *seps: str) -> bool:
    return len(split_top(s, seps)) > 1


def _parse_item(s: str) -> Value:
    s = strip_item(s)
    if re.fullmatch(r"\d{1,2}:\d{2}", s):
        return Text(s)  # a time of day, not a ratio
    if ("\\pm" in s or "\\mp" in s) and not s.startswith("\\{"):  # a set literal expands item by item
        variants = expand_pm(s)
        if len(variants) > 1:
            return Group(tuple(_parse_item(v) for v in variants), pm=True)
    if _top_has(s, "\\approx"):
        s = approx_side(split_top(s, ("\\approx",)))
    s = IN_PREFIX.sub("", s)
    if _top_has(s, "="):
        return _parse_eq(s)
    if _top_has(s, *_REL_OPS) and not s.startswith("\\{"):
        return _parse_rel(s)
    return _parse_atom(s)


def _parse_eq(s: str) -> Value:
    parts = [p.strip() for p in split_top(s, ("=",))]
    if len(parts) < 2 or not all(parts):
        raise ParseError(f"malformed equation {s!r}")
    named = [p for p in parts[:-1] if is_name(p)]
    constant = not named and all(not re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", p)) for p in parts)
    # "x = 5+5+1 = 11" and "1/2 = 0.5" state a value: the last part.
    value = _parse_item(parts[-1]) if named or constant else None
    name = re.sub(r"\s+", "", named[0]) if named else None
    tuple_side = any((br := bracketed(p)) is not None and _top_has(br[2], ",") for p in (parts[0], parts[-1]))
    if tuple_side:  # "(x, y) = (1, 2)", "(k, \\ell) = (3x, 5x)": compared through its value only
        return Eqn(None, None, name, value if value is not None else _parse_item(parts[-1]))
    try:
        lhs, rhs = to_sympy(parts[0]), to_sympy(parts[-1])
    except ParseError:
        if value is None:
            raise
        lhs = rhs = None
    return Eqn(lhs, rhs, name, value)


def _parse_rel(s: str) -> Value:
    pieces = re.split(r"(\\le |\\ge |\\ne |<|>)", s)
    exprs = [p.strip() for p in pieces[::2]]
    ops = [p.strip() for p in pieces[1::2]]
    if not all(exprs):
        raise ParseError(f"malformed inequality {s!r}")
    return Rel(tuple(to_sympy(e) for e in exprs), tuple(ops))


def _parse_atom(s: str) -> Value:
    s = s.strip()
    sides = split_top(s, ("-",)) if s.startswith("\\{") else []
    if len(sides) == 2 and all(bracketed(p) and p.startswith("\\{") and p.endswith("\\}") for p in sides):
        s = " \\setminus ".join(sides)  # "\\{x | x < 2\\} - \\{-6\\}": a set difference
    if _top_has(s, "\\cup") or _top_has(s, "\\setminus"):
        return _parse_union(s)
    if "\\begin{" in s and re.search(r"matrix|array", s):
        return _parse_matrix(s)
    br = bracketed(s)
    if br is not None:
        o, c, inner = br
        if o == "\\{" and "|" in inner:
            return _set_builder(inner)
        items = [p for p in split_top(inner, (",", ";")) if p]
        if o == "\\{":
            return Group(splice_pm([_parse_item(p) for p in items]))
        if len(items) >= 2 or o != "(" or c != ")":
            return Seq(o, c, tuple(_parse_item(p) for p in items))
    core, decor = split_decor(s)
    core = core.strip()
    minutes = re.fullmatch(r"(.*?)\^\\circ\s*(\d+)\s*'", s)
    if minutes:
        deg = to_sympy(minutes[1]) + sympy.Rational(int(minutes[2]), 60)
        return Scalar(deg, s, decor=Decor(degree=True))
    if NUM_RE.match(core):
        sc = decimal_scalar(core)
        return Scalar(sc.expr, sc.raw, sc.places, sc.sig, decor)
    if is_text(core) or is_word(core):
        return Text(norm_text(core))
    try:
        expr = to_sympy(core)
    except ParseError:
        if re.search(r"[a-zA-Z]{3,}", core):
            return Text(norm_text(core))
        raise
    if isinstance(expr, sympy.MatrixBase):
        return _mat_of(expr)
    if isinstance(expr, sympy.Set):
        return SetV(expr)
    if isinstance(expr, sympy.Tuple):
        return Seq("(", ")", tuple(Scalar(e, str(e)) for e in expr))
    if not isinstance(expr, sympy.Expr):
        raise ParseError(f"{s!r} is not a value ({type(expr).__name__})")
    return Scalar(expr, core, decor=decor)


def _to_set(v: Value) -> Any:
    if isinstance(v, SetV):
        return v.s
    if isinstance(v, Seq) and len(v.items) == 2 and v.open in "([" and v.close in ")]":
        a, b = (_scalar_expr(x) for x in v.items)
        return sympy.Interval(a, b, left_open=v.open == "(", right_open=v.close == ")")
    if isinstance(v, Group):
        return sympy.FiniteSet(*(_scalar_expr(x) for x in v.items))
    if isinstance(v, Rel):
        return rel_to_set(v)
    raise ParseError("not a set")


def _scalar_expr(v: Value) -> Any:
    if isinstance(v, Scalar):
        return v.expr
    raise ParseError("interval endpoint is not a number")


def _parse_union(s: str) -> Value:
    if _top_has(s, "\\setminus"):
        a, b = split_top(s, ("\\setminus",))[:2]
        return SetV(sympy.Complement(_to_set(_parse_atom(a.strip())), _to_set(_parse_atom(b.strip()))))
    parts = [p.strip() for p in split_top(s, ("\\cup",))]
    return SetV(sympy.Union(*(_to_set(_parse_item(p)) for p in parts)))


def _set_builder(inner: str) -> Value:
    cond = inner.split("|", 1)[1].strip()
    item = _parse_item(cond)
    return SetV(_to_set(item))


def _mat_of(m: Any) -> Mat:
    return Mat(tuple(tuple(Scalar(m[i, j], str(m[i, j])) for j in range(m.cols)) for i in range(m.rows)))


def _parse_matrix(s: str) -> Value:
    """A matrix literal entry by entry (so ``0.33`` keeps its decimal places); sums and products
    of matrices go through sympy."""
    rows = matrix_cells(s)
    if rows is not None:
        return Mat(tuple(tuple(_parse_item(c) for c in r) for r in rows))
    expr = to_sympy(s)
    if isinstance(expr, sympy.MatrixBase):
        return _mat_of(expr)
    raise ParseError(f"cannot read the matrix {s[:40]!r}")
