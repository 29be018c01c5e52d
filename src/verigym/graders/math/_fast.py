"""A fast path from simple LaTeX to sympy, bypassing the ANTLR parser (10-100x slower).

Covers numbers, single-letter variables, lower-case Greek letters, subscripted variables
(``x_1``, ``a_{37}``), ``+ - * / ^ !``, parentheses and braces, ``\\frac``, ``\\sqrt`` (and
``\\sqrt[n]``), ``\\pi``, ``\\infty``, ``\\cdot``, ``\\times``, ``\\div``, implicit products,
``e^{...}``, functions applied to parentheses (``\\sin(x)``, ``\\ln(x)``) and to one bare operand
that ends a term (``\\sin\\theta``, ``\\cos 2 + x``). Anything else returns None and the caller uses
``latex2sympy2_extended``. The conventions are that parser's: letters are lower-cased symbols,
``e`` is Euler's number, ``\\log`` is base 10, ``x_{2}`` is ``x_2``, and a function's bare argument
runs over an implicit product that follows (``\\sin x y``: left to it), but an explicit ``\\cdot``
or ``\\times`` ends it (``\\cot t \\cdot \\ln t`` is ``cot(t) ln(t)``, where that parser reads
``cot(t ln t)``).
"""

from __future__ import annotations

import re
from tokenize import TokenError
from typing import Any

import sympy
from sympy.parsing.sympy_parser import parse_expr

__all__ = ["fast_sympy"]

_FUNCS = {
    "sin": "sin", "cos": "cos", "tan": "tan", "cot": "cot", "sec": "sec", "csc": "csc",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "ln": "log", "log": "log10", "exp": "exp",
}  # fmt: skip
_GREEK = (
    "alpha",
    "beta",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
)  # fmt: skip  (no \\gamma: the full parser reads it as Euler's constant)
_CMDS = (
    r"\\(?:frac|sqrt|pi|cdot|times|div|infty|" + "|".join(_FUNCS) + "|" + "|".join(_GREEK) + r")(?![a-zA-Z])"
)
_SUB = r"_(?:\{[a-z0-9]+\}|[a-z0-9])"
_TOKEN = re.compile(r"\d+\.\d*|\.\d+|\d+|" + _CMDS + r"|" + _SUB + r"|[a-zA-Z]|[+\-*/^!(){}\[\],]|\s+")
_ENDS_TERM = (None, "+", "-", ")", "}", "\\cdot", "\\times")
_LOCALS: dict[str, Any] = {
    "pi": sympy.pi, "E": sympy.E, "oo": sympy.oo, "sqrt": sympy.sqrt, "root": sympy.root,
    "factorial": sympy.factorial, "log10": lambda x: sympy.log(x, 10),
    **{py: getattr(sympy, py) for py in _FUNCS.values() if py != "log10"},
}  # fmt: skip


class _Unsupported(Exception):
    pass


class _Reader:
    """Recursive translation of a token list into a Python expression string."""

    def __init__(self, tokens: list[str]) -> None:
        self.toks = [t for t in tokens if not t.isspace()]
        self.spaced = tokens
        self.i = 0
        self.symbols: dict[str, Any] = {}  # placeholder identifier -> named symbol (x_1, lambda)

    def named(self, name: str) -> str:
        """A placeholder identifier for the symbol ``name`` (which may be a Python keyword)."""
        ident = f"_v{len(self.symbols)}"
        self.symbols[ident] = sympy.Symbol(name)
        return ident

    def subscript(self, base: str) -> str:
        """``x_1`` / ``x_{12}``: the full parser's name (one-character braces dropped)."""
        sub = self.take()[1:]
        inner = sub[1:-1] if sub.startswith("{") else sub
        return self.named(f"{base}_{inner if len(inner) == 1 else '{' + inner + '}'}")

    def call(self, name: str) -> str:
        """``f(x)``, ``T(12)``, ``f(x_1, y)``: the full parser's function application, which it
        applies only to plain arguments (``x(x+1)`` and ``f(-3/4)`` are products there)."""
        j, args = self.i + 1, []
        while j < len(self.toks):
            t = self.toks[j]
            if t.isdigit():
                args.append(t)
            elif len(t) == 1 and t.islower() and t not in "ei":
                sub = self.toks[j + 1] if j + 1 < len(self.toks) else ""
                if sub.startswith("_"):
                    args.append(
                        self.named(f"{t}_{sub[2:-1] if sub.startswith('_{') and len(sub) == 4 else sub[1:]}")
                    )
                    j += 1
                else:
                    args.append(t)
            else:
                raise _Unsupported
            nxt = self.toks[j + 1] if j + 1 < len(self.toks) else None
            j += 2
            if nxt == ")":
                break
            if nxt != ",":
                raise _Unsupported
        else:
            raise _Unsupported
        if name in "eE":
            raise _Unsupported  # "e(x)" is a product with Euler's number there
        self.i = j
        ident = f"_f{len(self.symbols)}"
        self.symbols[ident] = sympy.Function(name)
        return f"{ident}({', '.join(args)})"

    def bare_operand(self) -> str | None:
        """A function's argument without parentheses (``\\sin\\theta``, ``\\cos 2``), only when a
        sum, a bracket or an explicit product sign follows: ``\\cot t \\cdot \\ln t`` is
        ``cot(t) ln(t)`` (the full parser would read ``cot(t ln t)``); ``\\sin x y`` is left to it."""
        t = self.peek()
        if t is None or not (t.isdigit() or (len(t) == 1 and t.isalpha()) or t[1:] in _GREEK or t == "\\pi"):
            return None
        j = self.i + 1
        if j < len(self.toks) and self.toks[j].startswith("_"):
            j += 1
        if (self.toks[j] if j < len(self.toks) else None) not in _ENDS_TERM:
            return None
        if t.isdigit():
            self.take()
            return t
        return self.operand()

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> str:
        if self.i >= len(self.toks):
            raise _Unsupported
        self.i += 1
        return self.toks[self.i - 1]

    def group(self) -> str:
        """One argument: ``{...}``, ``(...)`` or a single digit/letter/command operand."""
        t = self.take()
        if t in ("{", "("):
            return f"({self.until('}' if t == '{' else ')')})"
        if re.fullmatch(r"\d|[a-zA-Z]", t):
            return t.lower()
        if t == "\\pi":
            return "pi"
        raise _Unsupported

    def until(self, close: str) -> str:
        code = self.expr(stop=close)
        if self.take() != close:
            raise _Unsupported
        return code

    def operand(self) -> str:
        t = self.take()
        if t in ("{", "("):
            return f"({self.until('}' if t == '{' else ')')})"
        if t == "\\frac":
            return f"(({self.group()})/({self.group()}))"
        if t == "\\sqrt":
            if self.peek() == "[":
                self.take()
                n = self.until("]")
                return f"root({self.group()}, {n})"
            return f"sqrt({self.group()})"
        if t[1:] in _FUNCS:
            power = ""
            if self.peek() == "^":
                self.take()
                power = self.group()
            if self.peek() != "(":
                arg = self.bare_operand()
                if arg is None:
                    raise _Unsupported  # "\sin 2x": argument extent is the full parser's call
                call = f"{_FUNCS[t[1:]]}({arg})"
                return f"({call})**({power})" if power else call
            self.take()
            call = f"{_FUNCS[t[1:]]}({self.until(')')})"
            return f"({call})**({power})" if power else call
        if t == "\\pi":
            return "pi"
        if t[1:] in _GREEK:
            if self.peek() == "(":
                raise _Unsupported
            return self.subscript(t[1:]) if (self.peek() or "").startswith("_") else self.named(t[1:])
        if t == "\\infty":
            return "oo"
        if t[0].isdigit() or t[0] == ".":
            return t
        if t.isalpha():
            if self.peek() == "(":
                return self.call(t)
            if t in ("E", "e") and (self.peek() or "").startswith("_"):
                raise _Unsupported
            if (self.peek() or "").startswith("_"):
                return self.subscript(t.lower())
            if t == "E":
                raise _Unsupported  # the full parser reads "E" as a symbol and "e" as Euler's number
            return "E" if t == "e" else t.lower()
        raise _Unsupported

    def expr(self, stop: str | None = None) -> str:
        out: list[str] = []
        prev_operand = False
        while (t := self.peek()) is not None and t != stop:
            if t in ("+", "-", "*", "/", "\\cdot", "\\times", "\\div"):
                self.take()
                out.append({"\\cdot": "*", "\\times": "*", "\\div": "/"}.get(t, t))
                prev_operand = False
                continue
            if t in (")", "}", "]", "^", "!"):
                raise _Unsupported
            if prev_operand and (t[0].isdigit() or t == "\\frac") and re.search(r"[\d.]$", out[-1]):
                raise _Unsupported  # "1 000", "2 3", "2\frac{1}{2}" (a mixed number)
            chunk = self.operand()
            while self.peek() in ("^", "!"):
                if self.take() == "!":
                    chunk = f"factorial({chunk})"
                else:
                    chunk = f"({chunk})**({self.group()})"
            if prev_operand:
                out.append("*")
            out.append(chunk)
            prev_operand = True
        return "".join(out)


def fast_sympy(s: str) -> Any | None:
    """sympy for a simple expression, or None when the full parser is needed."""
    tokens = _TOKEN.findall(s)
    if "".join(tokens) != s or not tokens:
        return None
    if any(t.isalpha() and len(t) == 1 for t in tokens) and re.search(r"(?<!\\)[a-zA-Z]{2,}", _plain(s)):
        return None  # multi-letter words ("xy", "Evelyn") go through the full parser
    reader = _Reader(tokens)
    try:
        code = reader.expr()
        if reader.peek() is not None or not code:
            return None
    except _Unsupported:
        return None
    names = dict(_LOCALS)
    names.update(reader.symbols)
    names.update({c: sympy.Symbol(c) for c in set(re.findall(r"(?<![a-zA-Z_])[a-z](?![a-zA-Z_(])", code))})
    try:
        expr = parse_expr(code, local_dict=names)
    except (SyntaxError, TypeError, ValueError, ZeroDivisionError, TokenError, AttributeError):
        return None
    if isinstance(expr, sympy.Basic) and expr.has(sympy.zoo, sympy.nan):
        return None  # "\\cot\\pi": the full parser keeps cot(pi) unevaluated
    return expr


def _plain(s: str) -> str:
    return re.sub(_CMDS, " ", s)
