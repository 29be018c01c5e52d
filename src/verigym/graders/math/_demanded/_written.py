r"""How an answer is written, for the math grader's form rules (``_forms``): no sympy, no values.

``read_written(core)`` reads one cleaned expression (no list, no relation, no decoration) into a
small tree that keeps what the value tree forgets: ``\frac`` and ``a/b`` fractions with their
numerator and denominator as written (the sign may sit anywhere: ``-2/4``, ``\frac{-2}{4}``,
``-\frac{2}{4}``, ``(-2)/4``), mixed numbers (``3\frac{1}{2}``, ``3 \frac12``, ``3 1/2``), radicals
with their index and radicand, powers, decimal literals, explicit products (``\cdot``, ``\times``,
``*``) apart from implicit ones (``3b^2``), and sums. Implicit products bind tighter than ``/``
(``1/2x`` is ``1/(2x)``), as in the grader's reader. What it cannot read gives None, and the
rules that need the tree then pass (a form rule must never reject what it cannot see).
The rules on that tree are in ``_writtenrules``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from verigym.graders.math._shared._cursor import Cursor, scan

__all__ = ["MAX_WRITTEN", "Node", "read_written"]

MAX_WRITTEN = 400  # longer expressions are not read (their rules pass)
_TOKEN = re.compile(r"(\s*)(\d+\.\d*|\.\d+|\d+|\\[a-zA-Z]+|\\[{}|]|[a-zA-Z]|[-+*/^_(){}\[\]!|:'])")
_SIGNS = ("+", "-", "\\pm", "\\mp")
_PRODUCT = ("*", "\\cdot", "\\times")
_DIVIDE = ("/", "\\div", ":")
_STOP = (None, *_SIGNS, *_PRODUCT, *_DIVIDE, ")", "}", "]", "|", "\\}")
_FUNCS = {"sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "ln", "log", "exp"}
_WRAPPERS = {"text", "mathrm", "operatorname", "mathbf", "mathit", "boldsymbol"}


@dataclass(frozen=True)
class Node:
    """One piece of a written answer: ``kind`` is num, sym, frac, mixed, root, pow, mul, run, add,
    neg or call; ``text`` the literal (num, sym); ``kids`` the parts (frac: numerator and
    denominator; mixed: whole and fraction; root: index or None and radicand; pow: base and
    exponent; mul: explicit factors; run: implicit factors; add: terms; neg, call: the operand)."""

    kind: str
    text: str = ""
    kids: tuple[Node | None, ...] = ()


class _Unread(Exception):
    pass


class _Reader(Cursor):
    stop = _Unread

    def __init__(self, s: str) -> None:
        found = scan(_TOKEN, s, _Unread)
        super().__init__([m.group(2) for m in found])
        self.spaced = [bool(m.group(1)) for m in found]

    def expr(self) -> Node:
        terms: list[Node] = []
        sign = self.take() if self.peek() in _SIGNS else "+"
        while True:
            term = self.term()
            terms.append(Node("neg", kids=(term,)) if sign == "-" else term)
            if self.peek() not in _SIGNS:
                break
            sign = self.take()
        return terms[0] if len(terms) == 1 else Node("add", kids=tuple(terms))

    def term(self) -> Node:
        mixed = self.mixed_slash()
        if mixed is not None:
            return mixed
        factors = [self.run()]
        while self.peek() in _PRODUCT or self.peek() in _DIVIDE:
            op = self.take()
            right = self.run()
            if op in _DIVIDE:
                left = factors[0] if len(factors) == 1 else Node("mul", kids=tuple(factors))
                factors = [Node("frac", "/", (left, right))]
            else:
                factors.append(right)
        return factors[0] if len(factors) == 1 else Node("mul", kids=tuple(factors))

    def mixed_slash(self) -> Node | None:
        """``3 1/2`` ending a term: a whole number, a space, then a fraction of integers."""
        w, n, slash, d = (self.peek(k) for k in range(4))
        if not (w and n and d and w.isdigit() and n.isdigit() and d.isdigit() and slash == "/"):
            return None
        if not self.spaced[self.i + 1] or self.peek(4) not in _STOP:
            return None
        self.i += 4
        return Node("mixed", kids=(Node("num", w), Node("frac", "/", (Node("num", n), Node("num", d)))))

    def run(self) -> Node:
        factors: list[Node] = []
        while self.peek() not in _STOP:
            if factors and factors[-1].kind == "num" and self.peek() == "\\frac" and len(factors) == 1:
                frac = self.factor()
                if self.peek() in _STOP and _plain_int_frac(frac):
                    return Node("mixed", kids=(factors[0], frac))
                factors.append(frac)
                continue
            factors.append(self.factor())
        if not factors:
            raise _Unread
        return factors[0] if len(factors) == 1 else Node("run", kids=tuple(factors))

    def factor(self) -> Node:
        node = self.atom()
        while self.peek() in ("^", "!", "_", "'"):
            t = self.take()
            if t == "^":
                node = Node("pow", kids=(node, self.group()))
            elif t == "_":
                self.group()  # a subscript names the symbol: it is not a factor
            else:
                node = Node("call", t, (node,))
        return node

    def group(self) -> Node:
        """An argument: ``{...}``, or one token (``x^2``, ``\\frac12`` after clean-up)."""
        if self.peek() == "{":
            self.take()
            inner = self.expr()
            self.take("}")
            return inner
        if self.peek() == "(":
            return self.atom()
        t = self.take()
        if t.isdigit() and len(t) > 1:  # "x^23" is x^2 times 3 in LaTeX
            self.toks.insert(self.i, t[1:])
            self.spaced.insert(self.i, False)
            return Node("num", t[0])
        if t[0].isdigit() or t[0] == ".":
            return Node("num", t)
        if t.isalpha() or t.startswith("\\"):
            return Node("sym", t)
        raise _Unread

    def atom(self) -> Node:
        t = self.take()
        if t[0].isdigit() or t[0] == ".":
            return Node("num", t)
        if t in ("(", "{", "["):
            inner = self.expr()
            self.take({"(": ")", "{": "}", "[": "]"}[t])
            return inner
        if t == "|":
            inner = self.expr()
            self.take("|")
            return Node("call", "abs", (inner,))
        if t == "\\frac":
            return Node("frac", "\\frac", (self.group(), self.group()))
        if t == "\\sqrt":
            index = None
            if self.peek() == "[":
                self.take()
                index = self.expr()
                self.take("]")
            return Node("root", kids=(index, self.group()))
        if t[1:] in _WRAPPERS:
            self.group()
            return Node("sym", t)
        if t[1:] in _FUNCS:
            if self.peek() == "^":
                self.take()
                self.group()
            return Node("call", t, (self.factor(),))
        if t.isalpha() or t.startswith("\\"):
            return Node("sym", t)
        raise _Unread


def _plain_int_frac(n: Node) -> bool:
    return n.kind == "frac" and all(k is not None and k.kind == "num" and k.text.isdigit() for k in n.kids)


def read_written(core: str) -> Node | None:
    """The written-form tree of one expression, or None when it cannot be read (or is longer than
    ``MAX_WRITTEN`` characters: the rules walk the tree in quadratic time)."""
    if len(core) > MAX_WRITTEN:
        return None
    try:
        reader = _Reader(core)
        if not reader.toks:
            return None
        node = reader.expr()
        return node if reader.peek() is None else None
    except (_Unread, RecursionError):
        return None
