"""A fast path from simple LaTeX to sympy, bypassing the ANTLR parser (50-100x slower).

Covers numbers, single-letter variables, ``+ - * / ^``, parentheses, ``\\frac``, ``\\sqrt``,
``\\pi``, ``\\cdot``, ``\\times`` and implicit products. Anything else returns None and the caller
uses ``latex2sympy2_extended``; the conventions match it (letters are lower-cased symbols).
"""

from __future__ import annotations

import re
from typing import Any

import sympy
from sympy.parsing.sympy_parser import parse_expr

__all__ = ["fast_sympy"]

_ALLOWED = re.compile(r"^(?:[\d.\sa-zA-Z+\-*/^(){}]|\\(?:frac|sqrt|pi|cdot|times)(?![a-zA-Z]))*$")
_TOKEN = re.compile(r"\d+\.\d*|\.\d+|\d+|\\frac|\\sqrt|\\pi|\\cdot|\\times|[a-zA-Z]|[+\-*/^(){}\[\]]|\s+")
_PI = sympy.pi


def _group(tokens: list[str], i: int) -> tuple[str, int] | None:
    """Translate one argument starting at tokens[i] ('{...}' or a single token)."""
    while i < len(tokens) and tokens[i].isspace():
        i += 1
    if i >= len(tokens):
        return None
    if tokens[i] == "{":
        depth, j = 0, i
        while j < len(tokens):
            depth += (tokens[j] == "{") - (tokens[j] == "}")
            if depth == 0:
                inner = _translate(tokens[i + 1 : j])
                return (None if inner is None else f"({inner})"), j + 1  # type: ignore[return-value]
            j += 1
        return None
    t = tokens[i]
    if re.fullmatch(r"\d|[a-zA-Z]", t):
        return (t.lower() if t.isalpha() else t), i + 1
    if t == "\\pi":
        return "pi", i + 1
    return None


def _translate(tokens: list[str]) -> str | None:
    out: list[str] = []
    i = 0
    prev_operand = False
    while i < len(tokens):
        t = tokens[i]
        if t.isspace():
            i += 1
            continue
        piece: str | None
        if t in ("\\frac",):
            a = _group(tokens, i + 1)
            b = _group(tokens, a[1]) if a and a[0] else None
            if not a or not b or a[0] is None or b[0] is None:
                return None
            piece, i = f"(({a[0]})/({b[0]}))", b[1]
        elif t == "\\sqrt":
            j = i + 1
            if j < len(tokens) and tokens[j] == "[":
                return None
            a = _group(tokens, j)
            if not a or a[0] is None:
                return None
            piece, i = f"sqrt({a[0]})", a[1]
        elif t == "^":
            a = _group(tokens, i + 1)
            if not a or a[0] is None or not prev_operand:
                return None
            out.append(f"**({a[0]})")
            i = a[1]
            continue
        elif t in ("\\cdot", "\\times", "*", "/", "+", "-"):
            out.append("*" if t in ("\\cdot", "\\times") else t)
            prev_operand = False
            i += 1
            continue
        elif t == "(":
            piece, i = "(", i + 1
        elif t == ")":
            out.append(")")
            prev_operand = True
            i += 1
            continue
        elif t in "{}[]":
            return None
        elif t == "\\pi":
            piece, i = "pi", i + 1
        elif t[0].isdigit() or t[0] == ".":
            if prev_operand and out and re.search(r"[\d.]$", out[-1]):
                return None  # "1 000" or "2 3": not a product we should guess
            piece, i = t, i + 1
        else:
            piece, i = t.lower(), i + 1
        if prev_operand:
            out.append("*")
        out.append(piece)
        prev_operand = piece != "("
    return "".join(out)


def fast_sympy(s: str) -> Any | None:
    """sympy for a simple expression, or None when the full parser is needed."""
    if not _ALLOWED.match(s) or re.search(r"[eE](?![a-zA-Z])|[a-zA-Z]{2,}(?<!frac)(?<!sqrt)", _strip_cmds(s)):
        return None  # 'e' (Euler vs symbol) and multi-letter words go through the full parser
    if re.search(r"\d\s*\\frac|[a-zA-Z]\s*\(", s):
        # "2\frac{1}{2}" is a mixed number and "f(x)" may be a function call: the full parser decides
        return None
    tokens = _TOKEN.findall(s)
    if "".join(tokens) != s:
        return None
    code = _translate(tokens)
    if not code:
        return None
    names = {c: sympy.Symbol(c) for c in set(re.findall(r"(?<![a-z])[a-z](?![a-z])", code))}
    names.update({"pi": _PI, "sqrt": sympy.sqrt})
    try:
        return parse_expr(code, local_dict=names)
    except (SyntaxError, TypeError, ValueError, ZeroDivisionError, TokenError):
        return None


def _strip_cmds(s: str) -> str:
    return re.sub(r"\\(?:frac|sqrt|pi|cdot|times)", " ", s)


try:
    from tokenize import TokenError
except ImportError:  # pragma: no cover
    TokenError = SyntaxError  # type: ignore[misc,assignment]
