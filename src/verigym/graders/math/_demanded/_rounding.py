r"""Rounding a reference to the places a question demands ("to the nearest tenth"), for ``_forms``.

``round_reference`` rounds each number of a reference (a list's items, ``name = value``; the
decoration kept) half up, as ``exact_decimal:N`` does; other shapes stay as written. The value
comes from a rounder: ``fast_round`` here (exact for rationals, floats with error bounds
otherwise, None where they cannot vouch for the digits: the in-process paths then defer), or the
full check's sympy rounder (``_check``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from verigym.graders.math._exact_path._rational import exact_number
from verigym.graders.math._float_path._bounded import NAMES, Bounded, Unsure
from verigym.graders.math._shared._norm import split_decor, split_top
from verigym.graders.math._shared._reader import read
from verigym.graders.math._shared._rules import NUM_RE, THOUSANDS, bracketed, strip_answer

__all__ = ["Rounder", "fast_round", "round_fraction", "round_reference"]

Rounder = Callable[[str, int], "str | None"]


def round_reference(gold: str, places: int, rounder: Rounder, strict: bool) -> str | None:
    """``gold`` with each number (a list's items, ``name = value``) rounded to ``places``; as
    written where its shape is not that; None when ``strict`` and a number could not be rounded."""
    s = strip_answer(gold)
    if THOUSANDS.fullmatch(s):
        s = s.replace(",", "").replace(" ", "")
    out = []
    for part in split_top(s, (",",)):
        sides = split_top(part, ("=",))
        value = sides[-1]
        if not value or bracketed(value) is not None or re.search(r"[<>]|\\(?:le|ge|ne|pm|mp)\b", value):
            return gold
        core, decor = split_decor(value)
        literal = rounder(core.strip(), places)
        if literal is None:
            return None if strict else gold
        tail = ("\\%" if decor.percent else "") + ("^\\circ" if decor.degree else "")
        tail += f" \\text{{{decor.unit}}}" if decor.unit else ""
        out.append(" = ".join([*sides[:-1], literal + tail]))
    return ", ".join(out)


def round_fraction(v: Fraction, places: int) -> str:
    """``v`` rounded half up to ``places`` decimal places (negative: tens, hundreds), as a literal."""
    scaled = v * Fraction(10) ** places
    return _literal((scaled.numerator * 2 + scaled.denominator) // (2 * scaled.denominator), places)


def _literal(k: int, places: int) -> str:
    if places <= 0:
        return str(k * 10 ** (-places))
    whole, frac = divmod(abs(k), 10**places)
    return f"{'-' if k < 0 else ''}{whole}.{frac:0{places}d}"


_GLOBALS: dict[str, Any] = {"__builtins__": {}, **NAMES}


def fast_round(core: str, places: int) -> str | None:
    """The in-process rounder: exact for rationals, floats with error bounds otherwise; None
    where neither can vouch for the rounded digits (a value near a half, letters, unknowns)."""
    v = Fraction(core) if NUM_RE.match(core) else exact_number(core)
    if v is not None:
        return round_fraction(v, places)
    reading = read(core)
    if reading is None or reading.names() or reading.functions:
        return None
    try:
        b = eval(compile(reading.code, "<latex>", "eval"), _GLOBALS, {})
    except (
        Unsure,
        NameError,
        TypeError,
        ValueError,
        ZeroDivisionError,
        OverflowError,
        RecursionError,
        AttributeError,
    ):
        return None
    if not isinstance(b, Bounded) or b.cx or b.z.imag != 0:
        return None
    scale = 10.0**places
    x, err = b.z.real * scale + 0.5, (b.e + 2**-48 * abs(b.z.real)) * scale + 1e-9
    k = math.floor(x)
    if x - k <= err or k + 1 - x <= err:
        return None
    return _literal(k, places)
