"""String normalisation for the math grader: LaTeX spellings, unicode, escaping damage, decorations.

Everything here is pure string work (no sympy), so it is cheap and cannot hang.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Decor", "clean", "repair", "split_decor", "split_top"]

# A control character where a backslash command was meant: "\t" in "\text" became a tab, "\f" in
# "\frac" a form feed, and so on, when a reference answer went through a non-raw string.
_CONTROL = {"\t": "t", "\x0c": "f", "\x08": "b", "\r": "r", "\x0b": "v", "\x07": "a"}
_CONTROL_RE = re.compile(r"\\?([\t\x0c\x08\r\x0b\x07])(?=[a-z])")
_ESCAPED_CMD = re.compile(
    r"(?<!\\)\\\\(?=(?:[dtc]?frac|sqrt|le|ge|leq|geq|neq|ne|left|right|pi|cdot|times|text|infty|sin|cos|tan|"
    r"log|ln|alpha|beta|theta|pm|in|cup|circ|boxed|mathrm|lceil|rceil|lfloor|rfloor|big|bigg|Big|Bigg|dfrac)"
    r"(?![a-zA-Z]))"
)
_UNICODE = {
    "π": "\\pi ", "∞": "\\infty ", "≤": "\\le ", "≥": "\\ge ", "≠": "\\ne ", "−": "-", "–": "-",
    "×": "\\times ", "·": "\\cdot ", "÷": "\\div ", "√": "\\sqrt ", "∪": "\\cup ", "∩": "\\cap ",
    "°": "^\\circ ", "＞": ">", "＜": "<", "²": "^2", "³": "^3", "，": ",", "：": ":", "∈": "\\in ",
    "α": "\\alpha ", "β": "\\beta ", "θ": "\\theta ", "λ": "\\lambda ", "±": "\\pm ", "∓": "\\mp ",
    "\u00a0": " ", "≈": "\\approx ", "…": "\\ldots ", "∀": "\\forall ",
    **{chr(0x2460 + k): f"{k + 1}, " for k in range(20)},  # circled numbers: "②③" lists 2 and 3
}  # fmt: skip
_DROP = re.compile(
    r"\\(?:left|right|big|Big|bigg|Bigg|bigl|bigr|Bigl|Bigr|displaystyle|textstyle|limits)(?![a-zA-Z])"
    r"|(?<!\\)\\[!,;:> ]|\\q?quad|~"
)
_RENAME = (
    (re.compile(r"\\[dtc]frac(?![a-zA-Z])"), r"\\frac"),
    (re.compile(r"\\[dt]binom(?![a-zA-Z])"), r"\\binom"),
    (re.compile(r"\\(?:leqslant|leq|le)(?![a-zA-Z])|<=|=<"), r"\\le "),
    (re.compile(r"\\(?:geqslant|geq|ge)(?![a-zA-Z])|>=|=>"), r"\\ge "),
    (re.compile(r"\\(?:neq|ne)(?![a-zA-Z])|!="), r"\\ne "),
    (re.compile(r"\\(?:cupdot|sqcup)(?![a-zA-Z])"), r"\\cup "),  # a disjoint union is a union
    (re.compile(r"\\lt(?![a-zA-Z])"), "<"),
    (re.compile(r"\\gt(?![a-zA-Z])"), ">"),
    (re.compile(r"\\(?:textnormal|textbf|textit|textrm|mbox|hbox|texttt)\s*\{"), r"\\text{"),
    (re.compile(r"\\text\s*\{\s*\{([^{}]*)\}\s*\}"), r"\\text{\1}"),
    (re.compile(r"\\(?:mathrm|mathbf|mathit|operatorname)\s*\{(\s*e\s*)\}"), "e"),
    (re.compile(r"(?:\^\s*)?\\(?:degree|textdegree|textcirc)(?![a-zA-Z])"), r"^\\circ "),
    (
        re.compile(r"\\(?:text|mathrm|operatorname)\s*\{\s*(sin|cos|tan|cot|sec|csc|ln|log|exp)\s*\}"),
        r"\\\1 ",
    ),
    (re.compile(r"\^\s*\(([^()]*)\)"), r"^{\1}"),
    (re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[eE]([+-]?\d+)(?![\w.])"), r"\1\\times 10^{\2}"),  # 2.5e-3
    # "f(x) = -1 \\text{ for all } x \\in \\mathbb{Z}, \\text{ and } f(x) = x + 1": the clause ends at a comma
    (re.compile(r"\s*\\text\{\s*for (?:all|every|any|each|some)\b[^{}]*\}[^,;]*"), ""),
    (re.compile(r"\s*\\text\{\s*(?:where|with)\b[^{}]*\}.*$"), ""),
    (re.compile(r"(?<=[\w}])\s*\\text\{\s*(?:is|are)\s[^{}]*\}.*$"), ""),  # "R=1 \\text{ is both ...}"
    (re.compile(r"\s*,?\s*\\(?:forall|text\{\s*for all\s*\})\s*[a-z]\s*\\in\s*\\mathbb\{?\w\}?.*$"), ""),
    (re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ"), r"^\\circ "),
    (re.compile(r"\\(?:dots|cdots|ldots)(?![a-zA-Z])"), r"\\ldots "),
    (re.compile(r"<sup>(.*?)</sup>"), r"^{\1}"),
    (re.compile(r"\\(?:tan|sin|cos)\^\{?-1\}?"), lambda m: "\\arc" + m.group(0)[1:4]),
)

_ANY_RENAME = re.compile("|".join(f"(?:{pat.pattern})" for pat, _ in _RENAME))
# For each of _RENAME's patterns, texts one of which any match contains: a substitution whose
# texts are all absent is a no-op, skipped (a substring test costs a fraction of a ``sub``).
_NEEDLES: tuple[tuple[str, ...], ...] = (
    ("frac",), ("binom",), ("\\le", "<=", "=<"), ("\\ge", ">=", "=>"), ("\\ne", "!="), ("cup",),
    ("\\lt",), ("\\gt",), ("\\text", "box"), ("\\text",), ("\\math", "\\operatorname"),
    ("degree", "textcirc"), ("\\text", "\\mathrm", "\\operatorname"), ("^",), ("e", "E"),
    ("\\text{",), ("\\text{",), ("\\text{",), ("\\mathbb",), ("\\circ",), ("dots",), ("<sup>",), ("^",),
)  # fmt: skip
assert len(_NEEDLES) == len(_RENAME)

_THOUSANDS_BANG = re.compile(r",\s*\\!\s*")
_THOUSANDS_BRACE = re.compile(r"\{\s*,\s*\}")
_EMPTY_TEXT = re.compile(r"\\text\{\s*\}")
_SPACES = re.compile(r"\s+")
_ENDS = re.compile(r"^(?:\\text\{\s*\}|[:,;\s]|\.(?!\d))+|(?:[.,;\s]|\\text\{\s*\})+$")
_LOST_SUP = re.compile(r"(?<=[\w}])\s*\^$")
_DOLLAR_TAIL = re.compile(r"\d\s*\}?\s*\\\$$")


def repair(s: str, *, escapes: bool) -> str:
    """Undo escaping damage: control characters for backslash commands; with ``escapes``
    (used for reference answers) also doubled backslashes before command names."""
    s = _CONTROL_RE.sub(lambda m: "\\" + _CONTROL[m.group(1)], s)
    if escapes:
        s = _ESCAPED_CMD.sub(r"\\", s)
    return s


_TOK = r"(\d|[a-zA-Z]|\\[a-zA-Z]+|\{[^{}]*\})"  # one braceless argument
_FRAC_BARE = re.compile(r"\\frac\s*" + _TOK + r"\s*" + _TOK)
_SQRT_BARE = re.compile(r"\\sqrt\s*(?![\[{])" + _TOK)


def _fix_braceless(s: str) -> str:
    """``\\frac12`` -> ``\\frac{1}{2}``, ``\\sqrt3`` -> ``\\sqrt{3}``, ``\\sqrt n`` -> ``\\sqrt{n}``."""
    s = _FRAC_BARE.sub(lambda m: f"\\frac{{{_unb(m[1])}}}{{{_unb(m[2])}}}", s)
    s = _SQRT_BARE.sub(lambda m: f"\\sqrt{{{_unb(m[1])}}}", s)
    return s


def _unb(tok: str) -> str:
    return tok[1:-1] if tok.startswith("{") else tok


def clean(s: str) -> str:
    """Canonical LaTeX spelling of an answer string (no $ delimiters expected)."""
    if not s.isascii():  # every key of _UNICODE is outside ASCII
        for k, v in _UNICODE.items():
            if k in s:
                s = s.replace(k, v)
    s = _THOUSANDS_BANG.sub(",", s)  # "11,\\! 111" is a thousands separator
    s = _THOUSANDS_BRACE.sub(",", s)  # "14{,}916": a thousands separator in braces
    s = _EMPTY_TEXT.sub(" ", s)
    s = _DROP.sub(" ", s)
    if _ANY_RENAME.search(s):  # none matching: every substitution below is a no-op
        for (pat, rep), needles in zip(_RENAME, _NEEDLES, strict=True):
            for needle in needles:
                if needle in s:
                    s = pat.sub(rep, s)  # type: ignore[call-overload]
                    break
    s = _fix_braceless(s)
    s = _SPACES.sub(" ", s).strip()
    s = _ENDS.sub("", s)
    return _LOST_SUP.sub("", s)  # "90^": a superscript lost in transcription


@dataclass(frozen=True)
class Decor:
    """What was stripped from around a value: percent, degree, units (normalised text)."""

    percent: bool = False
    degree: bool = False
    unit: str = ""


_PERCENT = re.compile(r"\s*(?:\\%|%|\\text\{\s*%\s*\}|\bpercentage\b|\bpercent\b|\bpct\b)\s*$", re.I)
_DEGREE = re.compile(r"\s*\^\\circ\s*$|\s*\\text\{\s*degrees?\s*\}\s*$|\s+degrees?\s*$", re.I)
_UNIT_TAIL = re.compile(
    r"^(?P<core>.*?[\d}.)])\s*(?P<unit>(?:\\text\{[^{}]*\}|\\mathrm\{[^{}]*\}|[a-zA-Z€£¥$]+)"
    r"(?:\s*(?:\^\s*\{?\d\}?|/|\\cdot)?\s*(?:\\text\{[^{}]*\}|\\mathrm\{[^{}]*\}|[a-zA-Z]+))*(?:\s*\^\s*\{?\d\}?)?)$"
)
_CURRENCY_HEAD = re.compile(r"^(?:\\\$|\$|€|£|¥|\\euro)\s*")
_NOT_UNITS = {"i", "e", "pi", "x", "y", "z", "n", "k", "a", "b", "c", "t", "r", "or", "and"}
# A unit written in bare letters ("5 cm", "3 m^2", "125 miles", "15th"): each run of letters is a
# known unit symbol or a word of four or more letters; anything else ("6ab^2", "2-2p", "6xy") is a
# product of variables, not a number with a unit.
_BARE_UNITS = frozenset({
    "m", "cm", "mm", "km", "nm", "dm", "um", "g", "kg", "mg", "s", "ms", "h", "hr", "hrs", "min", "mins",
    "sec", "secs", "ft", "in", "yd", "mi", "l", "ml", "cl", "dl", "lb", "lbs", "oz", "mph", "kph", "kmh",
    "rpm", "hz", "khz", "mhz", "j", "kj", "w", "kw", "v", "pa", "kpa", "mol", "cal", "kcal", "gal", "qt",
    "pt", "day", "yr", "yrs", "wk", "st", "nd", "rd", "th", "sq", "cu", "deg", "rad", "usd", "eur",
})  # fmt: skip


def _unit_text(u: str) -> str:
    u = re.sub(r"\\(?:text|mathrm)\{([^{}]*)\}", r"\1", u)
    u = re.sub(r"\s+", " ", u.replace("{", "").replace("}", "")).strip().lower()
    return u


def split_decor(s: str) -> tuple[str, Decor]:
    """Strip a trailing percent sign, degree sign or unit (and a leading currency sign)."""
    percent = degree = False
    s = _CURRENCY_HEAD.sub("", s)
    if _DOLLAR_TAIL.search(s):  # "\\frac{1}{2} \\$": a currency sign after the amount
        return s[:-2].strip(), Decor(unit="$")
    m = _PERCENT.search(s)
    if m:
        s, percent = s[: m.start()].strip(), True
    m = _DEGREE.search(s)
    if m:
        s, degree = s[: m.start()].strip(), True
        s = re.sub(r"\s*(\d+)\s*'\s*$", "", s)  # minutes after degrees are handled by the caller
    unit = ""
    m = _UNIT_TAIL.match(s)
    if m and not percent:
        cand = _unit_text(m.group("unit"))
        core = m.group("core").strip()
        if (
            cand
            and cand not in _NOT_UNITS
            and not re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", core))
            and (_texty(m.group("unit")) or all(_bare_unit(w) for w in re.findall(r"[a-z]+", cand)))
        ):
            s, unit = core, cand
            if _PERCENT.search(" " + cand):
                unit, percent = "", True
    return s.strip(), Decor(percent, degree, unit)


def _texty(u: str) -> bool:
    return "\\text" in u or "\\mathrm" in u


def _bare_unit(word: str) -> bool:
    return word in _BARE_UNITS or len(word) >= 4


_OPEN, _CLOSE = "([{", ")]}"


def split_top(s: str, seps: tuple[str, ...]) -> list[str]:
    """Split ``s`` on any of ``seps`` at bracket depth 0 (``\\{``/``\\}`` and ``\\left(`` count)."""
    if not any(sep in s for sep in seps):
        return [s.strip()]
    parts: list[str] = []
    depth = 0
    start = i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and s.startswith("\\begin", i):
            depth += 1
        elif c == "\\" and s.startswith("\\end", i):
            depth -= 1
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0:
            for sep in seps:
                if s.startswith(sep, i) and not (sep.isalpha() and _inside_word(s, i, len(sep))):
                    parts.append(s[start:i])
                    i += len(sep)
                    start = i
                    break
            else:
                i += 1
                continue
            continue
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def _inside_word(s: str, i: int, n: int) -> bool:
    before = s[i - 1] if i > 0 else " "
    after = s[i + n] if i + n < len(s) else " "
    return before.isalpha() or before == "\\" or after.isalpha()
