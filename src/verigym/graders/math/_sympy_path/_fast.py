"""A fast path from LaTeX to sympy, bypassing the ANTLR parser of ``latex2sympy2_extended``
(10-100x slower), with that parser's conventions: the own reader's code (``_reader``) evaluated on
sympy numbers and symbols, without ``parse_expr``.
"""

from __future__ import annotations

from typing import Any

import sympy

from verigym.graders.math._shared._reader import FUNCS, read

__all__ = ["fast_sympy"]

_LOCALS: dict[str, Any] = {
    "pi": sympy.pi, "E": sympy.E, "oo": sympy.oo, "sqrt": sympy.sqrt, "root": sympy.root,
    "factorial": sympy.factorial, "log10": lambda x: sympy.log(x, 10), "binomial": sympy.binomial,
    "Abs": sympy.Abs, "floor": sympy.floor, "ceiling": sympy.ceiling, "Min": sympy.Min, "Max": sympy.Max,
    "Sum": sympy.Sum, "Product": sympy.Product, "_n": sympy.Rational,
    **{py: getattr(sympy, py) for py in FUNCS.values() if py != "log10"},
}  # fmt: skip


def fast_sympy(s: str) -> Any | None:
    """sympy for an expression the reader covers, or None when the full parser is needed."""
    reading = read(s)
    if reading is None:
        return None
    names = dict(_LOCALS)
    names.update({ident: sympy.Symbol(name) for ident, name in reading.symbols.items()})
    names.update({ident: sympy.Function(name) for ident, name in reading.functions.items()})
    names.update({c: sympy.Symbol(c) for c in reading.letters})
    try:  # the code holds only names of the table above and sympy numbers: no parse_expr needed
        expr = eval(compile(reading.code, "<latex>", "eval"), {"__builtins__": {}}, names)
    except (SyntaxError, TypeError, ValueError, ZeroDivisionError, AttributeError, RecursionError):
        return None
    if isinstance(expr, sympy.Basic) and expr.has(sympy.zoo, sympy.nan):
        return None  # "\\cot\\pi": the full parser keeps cot(pi) unevaluated
    return expr
