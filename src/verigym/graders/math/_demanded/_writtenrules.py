r"""The form rules on a written answer (``_written``'s tree), for ``_forms``: no sympy, no values.

``check_written(tree, raw, check)`` says why the written form breaks one rule, or None:

* ``lowest``: every fraction is reduced, the sign anywhere: the integer content of the numerator
  (the gcd of its terms' integer coefficients, each the product of the term's integer factors, so
  ``\frac{3b^2 \cdot 2a}{4}`` has content 6) and of the denominator are coprime; no denominator 1,
  no fraction or decimal inside a fraction; a mixed number's fraction too;
* ``undone``: no arithmetic left between plain numbers (integers, decimals, fractions of
  integers, mixed numbers): ``2 + 3``, ``2 \cdot 3``, ``2^3``, ``3 + \frac{1}{2}``; a product of
  monomials with split coefficients (``3b^2 \cdot 2a``) is not undone arithmetic;
* ``squarefree``: an integer radicand has no square factor (no cube factor under a cube root...):
  ``\sqrt{8}``, ``\sqrt{4}``;
* ``rationalized``: no radical or fractional power in a denominator, no fraction under a radical,
  no radical to a negative power (``2^{-1/2}``, ``\sqrt{2}^{-1}``);
* ``no_decimal``: no decimal literal (``0.5``, ``.5``);
* ``not_mixed``: no mixed number; ``mixed``: no fraction of integers with a numerator larger than
  its denominator (a mixed number's fraction part proper);
* ``decimal``: no fraction, mixed number, radical or pi (a decimal or an integer);
* ``places(n)``: no number literal with more than n decimal places, unless the extra digits are 0.

Where the tree is None (not read), every rule but ``no_decimal`` (a look at the digits) passes.
"""

from __future__ import annotations

import re
from math import gcd

from verigym.graders.math._demanded._written import Node

__all__ = ["check_written"]

_MAX_RADICAND = 10**8  # larger radicands are not factored (the rule passes)


def _walk(n: Node | None) -> list[Node]:
    if n is None:
        return []
    out = [n]
    for k in n.kids:
        out += _walk(k)
    return out


def _has(n: Node | None, kinds: tuple[str, ...]) -> bool:
    return any(m.kind in kinds for m in _walk(n))


def _decimal(n: Node | None) -> bool:
    return any(m.kind == "num" and "." in m.text for m in _walk(n))


def _unsigned(n: Node) -> Node:
    while n.kind == "neg" and n.kids[0] is not None:
        n = n.kids[0]
    return n


def _int(n: Node | None) -> int | None:
    """The integer a node is as written (``4``, ``-4``, ``(4)``), else None."""
    if n is None:
        return None
    n = _unsigned(n)
    return int(n.text) if n.kind == "num" and n.text.isdigit() else None


def _content(n: Node | None) -> int:
    """The integer content: a term's integer factors multiplied, a sum's terms' gcd (1 where unknown)."""
    if n is None:
        return 1
    if n.kind == "num":
        return int(n.text) if n.text.isdigit() else 1
    if n.kind == "neg":
        return _content(n.kids[0])
    if n.kind in ("mul", "run"):
        out = 1
        for k in n.kids:
            out *= _content(k)
            if out.bit_length() > 256:
                return 1
        return out
    if n.kind == "add":
        out = 0
        for k in n.kids:
            out = gcd(out, _content(k))
        return out or 1
    if n.kind == "pow":
        base, exp = _content(n.kids[0]), _int(n.kids[1])
        if exp is not None and exp <= 64 and n.kids[1] is not None and n.kids[1].kind == "num":
            return base**exp if (base.bit_length() * exp) <= 256 else 1
    return 1


def _plain(n: Node | None) -> bool:
    """A plain number: an integer, a decimal, a fraction of integers or a mixed number."""
    if n is None:
        return False
    n = _unsigned(n)
    if n.kind == "num":
        return True
    if n.kind == "frac":
        return all(_int(k) is not None for k in n.kids)
    return n.kind == "mixed"


def _show(n: Node | None) -> str:
    """A short rendering of a node for the reasons (``2/4``, ``\\sqrt{8}``)."""
    if n is None:
        return ""
    if n.kind in ("num", "sym"):
        return n.text
    if n.kind == "neg":
        return "-" + _show(n.kids[0])
    if n.kind == "frac":
        return f"{_show(n.kids[0])}/{_show(n.kids[1])}"
    if n.kind == "mixed":
        return f"{_show(n.kids[0])} {_show(n.kids[1])}"
    if n.kind == "root":
        index = "" if n.kids[0] is None else f"[{_show(n.kids[0])}]"
        return f"\\sqrt{index}{{{_show(n.kids[1])}}}"
    if n.kind == "pow":
        return f"{_show(n.kids[0])}^{{{_show(n.kids[1])}}}"
    joiner = {"add": " + ", "mul": " * "}.get(n.kind, "")
    return "(" + joiner.join(_show(k) for k in n.kids) + ")" if n.kind in ("add", "mul", "run") else n.text


def _lowest(tree: Node) -> str | None:
    for f in _walk(tree):
        if f.kind != "frac":
            continue
        num, den = f.kids
        if _has(num, ("frac", "mixed")) or _has(den, ("frac", "mixed")):
            return f"{_show(f)} has a fraction inside a fraction"
        if _decimal(num) or _decimal(den):
            return f"{_show(f)} has a decimal inside a fraction"
        if _int(den) == 1:
            return f"{_show(f)} has the denominator 1"
        common = gcd(_content(num), _content(den))
        if common > 1:
            return f"{_show(f)} is not in lowest terms (common factor {common})"
    return None


def _undone(tree: Node) -> str | None:
    for n in _walk(tree):
        if n.kind in ("add", "mul", "run") and sum(_plain(k) for k in n.kids) >= 2:
            return f"arithmetic left undone in {_show(n)}"
        if n.kind == "pow" and _plain(n.kids[0]) and _int(n.kids[1]) is not None:
            return f"arithmetic left undone in {_show(n)}"
    return None


def _squarefree(tree: Node) -> str | None:
    for n in _walk(tree):
        if n.kind != "root":
            continue
        index = 2 if n.kids[0] is None else _int(n.kids[0])
        radicand = _int(n.kids[1])
        if index is None or index < 2 or radicand is None or radicand > _MAX_RADICAND or radicand < 2:
            continue
        k = 2
        while k**index <= radicand:
            if radicand % k**index == 0:
                return f"{_show(n)} is not simplified ({k}^{index} divides {radicand})"
            k += 1
    return None


def _rationalized(tree: Node) -> str | None:
    for n in _walk(tree):
        if n.kind == "frac" and any(
            m.kind == "root" or (m.kind == "pow" and (_has(m.kids[1], ("frac",)) or _decimal(m.kids[1])))
            for m in _walk(n.kids[1])
        ):
            return f"a radical in the denominator of {_show(n)}"
        if n.kind == "root" and _has(n.kids[1], ("frac",)):
            return f"a fraction under the radical {_show(n)}"
        exp = n.kids[1] if n.kind == "pow" else None
        if (
            exp is not None
            and exp.kind == "neg"
            and (_has(n.kids[0], ("root",)) or _has(exp, ("frac",)) or _decimal(exp))
        ):
            return f"{_show(n)} is a radical in a denominator"
    return None


def _mixed(tree: Node) -> str | None:
    inside = {id(m.kids[1]) for m in _walk(tree) if m.kind == "mixed"}
    for n in _walk(tree):
        if n.kind == "frac" and _plain(n):
            a, b = _int(n.kids[0]), _int(n.kids[1])
            if a is not None and b is not None and a > b > 0:
                return (
                    f"the fraction part of a mixed number, {_show(n)}, is not proper"
                    if id(n) in inside
                    else f"{_show(n)} is an improper fraction, not a mixed number"
                )
    return None


def _places(tree: Node, limit: int) -> str | None:
    for n in _walk(tree):
        if n.kind == "num" and "." in n.text:
            extra = n.text.split(".")[1][max(limit, 0) :]
            if extra.strip("0"):
                return f"{n.text} is written with {len(n.text.split('.')[1])} decimal places"
    return None


def check_written(tree: Node | None, raw: str, check: str, places: int = 0) -> str | None:
    """Why the written expression ``raw`` (read as ``tree``) breaks ``check``, or None."""
    if check == "no_decimal":
        return f"{raw} is a decimal" if re.search(r"\d\.\d|(?<![\d.])\.\d", raw) else None
    if tree is None:
        return None
    if check == "lowest":
        return _lowest(tree)
    if check == "undone":
        return _undone(tree)
    if check == "squarefree":
        return _squarefree(tree)
    if check == "rationalized":
        return _rationalized(tree)
    if check == "not_mixed":
        return f"{raw} is a mixed number" if _has(tree, ("mixed",)) else None
    if check == "mixed":
        return _mixed(tree)
    if check == "decimal":
        if _has(tree, ("frac", "mixed", "root")) or any(
            m.kind == "sym" and m.text == "\\pi" for m in _walk(tree)
        ):
            return f"{raw} is not written as a decimal"
        return None
    if check == "places":
        return _places(tree, places)
    raise ValueError(f"unknown form check {check!r}")
