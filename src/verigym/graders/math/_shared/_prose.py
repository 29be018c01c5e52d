"""Prose answers for the math grader: when a short answer is what a reference sentence states.

HardVerify-style references are often sentences ("Kafelnikov served in the first game", "The
transformed function f(x+1)-1 is odd.") and a model answers with the deciding word ("Kafelnikov",
"odd"). Rules, each refusing a sentence with a negation (``not``, ``no``, ``never``, ``n't``):

* every content word of a short answer (at most three words, one of three or more letters) is a
  word of the reference sentence (four or more words): "the round trip" in "More time is required
  for the round trip on the river."; "the lake trip" is not;
* "infinitely many" / "infinite" / "infinity" is the value infinity;
* "less than zero" / "negative" and "greater than zero" / "positive" state the sign of the
  answer's relation (``f(x_1) + f(x_2) < 0``);
* a sentence with exactly one number states that number ("each room costs 240 yuan" = 240).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sympy

__all__ = ["prose_sign", "prose_value", "says"]

_NEGATION = re.compile(r"\b(?:not|no|never|none|neither|nor|cannot)\b|n't\b", re.I)
_STOP = {"the", "a", "an", "of", "in", "on", "at", "to", "is", "are", "and", "or", "it", "its", "by"}
_INFINITE = {
    "infinitely many",
    "infinite",
    "infinity",
    "infinitely many solutions",
    "infinitely many answers",
}
_SIGNS = {"less than zero": "<", "negative": "<", "greater than zero": ">", "positive": ">"}


def _words(t: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", t.lower())


def says(sentence: str, short: str) -> bool:
    """Does the reference ``sentence`` (normalised text) state the short answer ``short``?"""
    ref, ans = _words(sentence), [w for w in _words(short) if w not in _STOP]
    if len(ref) < 4 or not ans or len(_words(short)) > 3 or _NEGATION.search(sentence):
        return False
    if not any(len(w) >= 3 and w.isalpha() for w in ans):
        return False
    return all(w in ref for w in ans)


def prose_value(text: str) -> sympy.Expr | None:
    """The single value a sentence states: infinity, or its one number; else None."""
    import sympy  # not at import: the text path (``_text``) runs without sympy

    t = " ".join(_words(text))
    if t in _INFINITE:
        return sympy.oo
    if _NEGATION.search(text) or len(_words(text)) < 3:
        return None
    nums = re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", text)
    if len(nums) != 1:
        return None
    f = Fraction(nums[0])
    return sympy.Rational(f.numerator, f.denominator)


def prose_sign(text: str) -> str | None:
    """``<`` or ``>`` when the sentence says its subject is negative / positive."""
    if _NEGATION.search(text):
        return None
    t = " ".join(_words(text))
    found = {op for phrase, op in _SIGNS.items() if re.search(rf"\b{phrase}\b", t)}
    return found.pop() if len(found) == 1 else None
