"""Parsers for final answers and a strict format grader.

Parsers return ``None`` when there is nothing to extract; they never guess:

- ``strip_think``: drop ``<think>...</think>`` reasoning (also a leading block whose opening
  tag was in the prompt, as chat templates of reasoning models do).
- ``extract_boxed`` / ``extract_all_boxed``: ``\\boxed{...}`` (and ``\\fbox{...}``) with nested braces.
- ``extract_answer_line``: the last "Answer: ..." line or "the final answer is ...".
- ``extract_xml`` and ``XMLParser``: contents of ``<tag>...</tag>``.

``format_grader`` is strict: each required tag exactly once, opened and closed, not nested in
another, in the declared order; a duplicated or mismatched tag scores 0 with the reason in
``detail``.

Labeled suite lines (``verigym verifier-bench --grader format``): ``{"id", "text", "tags"?:
[...], "required"?: [...], "ordered"?: bool, "boxed"?: bool, "label": bool}`` — ``label`` true
when the layout is right (``tags`` default ``["think", "answer"]``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verigym.graders.families import GraderFamily
from verigym.rubric import Grader
from verigym.types import Grade, Task, Trajectory

__all__ = [
    "BENCH",
    "SUITE_FIELDS",
    "XMLParser",
    "bench_verdict",
    "extract_all_boxed",
    "extract_answer_line",
    "extract_boxed",
    "extract_xml",
    "format_errors",
    "format_grader",
    "strip_think",
]

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)


def strip_think(text: str) -> str:
    """``text`` without its reasoning.

    Closed ``<think>...</think>`` blocks are removed; a ``</think>`` with no opening tag (the
    template opened it) drops everything before it; an unclosed ``<think>`` drops everything
    after it (the model never finished thinking, so there is no answer). Linear in the text.
    """
    if "<" not in text:  # no tag at all (the usual reply)
        return text.strip()
    close, opened = _THINK_CLOSE.search(text), _THINK_OPEN.search(text)
    if close and (not opened or close.start() < opened.start()):
        text = text[close.end() :]
    # each <think> up to the first </think> after it (what a lazy <think>.*?</think> removes), in one
    # pass: once an opening tag has no closing one after it, no later one has either
    kept: list[str] = []
    pos = 0
    while (opened := _THINK_OPEN.search(text, pos)) is not None:
        close = _THINK_CLOSE.search(text, opened.end())
        if close is None:
            break
        kept.append(text[pos : opened.start()])
        pos = close.end()
    if kept:
        text = "".join(kept) + text[pos:]
    dangling = _THINK_OPEN.search(text)
    if dangling:
        text = text[: dangling.start()]
    return text.strip()


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE = re.compile(r"[{}]")


def _boxed_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the content of every balanced ``\\boxed{...}``, in order of start.

    One pass over the braces (a stack of the open ones), so the time is linear in the text even
    when it holds many unclosed ``\\boxed{``.
    """
    openers = {m.end() - 1 for m in _BOXED.finditer(text)}
    if not openers:
        return []
    spans: list[tuple[int, int]] = []
    stack: list[int] = []  # the braces still open, innermost last
    for brace in _BRACE.finditer(text, min(openers)):
        at = brace.start()
        if text[at] == "{":
            stack.append(at)
        elif stack:
            start = stack.pop()
            if start in openers:
                spans.append((start + 1, at))
    spans.sort()
    return spans


def extract_all_boxed(text: str) -> list[str]:
    """The contents of every balanced ``\\boxed{...}`` in order (unbalanced ones are skipped)."""
    return [text[start:end].strip() for start, end in _boxed_spans(text)]


def extract_boxed(text: str) -> str | None:
    """The content of the LAST balanced ``\\boxed{...}`` (nested braces kept), or None."""
    spans = _boxed_spans(text)
    return text[spans[-1][0] : spans[-1][1]].strip() if spans else None


# possessive runs (``*+``): the same matches, without the backtracking that made a line of
# "answer" and thousands of spaces cost quadratic time
_ANSWER_LINE = re.compile(
    r"(?:^|\n)[ \t>*#_-]*+(?:final[ \t]++)?answer[ \t]*+[*_]*+[ \t]*+[:：][*_]*[ \t]*([^\n]*)", re.IGNORECASE
)
_FINAL_IS = re.compile(r"final answer is[ \t:]*([^\n]*)", re.IGNORECASE)


def _clean_answer(value: str) -> str:
    value = value.strip().strip("*_").strip().rstrip(".").strip()
    if value.startswith("$") and value.endswith("$") and len(value) > 1:
        value = value.strip("$").strip()
    return value.rstrip(".").strip()


def extract_answer_line(text: str) -> str | None:
    """The answer after the last "Answer:" line (also "**Final Answer:**") or "final answer is".

    Whichever of the two forms comes last in the text wins; an empty answer is None.
    """
    has_colon = ":" in text or "：" in text  # an "Answer:" line needs one
    candidates = [(m.start(), m.group(1)) for m in _ANSWER_LINE.finditer(text)] if has_colon else []
    candidates += [(m.start(), m.group(1)) for m in _FINAL_IS.finditer(text)]
    if not candidates:
        return None
    value = _clean_answer(max(candidates)[1])
    return value or None


def _tag_pattern(tag: str) -> re.Pattern[str]:
    if not re.fullmatch(r"[A-Za-z_][\w.-]*", tag):
        raise ValueError(f"invalid XML tag name {tag!r}")
    return re.compile(rf"<{re.escape(tag)}\s*>(.*?)</{re.escape(tag)}\s*>", re.DOTALL)


def extract_xml(text: str, tag: str) -> str | None:
    """The stripped content of the LAST ``<tag>...</tag>`` in ``text``, or None."""
    found = _tag_pattern(tag).findall(text)
    return found[-1].strip() if found else None


def format_errors(
    text: str, tags: Sequence[str], *, required: Sequence[str] | None = None, ordered: bool = True
) -> list[str]:
    """What is wrong with the layout of ``tags`` in ``text`` ([] when it is well-formed).

    Each tag of ``required`` (default: all ``tags``) must appear exactly once; every tag that
    appears must be opened and closed, not nested inside another of ``tags``, at most once,
    and (``ordered``) in the order of ``tags``.
    """
    names = list(tags)
    if not names:
        raise ValueError("format_errors needs at least one tag")
    for name in names:
        _tag_pattern(name)
    need = list(names if required is None else required)
    alternation = "|".join(re.escape(n) for n in names)
    token = re.compile(rf"<(/?)({alternation})\s*>")
    errors: list[str] = []
    open_tag: str | None = None
    seen: list[str] = []
    for m in token.finditer(text):
        closing, name = m.group(1) == "/", m.group(2)
        if not closing:
            if open_tag is not None:
                errors.append(f"<{name}> opened inside <{open_tag}>")
                break
            if name in seen:
                errors.append(f"<{name}> appears more than once")
                break
            open_tag = name
        else:
            if open_tag != name:
                errors.append(f"</{name}> without a matching <{name}>")
                break
            seen.append(name)
            open_tag = None
    if not errors and open_tag is not None:
        errors.append(f"<{open_tag}> is never closed")
    if errors:
        return errors
    errors += [f"missing <{name}>" for name in need if name not in seen]
    if ordered and seen != sorted(seen, key=names.index):
        errors.append(f"tags out of order: expected {', '.join(n for n in names if n in seen)}")
    return errors


@dataclass(frozen=True)
class XMLParser:
    """Reads and writes a fixed set of XML-tagged fields, e.g. ``XMLParser(["think", "answer"])``.

    ``answer_field`` (default: the last field) is what ``parse_answer`` returns.
    """

    fields: tuple[str, ...]
    answer_field: str = ""

    def __init__(self, fields: Sequence[str], answer_field: str | None = None) -> None:
        if not fields:
            raise ValueError("XMLParser needs at least one field")
        for name in fields:
            _tag_pattern(name)
        object.__setattr__(self, "fields", tuple(fields))
        chosen = answer_field or fields[-1]
        if chosen not in fields:
            raise ValueError(f"answer_field {chosen!r} is not one of {list(fields)}")
        object.__setattr__(self, "answer_field", chosen)

    def parse(self, text: str) -> dict[str, str | None]:
        """Each field's last value in ``text`` (None where absent)."""
        return {name: extract_xml(text, name) for name in self.fields}

    def parse_answer(self, text: str) -> str | None:
        """The last value of the answer field in ``text`` (None when absent)."""
        return extract_xml(text, self.answer_field)

    def format(self, **values: str) -> str:
        """Render the fields given, in declared order: ``<think>\\n...\\n</think>\\n<answer>...``."""
        unknown = set(values) - set(self.fields)
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)}; fields are {list(self.fields)}")
        return "\n".join(f"<{n}>\n{values[n]}\n</{n}>" for n in self.fields if n in values)

    def errors(self, text: str, *, required: Sequence[str] | None = None, ordered: bool = True) -> list[str]:
        return format_errors(text, self.fields, required=required, ordered=ordered)

    def grader(self, *, weight: float = 1.0, name: str = "format") -> Grader:
        """A strict format grader over this parser's fields."""
        return format_grader(self.fields, weight=weight, name=name)


def format_grader(
    tags: Sequence[str] = ("think", "answer"),
    *,
    required: Sequence[str] | None = None,
    ordered: bool = True,
    boxed: bool = False,
    weight: float = 1.0,
    name: str = "format",
) -> Grader:
    """A grader scoring 1 when the final answer's layout is exactly right, else 0 with the reason.

    ``tags``: the tags checked strictly (see ``format_errors``); pass ``()`` to check only
    ``boxed``. ``boxed``: also require exactly one ``\\boxed{...}`` outside reasoning.
    """
    tag_list = list(tags)
    for tag in tag_list:
        _tag_pattern(tag)

    def check(task: Task, trajectory: Trajectory) -> Grade:
        errors = _layout_errors(trajectory.final_text, tag_list, required, ordered, boxed)
        return Grade(score=0.0 if errors else 1.0, detail="; ".join(errors) or "ok")

    return Grader(check, weight=weight, name=name)


SUITE_FIELDS = ("id", "text", "label")


def _layout_errors(
    text: str, tags: Sequence[str], required: Sequence[str] | None, ordered: bool, boxed: bool
) -> list[str]:
    errors = format_errors(text, tags, required=required, ordered=ordered) if tags else []
    if boxed:
        count = len(extract_all_boxed(strip_think(text)))
        if count != 1:
            errors.append(f"expected exactly one \\boxed{{}}, found {count}")
    return errors


def bench_verdict(line: dict[str, Any]) -> bool:
    """Accept (True) when ``line["text"]`` has the layout the line asks for."""
    tags = list(line.get("tags", ["think", "answer"]))
    return not _layout_errors(
        str(line["text"]),
        tags,
        line.get("required"),
        bool(line.get("ordered", True)),
        bool(line.get("boxed")),
    )


BENCH = GraderFamily("format", bench_verdict, suites=("format.jsonl",), fields=SUITE_FIELDS)
