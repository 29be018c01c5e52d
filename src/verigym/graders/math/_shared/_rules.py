"""The math grader's rules for reading an answer that both of its paths apply: one copy, used by
the exact fast path (``_rational``, ``_text``, no sympy) and by the full check (``_check``,
``_parse``), so the two cannot drift apart. How the values read compare is ``_matching``'s.

* ``prepare``: extraction of both answers, the "restates the question" and "no answer" verdicts;
  ``fast_answers``: the same, for the in-process paths (None where they may not decide), and
  ``decide_texts``: an in-process path's verdict on the whole texts;
* ``readings_prefix``: the extra readings of a whole answer (thousands separators, decimal comma);
* ``list_words``, ``strip_item``, ``approx_side``, ``IN_PREFIX``, ``strip_answer``: how an answer's
  list is split and what of each item is read; ``expand_pm``: ``a \\pm b`` as its variants;
* ``bracketed`` / ``balanced``: bracket structure of tuples, intervals and sets; ``matrix_cells``:
  a matrix literal's cells;
* ``is_text``, ``is_word``, ``norm_text``, ``is_name``: prose, words and labels rather than
  quantities.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from verigym.graders.math._shared._extract import extract, in_question
from verigym.graders.math._shared._norm import clean, repair, split_top

__all__ = [
    "IN_PREFIX",
    "LABEL",
    "MATRIX",
    "MAX_FAST",
    "NUM_RE",
    "STRAY_PERIOD",
    "THOUSANDS",
    "Answers",
    "approx_side",
    "balanced",
    "bracketed",
    "clear_rule_caches",
    "decide_texts",
    "expand_pm",
    "fast_answers",
    "is_name",
    "is_text",
    "is_word",
    "list_words",
    "matrix_cells",
    "norm_text",
    "prepare",
    "readings_prefix",
    "squash",
    "strip_answer",
    "strip_item",
]

THOUSANDS = re.compile(r"-?[1-9]\d{0,2}(?:[, ]\d{3})+(?:\.\d+)?")  # "7,425,000", "1 000"
DECIMAL_COMMA = re.compile(r"-?\d+,\d+")  # "1,22", "0,111"


def squash(s: str) -> str:
    return re.sub(r"[\s{}$]|\\text|\\mathrm", "", clean(s)).lower()


Verdict = tuple[bool, str, "str | None"]


@dataclass(frozen=True)
class Answers:
    """The reference answer and the response's answer, as extracted."""

    gold: str
    answer: str
    how: str  # how the answer was found ("boxed", "anchor", "bare", "last")
    boxes: int  # distinct boxed answers (more than one: a hedge unless the reference is a set)


MAX_FAST = 4000  # longer texts are extracted in a worker, under the hard timeout


def fast_answers(gold: str, pred: str, mode: str, question: str | None) -> Answers | Verdict | None:
    """``prepare`` for the in-process paths: None when they may not decide (a mode other than
    ``equivalent``, or a text too long to extract outside the worker's timeout)."""
    if mode.strip() != "equivalent" or len(pred) > MAX_FAST or len(gold) > MAX_FAST:
        return None
    return prepare(gold, pred, question)


def decide_texts(
    decide: Callable[[Answers], Verdict | None],
    gold: str,
    pred: str,
    mode: str = "equivalent",
    question: str | None = None,
) -> Verdict | None:
    """``_check.check``'s verdict when the in-process path ``decide`` can give it, else None."""
    ans = fast_answers(gold, pred, mode, question)
    return decide(ans) if isinstance(ans, Answers) else ans


def prepare(gold: str, pred: str, question: str | None) -> Answers | Verdict:
    """Both answers, or the verdict when there is nothing to compare. Raises ``ValueError``
    for an empty reference (the grader's problem: an error, never a zero)."""
    gold_answer = _gold_answer(gold)
    if gold_answer is None:
        raise ValueError("the reference answer is empty")
    px = extract(repair(pred, escapes=False), question=question)
    if px.answer is None:
        return False, f"no final answer found ({px.how})", None
    answer = px.answer
    if px.how != "last" and in_question(answer, question) and squash(answer) != squash(gold_answer):
        # Echoing the problem's own expression ("simplify ...") is not an answer, even when it is
        # mathematically equal to the reference.
        return False, "the answer restates an expression from the question", answer
    return Answers(gold_answer, answer, px.how, len(px.boxed))


@functools.lru_cache(maxsize=4096)
def _gold_answer(gold: str) -> str | None:
    """The reference's answer (a reference is graded against many responses: read it once)."""
    return extract(repair(gold, escapes=True), gold=True).answer


def clear_rule_caches() -> None:
    """Forget the cached reference answers and cleaned strings (``_equivalence.clear_caches``)."""
    _gold_answer.cache_clear()
    strip_answer.cache_clear()


STRAY_PERIOD = re.compile(r"(?<=[})a-zA-Z])\s*\.$")  # "(-1/2, \sqrt{2}.]"
LABEL = re.compile(r"[A-Za-z]+(?:\s+\d+)?\s*:\s+")  # "Sequence 1: ...", "Paolo: 18" (at the start)
IN_PREFIX = re.compile(r"^[A-Za-z]\w*\s*\\in(?![a-zA-Z])\s*")  # "a \in (1, 2)"


def list_words(s: str) -> str:
    r"""The list rewrites before an answer is split into items: ``\text{and}``, "and" inside a
    ``\text{...}`` ("7 \text{ goats and } 4 \text{ toys}") and ``(..) or (..)`` as separators."""
    s = re.sub(r"\\text\{\s*(and|or|,)\s*\}", r" \1 ", s)
    s = re.sub(r"\\text\{([^{}]*?)\s+and\s+([^{}]*)\}", r"\\text{\1} and \\text{\2}", s)
    return re.sub(r"(?<=[)\]}])\s*(?:or|and)\s*(?=[(\[{])", ", ", s)


def strip_item(s: str) -> str:
    """One item without a stray final period or a leading label."""
    s = STRAY_PERIOD.sub("", s.strip())
    label = LABEL.match(s)
    return s[label.end() :] if label else s


def approx_side(parts: Sequence[str]) -> str:
    r"""Which side of ``a \approx b`` is the answer: the exact value when it is an equation or not
    a bare name ("x = 1/3 \approx 0.33"), else the approximation ("x \approx 11")."""
    exact = parts[0]
    return exact if len(split_top(exact, ("=",))) > 1 or not is_name(exact) else parts[-1]


@functools.lru_cache(maxsize=1024)
def strip_answer(s: str) -> str:
    """``clean``, then drop a leading currency sign, LaTeX grouping braces around the whole
    answer and a leading quantifier."""
    s = clean(s)
    s = re.sub(r"^(?:\\\$|€|£|¥)\s*", "", s)
    if s.startswith("{") and s.endswith("}") and balanced(s[1:-1]):
        s = s[1:-1].strip()  # "{1,3}": LaTeX grouping braces, not a set
    # "\\forall x > 0, 3^x \\ge x^2": the statement after its quantifier
    return re.sub(r"^\\forall\s*[a-zA-Z]\s*(?:>|<|\\ge|\\le|\\in)\s*[^,]+,\s*", "", s)


def readings_prefix(s: str) -> tuple[list[str], bool]:
    """Number literals the whole answer also reads as, and whether that is its only reading
    ("1 000" has no list reading; "7,425,000" is also the list 7, 425, 000)."""
    if THOUSANDS.fullmatch(s):
        return [s.replace(",", "").replace(" ", "")], "," not in s
    if DECIMAL_COMMA.fullmatch(s):
        return [s.replace(",", ".")], False
    return [], False


def balanced(s: str) -> bool:
    depth = 0
    for c in s.replace("\\{", "(").replace("\\}", ")"):
        depth += (c in "([{") - (c in ")]}")
        if depth < 0:
            return False
    return depth == 0


def bracketed(s: str) -> tuple[str, str, str] | None:
    """(opening, closing, inside) when ``s`` is one bracketed group: tuple, interval or set."""
    for o in ("\\langle", "\\{", "(", "["):
        if s.startswith(o):
            for c in ("\\rangle", "\\}", ")", "]"):
                if s.endswith(c) and len(s) > len(o) + len(c) - 1:
                    inner = s[len(o) : len(s) - len(c)]
                    if balanced(inner):
                        return o, c, inner
    return None


def matrix_cells(s: str) -> list[list[str]] | None:
    """A matrix literal's cells, row by row (the brackets around it dropped); None when ``s`` is
    not one (nested environments, sums and products of matrices: the full parser's business)."""
    inner = re.sub(r"^\(\s*|\s*\)$|^\[\s*|\s*\]$", "", s.strip()) if s.startswith(("(", "[")) else s
    m = MATRIX.match(inner.strip())
    if not m or "\\begin" in m.group(2):
        return None
    return [r.split("&") for r in re.split(r"\\\\", m.group(2).strip()) if r.strip()]


def expand_pm(s: str) -> list[str]:
    """``a \\pm b`` as its variants, ``a + b`` and ``a - b`` (``\\mp``: minus first); several signs
    vary together outside a tuple and independently inside one; more than four: not expanded."""
    n = s.count("\\pm") + s.count("\\mp")
    if n == 0 or n > 4:
        return [s]
    out = [""]
    for piece in re.split(r"(\\pm|\\mp)", s):
        if piece in ("\\pm", "\\mp"):
            out = (
                [o + sign for o in out for sign in ("+", "-")]
                if piece == "\\pm"
                else [o + sign for o in out for sign in ("-", "+")]
            )
        else:
            out = [o + piece for o in out]
    return out if n == 1 or "(" in s else out[:: 2**n - 1]  # independent signs only inside tuples


_TEXT_BODY = re.compile(r"\\text\{([^{}]*)\}")
_WORD2 = re.compile(r"[A-Za-z]{2,}")
_DIGIT = re.compile(r"\d")
_NON_TEXT_CMD = re.compile(r"\\(?!text)[a-zA-Z]+")
_OPERATOR = re.compile(r"[=^+*/]")
_WORD4 = re.compile(r"[A-Za-z]{4,}")


def is_text(s: str) -> bool:
    """Prose rather than an expression: a ``\\text{}`` without digits, or two words and no
    operators."""
    body = _TEXT_BODY.sub(r"\1", s)
    words = _WORD2.findall(body)
    if s.startswith("\\text{") and s.endswith("}") and balanced(s[6:-1]) and not _DIGIT.search(s):
        return True
    return len(words) >= 2 and not _NON_TEXT_CMD.search(s) and not _OPERATOR.search(body)


_WORDS = {"odd", "yes", "no", "all", "any", "one", "two", "six", "ten", "none", "neither", "both"}


def is_word(s: str) -> bool:
    """One word (``circle``, ``Maximum``, ``odd``), not a product of letters (``ab``, ``xyz``)."""
    return bool(_WORD4.fullmatch(s)) or s.lower() in _WORDS


def norm_text(s: str) -> str:
    """Prose as the full check keeps it (``_values.Text``): lower case, words and spaces."""
    s = re.sub(r"\\(?:text|mathrm|textbf)\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"[^\w\s]", " ", s.lower())
    return re.sub(r"\s+", " ", s).strip()


NUM_RE = re.compile(r"^[+-]?(\d+(?:\.\d*)?|\.\d+)$")  # a plain number literal
MATRIX = re.compile(r"^\\begin\{([pbvB]?matrix|array)\}(?:\{[^{}]*\})?(.*?)\\end\{\1\}$", re.S)  # a literal
_NAME = re.compile(
    r"^(?:[a-zA-Z][a-zA-Z ]*|\\[a-zA-Z]+|[A-Za-z](?:_\{?[\w\\{}-]+\}?)?(?:\^\{?\w+\}?)?"
    r"|[a-zA-Z]+\s*\([\w,\s]*\)|\|[A-Za-z]+\||[A-Za-z_{}\\\d]+\s*:\s*[A-Za-z_{}\\\d]+|\([a-zA-Z,\s()]+\))$"
)


def is_name(s: str) -> bool:
    """A label rather than a quantity: ``x``, ``f(x)``, ``a_{37}``, ``|AB|``, ``V_1:V_2``,
    ``\\frac{NO}{BO}``, ``Maximum`` (no digits outside subscripts and arguments, no + or -)."""
    s = s.strip()
    if not s or NUM_RE.match(s):
        return False
    if _NAME.match(s):
        return True
    bare = re.sub(r"_\{[^{}]*\}|_\w|\([^()]*\)|\\frac|\\cdot|\\(?:mathrm|text)", "", s)
    return not re.search(r"[\d+\-=<>^]|\\(?:le|ge|ne|in|pm)\b", bare) and bool(re.search(r"[A-Za-z]", bare))
