"""The grader's own LaTeX reader: LaTeX to Python expression code, with the conventions of the ANTLR
parser of ``latex2sympy2_extended`` (10-100x slower). No sympy here: ``_fast`` evaluates the code on
sympy numbers, ``_sampled`` on floats with error bounds.

Covers numbers, letters (a run such as ``ab`` or ``2Cx`` is a product; letters are lower-cased,
``e`` is Euler's number, ``E`` a symbol), lower-case Greek letters, subscripts (``x_1``,
``a_{37}``, ``F_{n-k-1}``), ``+ - * / : ^ !``, ``\\cdot``, ``\\times``, ``\\div``, parentheses and
braces, implicit products, mixed numbers (``2\\frac{1}{2}``, ``2 1/2`` at the end of a term), ``\\frac``,
``\\binom``, ``\\sqrt`` (and ``\\sqrt[n]``), ``|x|``, ``\\lfloor``/``\\lceil``, ``\\min``/``\\max``,
``\\pi``, ``\\infty``, ``\\ldots`` inside a sum or product (dropped, as that parser does),
``\\sum``/``\\prod`` with ``_{k=a}^{b}``, ``e^{...}``, ``\\log_b``, and functions applied to
parentheses or to a bare argument. A bare argument runs over the implicit product that follows
(``\\sin 2x`` is ``sin(2x)``, ``\\tan \\frac{7}{5} \\pi`` is ``tan(7 pi / 5)``) up to a sign, another
function or an explicit product sign: ``\\cot t \\cdot \\ln t`` is ``cot(t) ln(t)`` (the full parser
reads ``cot(t ln t)``). ``f(x)``, ``T(12)``, ``g(x_1, 2)`` apply a function; ``f(x+1)`` and
``f(-3/4)`` are products, as there. Anything else returns None and the caller uses the full parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from verigym.graders.math._shared._cursor import Cursor

__all__ = ["FUNCS", "Reading", "read"]

FUNCS = {
    "sin": "sin", "cos": "cos", "tan": "tan", "cot": "cot", "sec": "sec", "csc": "csc",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "ln": "log", "log": "log10", "exp": "exp",
}  # fmt: skip
# no \\gamma: the full parser reads it as Euler's constant
_GREEK = (
    "alpha", "beta", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "kappa", "lambda", "mu",
    "nu", "xi", "rho", "sigma", "tau", "phi", "varphi", "chi", "psi", "omega", "ell",
)  # fmt: skip
_OTHER = ("frac", "binom", "sqrt", "pi", "cdot", "times", "div", "infty", "ldots", "sum", "prod", "min", "max")  # fmt: skip
_PAIRS = {"\\lfloor": ("\\rfloor", "floor"), "\\lceil": ("\\rceil", "ceiling")}
_CMDS = (
    r"\\(?:" + "|".join((*_OTHER, *FUNCS, *_GREEK, "lfloor", "rfloor", "lceil", "rceil")) + r")(?![a-zA-Z])"
)
_SUB = r"_(?:\{[a-zA-Z0-9+\- ]+\}|[a-zA-Z0-9])"
_TOKEN = re.compile(r"\d+\.\d*|\.\d+|\d+|" + _CMDS + r"|" + _SUB + r"|[a-zA-Z]|[+\-*/^!(){}\[\],:|=_]|\s+")
_ENDS_RUN = ("\\sum", "\\prod", "\\min", "\\max")  # like a function, these end a bare argument
_PRODUCT_SIGNS = ("*", "/", ":", "\\cdot", "\\times", "\\div")
_STOPS = (None, "+", "-", ")", "}", "]", ",", "|", "=", "\\rfloor", "\\rceil", *_PRODUCT_SIGNS)


class _Unsupported(Exception):
    pass


def _num(t: str) -> str:
    return f"_n({t!r})"


def _sub_name(base: str, sub: str) -> str:
    """``x`` + ``_{2}`` -> ``x_2``; ``F`` + ``_{n - k}`` -> ``f_{n-k}`` (the full parser's names)."""
    inner = (sub[2:-1] if sub.startswith("_{") else sub[1:]).replace(" ", "").lower()
    return f"{base.lower()}_{inner if len(inner) == 1 else '{' + inner + '}'}"


class _Reader(Cursor):
    """Recursive translation of a token list into a Python expression string."""

    stop = _Unsupported

    def __init__(self, tokens: list[str]) -> None:
        super().__init__([t for t in tokens if not t.isspace()])
        self.symbols: dict[str, str] = {}  # placeholder identifier -> symbol name (x_1, lambda)
        self.functions: dict[str, str] = {}  # placeholder identifier -> applied function name

    def named(self, name: str) -> str:
        """A placeholder identifier for the symbol ``name`` (which may be a Python keyword)."""
        ident = f"_v{len(self.symbols)}"
        self.symbols[ident] = name
        return ident

    def at(self, k: int) -> str | None:
        return self.toks[k] if k < len(self.toks) else None

    def letter(self, t: str) -> str:
        """One letter, with its subscript: ``x``, ``x_1``, ``e`` (Euler's number), ``E`` (a symbol)."""
        if (self.peek() or "").startswith("_"):
            if t in "eE" or self.peek() == "_":
                raise _Unsupported
            name = self.named(_sub_name(t, self.take()))
            if self.peek() == "(":
                raise _Unsupported  # "F_{n}(x)": a function application there
            return name
        if t == "d" and (self.peek() or " ").isalpha() and len(self.peek() or "") == 1:
            raise _Unsupported  # "dx": the full parser reads a differential symbol
        if t == "E":
            return self.named("e")
        return "E" if t == "e" else t.lower()

    def call(self, name: str) -> str | None:
        """``f(x)``, ``T(12)``, ``f(x_1, y)``: the full parser's function application, which it
        applies only to plain arguments; with a sign inside (``f(x+1)``, ``f(-3/4)``, ``x(x-1)``)
        it reads a product (None: the caller reads the letter alone). Anything else: unsupported."""
        j, args = self.i + 1, []
        if name in "eE" or self.at(j) == ")":
            raise _Unsupported  # "e(x)" is a product with Euler's number there
        depth, k = 0, j
        while (t := self.at(k)) is not None and not (t == ")" and depth == 0):
            depth += (t in "({") - (t in ")}")
            if t in ("+", "-"):
                return None
            k += 1
        while j < len(self.toks):
            t = self.toks[j]
            if t.isdigit():
                args.append(_num(t))
            elif len(t) == 1 and t.islower() and t not in "ei":
                sub = self.at(j + 1) or ""
                if sub.startswith("_"):
                    args.append(self.named(_sub_name(t, sub)))
                    j += 1
                else:
                    args.append(t)
            else:
                raise _Unsupported
            nxt = self.at(j + 1)
            j += 2
            if nxt == ")":
                break
            if nxt != ",":
                raise _Unsupported
        else:
            raise _Unsupported
        self.i = j
        ident = f"_f{len(self.symbols) + len(self.functions)}"
        self.functions[ident] = name
        return f"{ident}({', '.join(args)})"

    def group(self) -> str:
        """One argument: ``{...}``, ``(...)`` or a single digit/letter/command operand."""
        t = self.take()
        if t in ("{", "("):
            return f"({self.until('}' if t == '{' else ')')})"
        if re.fullmatch(r"\d|[a-zA-Z]", t):
            return self.letter(t) if t.isalpha() else _num(t)
        if t == "\\pi":
            return "pi"
        raise _Unsupported

    def until(self, close: str) -> str:
        code = self.expr(stops=(close,))
        self.take(close)
        return code

    def args(self) -> list[str]:
        """``(a, b, ...)`` after ``\\min``/``\\max``."""
        self.take("(")
        out = [self.expr(stops=(",", ")"))]
        while self.peek() == ",":
            self.take()
            out.append(self.expr(stops=(",", ")")))
        self.take(")")
        return out

    def run(self) -> str:
        """A bare argument: the implicit product of operands up to a sign, ``\\cdot``/``\\times``,
        a closing bracket or another function; ``(`` inside it, or ``/``, ``:``, ``*`` after it
        (which the full parser takes into the argument) are left to the full parser."""
        parts: list[str] = []
        while (t := self.peek()) not in _STOPS and not (t[1:] in FUNCS or t in _ENDS_RUN):
            if parts and t == "(":
                raise _Unsupported  # "\sin x (1)": the full parser calls x
            nxt = self.at(self.i + 1) or ""
            if (t[0].isdigit() or t[0] == ".") and (nxt == "\\frac" or nxt[:1] in (".", *"0123456789")):
                raise _Unsupported  # "\\cos 3\\frac{1}{4}" (a mixed number there), "\\sin 2 3"
            parts.append(self.postfix(self.operand(in_run=True)))
        if not parts or self.peek() in ("/", ":", "*", "\\div"):
            raise _Unsupported  # "\\sin x / y": the full parser reads sin(x/y); left to it
        return "(" + " * ".join(parts) + ")"

    def paren_or_run(self) -> str:
        if self.peek() == "(":
            self.take()
            return f"({self.until(')')})"
        return self.run()

    def function(self, t: str) -> str:
        name = FUNCS[t[1:]]
        base = ""
        if t == "\\log" and (self.peek() or "").startswith("_"):
            sub = self.take()
            inner = sub[2:-1].strip() if sub.startswith("_{") else sub[1:]
            if not inner.isdigit():
                raise _Unsupported
            name, base = "log", f", {_num(inner)}"
        power = ""
        if self.peek() == "^":
            self.take()
            power = self.group()
        arg = self.paren_or_run()
        call = f"{name}({arg}{base})"
        return f"({call})**({power})" if power else call

    def big_operator(self, t: str) -> str:
        """``\\sum_{k=a}^{b} body``: the body is a parenthesis or a bare argument."""
        self.take("_")
        self.take("{")
        var = self.take()
        if not (len(var) == 1 and var.isalpha()) or (self.peek() or "").startswith("_"):
            raise _Unsupported
        self.take("=")
        lo = self.until("}")
        self.take("^")
        hi = self.group()
        body = self.paren_or_run()
        op = "Sum" if t == "\\sum" else "Product"
        return f"{op}({body}, ({self.letter(var)}, {lo}, {hi}))"

    def operand(self, in_run: bool = False) -> str:
        t = self.take()
        if t in ("{", "("):
            return f"({self.until('}' if t == '{' else ')')})"
        if t == "|":
            return f"Abs({self.until('|')})"
        if t in _PAIRS:
            close, fn = _PAIRS[t]
            return f"{fn}({self.until(close)})"
        if t == "\\frac":
            return f"(({self.group()})/({self.group()}))"
        if t == "\\binom":
            return f"binomial({self.group()}, {self.group()})"
        if t == "\\sqrt":
            if self.peek() == "[":
                self.take()
                n = self.until("]")
                return f"root({self.group()}, {n})"
            return f"sqrt({self.group()})"
        if t in ("\\min", "\\max"):
            return f"{t[1:].capitalize()}({', '.join(self.args())})"
        if t[1:] in FUNCS and not in_run:
            return self.function(t)
        if t in ("\\sum", "\\prod") and not in_run:
            return self.big_operator(t)
        if t == "\\pi":
            if self.peek() == "(":
                raise _Unsupported  # "\\pi (x)": a function application there
            return "pi"
        if t[1:] in _GREEK:
            if self.peek() == "(":
                raise _Unsupported
            sub = self.take() if (self.peek() or "").startswith("_") else None
            if self.peek() == "(":
                raise _Unsupported
            return self.named(_sub_name(t[1:], sub) if sub else t[1:])
        if t == "\\infty":
            return "oo"
        if t[0].isdigit() or t[0] == ".":
            if t.isdigit() and re.fullmatch(r"_\{?\d+\}?", self.peek() or ""):
                self.take()  # "204_5": the full parser drops a base subscript
            return _num(t)
        if len(t) == 1 and t.isalpha():
            if self.peek() == "(" and in_run:
                raise _Unsupported  # "\\tan x T(12)": a product there
            if self.peek() == "(":
                call = self.call(t)
                if call is not None:
                    return call
            return self.letter(t)
        raise _Unsupported

    def postfix(self, chunk: str) -> str:
        while self.peek() in ("^", "!"):
            if self.take() == "!":
                chunk = f"factorial({chunk})"
            else:
                chunk = f"({chunk})**({self.group()})"
        return chunk

    def expr(self, stops: tuple[str, ...] = ()) -> str:
        """Terms joined by signs; an implicit product binds tighter than ``/`` and ``:`` there
        (``x/2y`` is ``x/(2y)``), so each run of juxtaposed operands is one parenthesised unit."""
        out: list[str] = []
        run: list[str] = []
        last_number = False

        def flush() -> None:
            if run:
                out.append(run[0] if len(run) == 1 else "(" + " * ".join(run) + ")")
                run.clear()

        while (t := self.peek()) is not None and not (t in stops and (run or t != "|")):
            if t in ("+", "-", *_PRODUCT_SIGNS):
                self.take()
                flush()
                out.append({"\\cdot": "*", "\\times": "*", "\\div": "/", ":": "/"}.get(t, t))
                continue
            if t == "\\ldots":
                # "a + \ldots + b", "(v - a_1) \ldots (v - a_n)": the full parser drops it
                after = self.at(self.i + 1)
                if not (
                    (not run and out and out[-1] == "+" and after == "+") or (run and after not in _STOPS)
                ):
                    raise _Unsupported
                self.take()
                continue
            if t in (")", "}", "]", "^", "!", ",", "=", "\\rfloor", "\\rceil"):
                raise _Unsupported
            if run and last_number and (t[0].isdigit() or t[0] == "." or t == "\\frac"):
                raise _Unsupported  # "1 000", "2 3", "2\frac{1}{2}" after an implicit product
            last_number = t[0].isdigit() or t[0] == "."
            if (
                t[0].isdigit()
                and not run
                and (not out or out[-1] in "+-")
                and self.at(self.i + 1) == "\\frac"
            ):
                run.append(self.mixed())
            elif t.isdigit() and not run and (not out or out[-1] in "+-") and self.mixed_slash():
                run.append(self.take_mixed_slash())
            else:
                run.append(self.postfix(self.operand()))
        flush()
        return " ".join(out)

    def mixed_slash(self) -> bool:
        """``3 1/2`` (two numbers apart, then ``/``) ending a term, its fraction proper: a mixed number."""
        n, slash, d = (self.at(self.i + k) or "" for k in (1, 2, 3))
        if not (n.isdigit() and d.isdigit() and slash == "/" and n[0] != "0" and int(n) < int(d)):
            return False
        return self.at(self.i + 4) in _STOPS

    def take_mixed_slash(self) -> str:
        whole, num, _, den = self.toks[self.i : self.i + 4]
        self.i += 4
        return f"({_num(whole)} + {_num(num)} / {_num(den)})"

    def mixed(self) -> str:
        """``2\\frac{1}{2}`` ending a term is a mixed number (the full parser's reading)."""
        whole, _, _, num, _, _, den, _ = self.toks[self.i : self.i + 8]
        shape = ["{", num, "}", "{", den, "}"]
        if not (num.isdigit() and den.isdigit()) or self.toks[self.i + 2 : self.i + 8] != shape:
            raise _Unsupported
        self.i += 8
        if not whole.isdigit() or self.peek() not in _STOPS:
            raise _Unsupported  # "2 \\frac{1}{2} x" is a product there
        return f"({_num(whole)} + {_num(num)} / {_num(den)})"


@dataclass(frozen=True)
class Reading:
    """Python code for an expression: ``_n('12')`` is a number literal, ``E`` Euler's number,
    ``pi``, ``oo``; ``letters`` the bare one-letter symbols in it, ``symbols`` / ``functions`` the
    placeholder identifiers of named symbols (``x_1``, ``lambda``) and applied functions."""

    code: str
    letters: frozenset[str]
    symbols: dict[str, str]
    functions: dict[str, str]

    def names(self) -> set[str]:
        """Every symbol name in the expression (``x``, ``x_1``, ``lambda``)."""
        return set(self.letters) | set(self.symbols.values())


def read(s: str) -> Reading | None:
    """The code for ``s`` when the reader covers it, or None (the full parser is needed)."""
    tokens = _TOKEN.findall(s)
    if "".join(tokens) != s or not tokens:
        return None
    reader = _Reader(tokens)
    try:
        code = reader.expr()
        if reader.peek() is not None or not code:
            return None
    except (_Unsupported, IndexError, ValueError):
        return None
    letters = frozenset(re.findall(r"(?<![a-zA-Z_])[a-z](?![a-zA-Z_(])", code))
    return Reading(code, letters, reader.symbols, reader.functions)
