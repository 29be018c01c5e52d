"""Answer extraction for the math grader: find the final answer in a model response.

Priority (the last match of the first kind that is present wins):

1. ``\\boxed{...}`` / ``\\fbox{...}``; several *different* boxes are kept together as a set
   (a hedge only passes when the reference itself is that set);
2. an anchor: "final answer is", "the answer is", "Answer:" followed by math or a short phrase;
3. a bare answer (short text without sentences) is taken whole;
4. otherwise the last math span or number of the response, *unless* it restates the problem:
   it occurs in the question, or its sentence is an instruction ("simplify ...", "compute ...").
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

__all__ = ["NUMBER_RE", "Extraction", "boxed_contents", "extract", "in_question", "strip_math_delims"]

_MAX_CHARS = 60_000
_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*")
_THINK_END = "</think>"
_ANCHORS = (
    re.compile(r"final\s+answer\s*(?:is|:|=)?\s*[:=]?", re.I),
    re.compile(r"\bthe\s+answer\s+is\s*[:=]?", re.I),
    re.compile(r"\banswer\s*[:=]", re.I),
    re.compile(r"\banswer\b(?=\s*(?:\$|\\\(|\\\[))", re.I),
)
_MATH_SPAN = re.compile(
    r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|(?<!\\)\$((?:[^$\n]|(?<=\\)\$)+?)(?<!\\)\$", re.S
)
NUMBER_RE = re.compile(
    r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,]*\d)|(?<![\w.])-?\d*[.,]?\d+(?:/\d+)?"
)
_PROSE_WORD = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{2,}(?![a-zA-Z{(])")
_TEXT_CMD = re.compile(r"\\(?:text|mbox|textbf|textnormal|mathrm|operatorname)\s*\{[^{}]*\}")
_LABEL = re.compile(r"(?:^|(?<=[,;:]\s)|(?<=\band\s))[A-Z][a-zA-Z]*(?:\s+\d+)?\s*:\s+")
_CUES = re.compile(
    r"^\W*(simplify|compute|evaluate|calculate|find|solve|determine|expand|factor)\b"
    r"|\b(given|let|suppose|consider|we need to|we want to|we have to|we are asked to|the problem)\b",
    re.I,
)
_STRONG = re.compile(r"final\s+answer|\bthe\s+answer\s+is\b", re.I)
_LISTED = re.compile(
    r"^(?:\\q?quad|\\text\{[^{}]*\}|\\[,;()\[\]]|\band\b|\bor\b|\w+\s+and\b|[\s,;.$+&])*$", re.I
)
_MATH_WORDS = {
    "and", "or", "sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp", "pi", "infty", "sqrt",
    "frac", "dfrac", "text", "arcsin", "arccos", "arctan", "lim", "max", "min", "mod", "pmod", "cup",
}  # fmt: skip


@dataclass
class Extraction:
    """The answer found in a text, how it was found, and the distinct boxed answers if several."""

    answer: str | None
    how: str
    boxed: list[str] = field(default_factory=list)

    @property
    def multi(self) -> bool:
        return len(self.boxed) > 1


def _brace_pairs(text: str) -> dict[int, int]:
    """Index of each ``{`` -> index of its matching ``}`` (escaped ``\\{``/``\\}`` skipped); one pass."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for i, c in enumerate(text):
        if c in "{}" and i > 0 and text[i - 1] == "\\":
            continue
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs[stack.pop()] = i
    return pairs


def _boxes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every ``\\boxed{}``/``\\fbox{}`` (``\\boxed 5`` too)."""
    out: list[tuple[int, int, str]] = []
    matches = list(_BOX_RE.finditer(text))
    pairs = _brace_pairs(text) if matches else {}
    for k, m in enumerate(matches):
        pos = m.end()
        if pos in pairs:
            out.append((m.start(), pairs[pos] + 1, text[pos + 1 : pairs[pos]].strip()))
        elif pos < len(text) and text[pos] == "{":
            if k == len(matches) - 1:  # the last box never closed: the rest of the text
                out.append((m.start(), len(text), text[pos + 1 :].strip().rstrip("$").strip()))
        else:
            bare = re.match(r"[^\s$.,]+", text[pos : pos + 200])
            if bare:
                out.append((m.start(), pos + bare.end(), bare.group(0)))
    return [b for b in out if b[2]]


def boxed_contents(text: str) -> list[str]:
    """Contents of every ``\\boxed{}``/``\\fbox{}`` in order."""
    return [b[2] for b in _boxes(text)]


_DISPLAY_DELIMS = re.compile(r"\\\[|\\\]|\\\(|\\\)")


def strip_math_delims(s: str) -> str:
    """Remove ``$``, ``\\(\\)`` and ``\\[\\]`` delimiters around or inside a short answer."""
    s = s.strip()
    s = _DISPLAY_DELIMS.sub(" ", s)
    s = s.replace("$$", " ").replace("\\$", "\u0000").replace("$", " ").replace("\u0000", "\\$")
    return s.strip()


def _prose_words(s: str) -> int:
    s = _TEXT_CMD.sub(" ", s)
    return sum(1 for w in _PROSE_WORD.findall(s) if w.lower() not in _MATH_WORDS)


def _after_anchor(rest: str) -> str | None:
    """The answer right after an anchor: the first math span, or the phrase up to the sentence end."""
    rest = re.sub(r"^[\s:*]*(?:\\?[\"'`])?", "", rest)
    boxes = boxed_contents(rest[:400])
    if boxes:
        return boxes[0]
    line = re.split(r"\n|(?<=[^\d\s])\.(?:\s|$)|\.\s|\s+I hope", rest, maxsplit=1)[0].strip()
    found = list(_MATH_SPAN.finditer(line))
    gaps = [line[a.end() : b.start()] for a, b in itertools.pairwise(found)]
    if len(found) > 1 and found[0].start() == 0 and all(_LISTED.match(g) for g in gaps):
        return ", ".join(
            next(g for g in f.groups() if g is not None).strip() for f in found
        )  # "$12$ and $13$"
    m = _MATH_SPAN.match(rest)
    if m:
        return next(g for g in m.groups() if g is not None).strip()
    line = re.split(r"\n|(?<=[^\d\s])\.(?:\s|$)|\.\s|\s+I hope", rest, maxsplit=1)[0].strip()
    if not line:
        return None
    if "$" not in line and _prose_words(line) >= 3:
        nums = NUMBER_RE.findall(line)
        return nums[-1] if nums else line
    if "$" in line or "\\(" in line:
        # "The largest $n$ is 34." -> the value after the last " is " / "=" outside math.
        tail = re.split(r"\bis\b|=", line)[-1]
        found = list(_MATH_SPAN.finditer(line))
        spans = [next(g for g in s.groups() if g is not None) for s in found]
        gaps = [line[a.end() : b.start()] for a, b in itertools.pairwise(found)]
        if len(spans) > 1 and found[0].start() <= 3 and all(_LISTED.match(g) for g in gaps):
            return ", ".join(sp.strip() for sp in spans)  # "$12$ and $13$"
        if tail.strip() and not _MATH_SPAN.search(tail) and NUMBER_RE.search(tail):
            return strip_math_delims(tail).rstrip(".")
        return spans[-1].strip() if spans else strip_math_delims(line)
    return line.rstrip(".").strip()


def in_question(candidate: str, question: str | None) -> bool:
    """``candidate`` is an expression (not a bare word or number) written in the question."""
    if not question:
        return False
    squash = re.sub(r"[\s$]|\\left|\\right|\\[,;!]|\^\{?\\mathrm\{(?:st|nd|rd|th)\}\}?", "", candidate)
    if len(squash) < 3 or not re.search(r"\\(?:frac|sqrt|cdot|times)|[-+*/^]", squash.lstrip("-")):
        return False
    return squash in re.sub(r"[\s$]|\\left|\\right|\\[,;!]", "", question)


def extract(text: str, *, question: str | None = None, gold: bool = False) -> Extraction:
    """Find the final answer in ``text`` (a full response or a bare answer)."""
    if _THINK_END in text:
        after = text.rsplit(_THINK_END, 1)[1]
        text = after if after.strip() else text
    text = text.strip()[-_MAX_CHARS:]  # the answer is at the end; bounds the work on huge texts
    if not text:
        return Extraction(None, "empty")
    boxes = _boxes(text)
    strong = [m.start() for m in _STRONG.finditer(text)]
    # A "final answer" stated after the last box wins: the boxes were intermediate results.
    if boxes and not (strong and strong[-1] > boxes[-1][1] and _after_anchor(text[strong[-1] :]) is not None):
        if gold and len(boxes) > 1:
            # A reference lists several boxes as one answer only when they are listed together.
            listed = all(
                len(text[a[1] : b[0]]) < 200 and _LISTED.match(text[a[1] : b[0]])
                for a, b in itertools.pairwise(boxes)
            )
            if not listed:
                boxes = boxes[-1:]
        contents = [b[2] for b in boxes]
        distinct = list(dict.fromkeys(re.sub(r"\s+", "", b) for b in contents))
        keep = [next(b for b in contents if re.sub(r"\s+", "", b) == d) for d in distinct]
        answer = keep[0] if len(keep) == 1 else ", ".join(keep)
        return Extraction(answer, "boxed", keep)
    for pat in _ANCHORS:
        for m in reversed(list(pat.finditer(text))):  # the last anchor with an answer after it
            found = _after_anchor(text[m.end() :])
            if found:
                return Extraction(strip_math_delims(found), "anchor")
    plain = _LABEL.sub("", strip_math_delims(text)) if gold or "\n" not in text.strip() else ""
    if plain and len(plain) <= 400 and (gold or _prose_words(plain) < 3):
        return Extraction(plain, "bare")
    return _unanchored(text, question)


def _unanchored(text: str, question: str | None) -> Extraction:
    """The last math span or number of a long response, unless it restates the problem."""
    spans = [(m.end(), next(g for g in m.groups() if g is not None)) for m in _MATH_SPAN.finditer(text)]
    nums = [(m.end(), m.group(0)) for m in NUMBER_RE.finditer(text)]
    nums = [(end, n) for end, n in nums if not any(s_end >= end > s_end - len(s) - 2 for s_end, s in spans)]
    cands = sorted(spans + nums)
    if not cands:
        return Extraction(None, "none")
    end, cand = cands[-1]
    cand = cand.strip()
    sentence = re.split(r"(?<=[.!?])\s|\n", text[:end])[-1]
    if re.search(r"\d\$?\s*(?:,\s*)?\bor\b\s*\$?-?\d", sentence + text[end : end + 40].split("\n")[0]):
        return Extraction(None, "hedged: several values joined by 'or'")
    if in_question(cand, question):
        return Extraction(None, "restates the question")
    cue = _CUES.search(sentence)
    if cue and not re.search(r"\b(is|equals|gives|get|obtain)\b|=", sentence[cue.end() :]):
        return Extraction(None, "last expression is part of an instruction, not an answer")
    return Extraction(strip_math_delims(cand), "last")
