"""Prose answers decided without sympy: a reference and an answer that the full check reads as
text on both sides (``_values.Text``, or lists of them) and compares as text.

The full check (``_parse``) reads an item as text when, after its clean-up, it is prose
(``_rules.is_text``: a ``\\text{}`` without digits, or two words and no operators) or one word
(``_rules.is_word``); text equals text when the normalised strings match or the reference sentence
states the short answer (``_prose.says``); a list compares as a multiset. This path follows
``_parse._parse_list`` / ``_parse_item`` / ``_parse_atom`` up to that point and returns None
wherever the full check could read anything else: digits (a lone number in a bare text is the
answer there), equations, relations, brackets, sets, decorations, ``\\pm``, ``;``, several boxes;
a time of day (``12:00``) is text there too.
"""

from __future__ import annotations

import re

from verigym.graders.math._shared._extract import NUMBER_RE
from verigym.graders.math._shared._matching import multiset_eq
from verigym.graders.math._shared._norm import Decor, split_decor, split_top
from verigym.graders.math._shared._prose import says
from verigym.graders.math._shared._rules import (
    Answers,
    bracketed,
    is_text,
    is_word,
    list_words,
    norm_text,
    readings_prefix,
    strip_answer,
    strip_item,
)

__all__ = ["text_decide"]

_TIME = re.compile(r"\d{1,2}:\d{2}")  # _parse._parse_item: a time of day, not a ratio

_NOT_TEXT = re.compile(
    r"\d|[=<>;|]|\\(?:le|ge|ne|pm|mp|approx|in|cup|setminus|begin|circ)(?![a-zA-Z])|^\s*\\\{"
)


def _item(s: str) -> str | None:
    """``_parse._parse_item`` of an item the full check reads as text: its normalised text."""
    s = strip_item(s)
    if _NOT_TEXT.search(s) or bracketed(s) is not None:
        return None
    core, decor = split_decor(s)
    if core.strip() != s.strip() or decor != Decor() or not (is_text(core) or is_word(core)):
        return None
    return norm_text(core)


def _value(s: str) -> list[str] | None:
    """``_parse.parse`` when every item is text: the items' texts, else None."""
    s = strip_answer(s)
    if _TIME.fullmatch(s) and strip_item(s) == s:
        return [s]  # a time of day is text there, kept as written
    if not s or _NOT_TEXT.search(s) or readings_prefix(s) != ([], False):
        return None
    s = list_words(s)
    parts = [re.sub(r"^(?:and|or)\s+", "", p) for p in split_top(s, (",", " and ", " or ")) if p]
    items = [_item(p) for p in parts]
    return None if not items or any(t is None for t in items) else [t for t in items if t is not None]


def _eq(g: str, p: str) -> bool:
    """``_compare.equal`` of two texts."""
    return g == p or says(g, p)


def text_decide(ans: Answers) -> tuple[bool, str, str | None] | None:
    """The full check's verdict when both answers are text, else None (mode ``equivalent``)."""
    if ans.boxes > 1 or (ans.how == "bare" and len(NUMBER_RE.findall(ans.answer)) == 1):
        return None  # a lone number in a bare text answer is the answer there (``_check._compare``)
    g = _value(ans.gold)
    p = None if g is None else _value(ans.answer)
    if g is None or p is None:
        return None
    if len(g) == 1 and len(p) == 1:
        same = _eq(g[0], p[0])
    elif len(g) > 1 and len(p) > 1:
        same = multiset_eq(g, p, _eq)
    else:
        same = False  # a list against one text: ``_text_of`` of a list is None
    return (
        (True, "equivalent", ans.answer) if same else (False, "not equivalent to the reference", ans.answer)
    )
