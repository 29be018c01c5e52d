r"""The form a question demands, read from its text, and enforced on how the answer is written.

"How much change from a dollar for a fifty-cent drink?": 1/2, 2/4 and 0.5 are all right. "Give
it in simplest form": only 1/2 is. ``demanded(mode, question)`` reads the demand; ``enforce``
checks the extracted answer's written form (``_written``, no sympy) before its value is compared,
and every rejection names the demand, where it came from and the rule broken
("not in the demanded form (common fraction, from the question): 0.5 is a decimal").

Phrases (case-insensitive) and the rules they demand:

=====================================================  =========================================
phrase in the question                                  rules on the written answer
=====================================================  =========================================
"simplest form", "lowest terms", "reduced form",        lowest terms (sign anywhere), no
"fully reduced" (and ``mode="simplest_form"``)          arithmetic left between plain numbers,
                                                        square-free radicands, no radical in a
                                                        denominator, no decimal, exact
"common fraction"                                       no decimal, no percent, no mixed number,
                                                        lowest terms (competition convention)
"as a fraction", "in fraction form" (not "as a          no decimal, no percent, no mixed number
fraction of ...")
"improper fraction"                                     no decimal, no mixed number, lowest terms
"mixed number" / "mixed numeral"                        no decimal, no improper fraction (a
                                                        mixed number's fraction part proper),
                                                        lowest terms
"rationalize the denominator", "rational denominator"   no radical in a denominator, no fraction
                                                        under a radical, exact
"simplest radical form"                                 as above, plus square-free radicands and
                                                        lowest terms
"exact value/answer/form", "do not approximate",        exact: no decimal that is only a rounding
"no approximation", "do not round", "in terms of pi",   of the reference (an exact decimal passes)
"leave ... exact"
"as a decimal", "in decimal form"                       a decimal or an integer: no fraction,
                                                        mixed number, radical, pi or percent
"to the nearest tenth / hundredth / thousandth /        a decimal with at most that many places
ten-thousandth / whole number / integer / ten /         (more digits only as trailing zeros); the
hundred / cent / dollar / percent / degree",            reference is rounded half up to them
"to N decimal places"                                   before the values are compared
=====================================================  =========================================

A phrase after a negation in its sentence ("not as a decimal", "rather than a mixed number",
"do not use an improper fraction") demands nothing. Rules of combination: an explicit mode wins
over the question (``exact_decimal:N`` alone decides the written form; with ``simplest_form``
the question's roundings and decimal demands are dropped; ``with_units`` and ``equivalent``, the
default, take the question's demands). Words
asking for an approximation ("approximately", "estimate", "round ... to") drop the exact rule. A
question that asks both for a rounding or decimal and for an exact form is settled by the
reference: decimals on the reference's side keep the rounding, else the exact form. Mixed and
improper demanded together cancel. A rule the reference itself breaks is not enforced (the
reference is the worked example of the demanded form), except the exact rule, and a decimal form
or rounding unless the reference is not a number (``\frac{3}{8}`` "as a decimal" is 0.375).
Value equality is untouched: ``3b^2 \cdot 2a`` is ``6ab^2`` in every mode that compares values;
the rules see only fractions, radicals, decimals and sums of plain numbers, never the order of
factors.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from verigym.graders.math._demanded._rounding import Rounder, round_reference
from verigym.graders.math._demanded._written import read_written
from verigym.graders.math._demanded._writtenrules import check_written
from verigym.graders.math._exact_path._rational import exact_number
from verigym.graders.math._shared._mode import parse_mode
from verigym.graders.math._shared._norm import Decor, split_decor, split_top
from verigym.graders.math._shared._rules import (
    IN_PREFIX,
    NUM_RE,
    THOUSANDS,
    Answers,
    Verdict,
    approx_side,
    bracketed,
    is_name,
    list_words,
    strip_answer,
    strip_item,
)

__all__ = [
    "Demand",
    "Forms",
    "clear_form_caches",
    "decide_in_form",
    "demanded",
    "enforce",
    "rounded_reason",
]

_SIMPLEST = ("lowest", "undone", "squarefree", "rationalized", "no_decimal", "exact")
_FRACTION = ("no_decimal", "no_percent", "not_mixed", "lowest")
_PHRASES: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = tuple(
    (re.compile(p, re.I), name, checks)
    for p, name, checks in (
        (r"\bsimpl(?:est|ified)\s+radical\s+form\b", "simplest radical form",
         ("rationalized", "squarefree", "lowest", "exact")),
        (r"\brationali[sz](?:e|ed|ing)\s+(?:(?:the|its|your|a)\s+)?denominators?\b"
         r"|\bdenominators?\s+(?:\w+\s+){0,2}rationali[sz]ed\b|\brational\s+denominators?\b",
         "rationalized denominator", ("rationalized", "exact")),
        (r"\b(?:simplest|lowest|reduced)\s+(?:form|terms)\b|\bfully\s+reduced\b", "simplest form", _SIMPLEST),
        (r"\bcommon\s+fractions?\b", "common fraction", _FRACTION),
        (r"(?<!not )\b(?:as|in(?:to)?)\s+(?:a\s+)?fraction(?:al\s+form)?\b(?!\s+of\b)|\bin\s+fraction\s+form\b", "fraction",
         ("no_decimal", "no_percent", "not_mixed")),
        (r"\bimproper\s+fractions?\b", "improper fraction", ("no_decimal", "not_mixed", "lowest")),
        (r"\bmixed\s+(?:numbers?|numerals?|fractions?)\b", "mixed number", ("no_decimal", "mixed", "lowest")),
        (r"\bexact\s+(?:value|answer|form|number|expression|result)s?\b"
         r"|\b(?:do\s+not|don'?t|without|not|no)\s+(?:approximat|round)\w*|\bin\s+terms\s+of\s+\$?\s*(?:\\pi|π|pi)\b"
         r"|\bleave\s+(?:your\s+answer|it|the\s+answer)\s+(?:in\s+)?exact", "exact value", ("exact",)),
        (r"(?<!not )\b(?:as|in(?:to)?)\s+(?:a\s+)?decimal(?:\s+(?:form|number|notation|fraction))?\b(?!\s+place)"
         r"|\bdecimal\s+form\b", "decimal form", ("decimal", "no_percent")),
    )
)  # fmt: skip
_KEYS = {  # words without which a phrase cannot occur (a substring test is cheaper than its regex)
    "simplest radical form": ("radical",),
    "rationalized denominator": ("rational",),
    "simplest form": ("simplest", "lowest", "reduced"),
    "common fraction": ("common",),
    "fraction": ("fraction",),
    "improper fraction": ("improper",),
    "mixed number": ("mixed",),
    "exact value": ("exact", "approx", "round", "terms of"),
    "decimal form": ("decimal",),
    "rounding": ("nearest", "decimal", "d.p"),
    "approximation": ("approx", "estimat", "round"),
}
_KEY_WORDS = tuple(sorted({w for ws in _KEYS.values() for w in ws}))
_APPROX_KIND = {"decimal form"}  # with the roundings: the approximation side of a conflict
_NEAREST = re.compile(
    r"\b(?:to|at)\s+the\s+nearest\s+(tenth|hundredth|thousandth|ten[-\s]thousandth|whole(?:\s+number)?|integer"
    r"|unit|one|ten|hundred|thousand|cent|dollar|percent|degree)s?\b",
    re.I,
)
_PLACES_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_PLACES = re.compile(r"\b(\d|one|two|three|four|five|six)\s+decimal\s+places?\b|\b(\d)\s+d\.\s?p\.", re.I)
_NEAREST_PLACES = {
    "tenth": 1,
    "hundredth": 2,
    "thousandth": 3,
    "ten": -1,
    "hundred": -2,
    "thousand": -3,
    "cent": 2,
}
_APPROX = re.compile(
    r"(?<!not )(?<!no )(?<!n't )(?<!without )(?<!not an )(?<!not a )"
    r"\b(?:approximat\w*|estimat\w*|round(?:ed|ing)?\s+(?:\w+\s+){0,3}?(?:to|off)\b)",
    re.I,
)


@dataclass(frozen=True)
class Demand:
    """One demanded form: its name, where it came from ("question", "mode simplest_form") and the
    rules (``_written`` checks, or ``exact`` / ``no_percent`` here) it puts on the answer."""

    name: str
    source: str
    checks: tuple[str, ...]


@dataclass(frozen=True)
class Forms:
    """Everything demanded of one answer's form; ``places``: round the reference to them."""

    demands: tuple[Demand, ...] = ()
    places: int | None = None


@functools.lru_cache(maxsize=1024)
def demanded(mode: str, question: str | None) -> Forms:
    """The forms demanded by ``mode`` and the question's words (see the module docstring)."""
    kind, _ = parse_mode(mode)
    if kind == "exact_decimal":
        return Forms()
    text = question or ""
    low = text.lower()
    words = {w for w in _KEY_WORDS if w in low}  # substring tests: the phrases' regexes cost more
    keys = {name for name, need in _KEYS.items() if words.intersection(need)}
    found = [
        Demand(name, "question", checks)
        for rx, name, checks in _PHRASES
        if name in keys and _said(rx, text, name)
    ]
    places, name = _rounding(text) if "rounding" in keys else (None, "")
    if places is not None:
        found.append(Demand(name, "question", ("decimal", "places")))
    if kind == "simplest_form":
        kept = [d for d in found if d.name not in _APPROX_KIND and "places" not in d.checks]
        return Forms((Demand("simplest form", "mode simplest_form", _SIMPLEST), *kept))
    if "approximation" in keys and _APPROX.search(text):
        found = [replace(d, checks=tuple(c for c in d.checks if c != "exact")) for d in found]
        found = [d for d in found if d.checks]
    return Forms(tuple(found), places)


_NEGATED = re.compile(r"(?:\b(?:not|no|never|instead\s+of|rather\s+than)|n't)\W+(?:[\w$\\]+\W+){0,3}$", re.I)


def _said(rx: re.Pattern[str], text: str, name: str) -> bool:
    """``rx`` occurs in ``text`` as a demand, not negated ("rather than a mixed number", "do not
    use an improper fraction"; the exact demand's own phrases carry their negation)."""
    return any(
        name == "exact value"
        or not _NEGATED.search(re.split(r"[.;!?]", text[max(0, m.start() - 40) : m.start()])[-1])
        for m in rx.finditer(text)
    )


def _rounding(text: str) -> tuple[int | None, str]:
    m = _NEAREST.search(text)
    if m:
        unit = re.sub(r"\s+", " ", m[1].lower()).replace("ten thousandth", "ten-thousandth")
        places = 4 if unit == "ten-thousandth" else _NEAREST_PLACES.get(unit, 0)
        return places, f"nearest {unit}"
    m = _PLACES.search(text)
    if m:
        word = (m[1] or m[2]).lower()
        places = int(word) if word.isdigit() else _PLACES_WORDS[word]
        return places, f"{places} decimal place{'s' if places != 1 else ''}"
    return None, ""


def clear_form_caches() -> None:
    demanded.cache_clear()
    _written_why.cache_clear()
    _items.cache_clear()


@functools.lru_cache(maxsize=4096)
def _written_why(core: str, check: str, places: int) -> str | None:
    """``check_written`` on one written expression, remembered (a reference's items are checked
    for every response to it, and common answers recur)."""
    return check_written(read_written(core), core, check, places)


Item = tuple[str, Decor]


@functools.lru_cache(maxsize=4096)
def _items(s: str) -> tuple[Item, ...]:
    """The values an answer is written as: list items, tuple and interval entries, the value side
    of ``name = value`` and relations, each as (expression, decoration); remembered (a reference
    is read for every response to it)."""
    s = strip_answer(s)
    if THOUSANDS.fullmatch(s):
        return ((s.replace(",", "").replace(" ", ""), Decor()),)
    out: list[Item] = []
    for part in split_top(list_words(s), (",", ";", " and ", " or ")):
        out += _values(re.sub(r"^(?:and|or)\s+", "", part), 0)
    return tuple(out)


def _values(p: str, depth: int) -> list[Item]:
    p = IN_PREFIX.sub("", strip_item(p))
    if not p:
        return []
    if len(approx := split_top(p, ("\\approx",))) > 1:
        p = approx_side(approx)
    br = bracketed(p)
    if br is not None and depth < 4:
        return [v for q in split_top(br[2], (",", ";")) for v in _values(q, depth + 1)]
    sides = [q for q in split_top(p, ("=", "\\le ", "\\ge ", "\\ne ", "<", ">")) if q]
    if len(sides) > 1:
        sides = [q for q in sides if not is_name(q)] or sides[-1:]
    return [(core.strip(), decor) for core, decor in (split_decor(q) for q in sides)]


def _decimals_only(items: Sequence[Item]) -> bool:
    return bool(items) and all(NUM_RE.match(c) for c, _ in items) and any("." in c for c, _ in items)


def _exact_values(items: Sequence[Item]) -> set[Fraction]:
    out: set[Fraction] = set()
    for core, decor in items:
        v = Fraction(core) if NUM_RE.match(core) else exact_number(core)
        if v is not None:
            out |= {v, v / 100} if decor.percent else {v}
    return out


def _broken(check: str, items: Sequence[Item], places: int, exact: set[Fraction] | None) -> str | None:
    for core, decor in items:
        if check == "no_percent":
            if decor.percent:
                return f"{core}% is a percent"
            continue
        if check == "exact":
            if exact is not None and NUM_RE.match(core) and "." in core:
                v = Fraction(core)
                if v not in exact and not (decor.percent and v / 100 in exact):
                    return f"{core} is a rounded decimal, not the exact value"
            continue
        why = _written_why(core, check, places)
        if why is not None:
            return why
    return None


def _resolve(forms: Forms, gold: Sequence[Item]) -> Forms:
    """Settle conflicting demands: the reference's side wins between rounding and exact forms;
    mixed and not mixed cancel."""
    demands = list(forms.demands)
    approx = [d for d in demands if d.name in _APPROX_KIND or "places" in d.checks]
    places = forms.places
    if approx and len(approx) < len(demands):
        if _decimals_only(gold):
            demands = approx
        else:
            demands, places = [d for d in demands if d not in approx], None
    checks = {c for d in demands for c in d.checks}
    if {"mixed", "not_mixed"} <= checks:
        demands = [
            replace(d, checks=tuple(c for c in d.checks if c not in ("mixed", "not_mixed"))) for d in demands
        ]
    return Forms(tuple(demands), places)


def enforce(
    forms: Forms, ans: Answers, rounder: Rounder, strict: bool
) -> Answers | tuple[bool, str, str] | None:
    """The rejection when ``ans.answer`` breaks a demanded form, else the answers to compare (the
    reference rounded where a rounding is demanded). ``rounder(expression, places)`` gives the
    rounded literal or None; with ``strict`` a None means "not here" and ``enforce`` returns None
    (the in-process paths defer), else the reference stays as written."""
    forms = _resolve(forms, _items(ans.gold))
    gold = ans.gold
    if forms.places is not None:
        rounded = round_reference(gold, forms.places, rounder, strict)
        if rounded is None:
            return None
        gold = rounded
    gitems, aitems = _items(gold), _items(ans.answer)
    places = forms.places or 0
    for d in forms.demands:
        for check in d.checks:
            exact = _exact_values(gitems) if check == "exact" else None
            if _exempt(check, gitems, places):
                continue  # the reference itself is written otherwise: not enforced
            why = _broken(check, aitems, places, exact)
            if why is not None:
                return False, f"not in the demanded form ({d.name}, from the {d.source}): {why}", ans.answer
    return Answers(gold, ans.answer, ans.how, ans.boxes)


def decide_in_form(
    ans: Answers,
    mode: str,
    question: str | None,
    decide: Callable[[Answers], Verdict | None],
    *,
    rounder: Rounder,
    strict: bool,
) -> Verdict | None:
    """``decide`` on the answers to compare under the forms that ``mode`` and ``question`` demand:
    a broken form is the verdict (``enforce``; None where a ``strict`` one defers), and a value
    rejection against a rounded reference says so (``rounded_reason``)."""
    forms = demanded(mode, question)
    compared = ans
    if forms.demands:
        ruled = enforce(forms, ans, rounder, strict)
        if not isinstance(ruled, Answers):
            return ruled
        compared = ruled
    hit = decide(compared)
    return hit if hit is None else rounded_reason(hit, ans.gold, compared.gold, forms)


def rounded_reason(
    verdict: tuple[bool, str, str | None], gold: str, compared: str, forms: Forms
) -> tuple[bool, str, str | None]:
    """A value rejection against a rounded reference says so (the reference ``gold`` was compared
    as ``compared``)."""
    if verdict[0] or compared == gold or verdict[1] != "not equivalent to the reference":
        return verdict
    name = next((d.name for d in forms.demands if "places" in d.checks), "demanded rounding")
    return False, f"not equivalent to the reference rounded ({name}): {compared}", verdict[2]


_NUMERIC_COMMANDS = re.compile(r"\\(?:frac|sqrt|pi|cdot|times|div|infty)(?![a-zA-Z])")


def _exempt(check: str, gold: Sequence[Item], places: int) -> bool:
    """A rule the reference breaks is not enforced; never the exact rule, and a decimal form only
    where the reference is not a number (a number has a decimal form to compare with)."""
    if check == "exact" or _broken(check, gold, places, None) is None:
        return False
    if check in ("decimal", "places"):
        return any(re.search(r"[a-zA-Z]", _NUMERIC_COMMANDS.sub("", core)) for core, _ in gold)
    return True
