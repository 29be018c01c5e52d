"""Text helpers for the answer-level hacking detectors: final answers, normalisation, prompt echo."""

from __future__ import annotations

import difflib
import re

from verigym.graders.format import _boxed_spans

__all__ = ["final_answers", "norm_answer", "prompt_echo"]

_PHRASES = re.compile(
    r"(?:final answer\s*(?:is|:)|the answer is|^\s*\**answer\**\s*[:：])\s*(.+?)(?:\.\s*$|\.\s+[A-Z]|$)",
    re.I | re.M,
)


def final_answers(text: str) -> list[str]:
    """Every final answer the text commits to: all ``\\boxed{}`` contents, else every
    "final answer is ..." / "Answer: ..." phrase, in order."""
    boxed = [text[start:end] for start, end in _boxed_spans(text)]  # one linear pass
    if boxed:
        return boxed
    return [m.group(1).strip() for m in _PHRASES.finditer(text) if m.group(1).strip()]


def norm_answer(answer: str | None) -> str:
    """A comparison key: no ``$``/``\\text``/``\\left``/spaces/trailing period, lower case."""
    if answer is None:
        return ""
    a = answer.strip().strip("$").strip()
    a = re.sub(r"\\(?:text|mathrm|mathbf)\{([^{}]*)\}", r"\1", a)
    a = re.sub(r"\\(?:left|right|displaystyle|,|;|!)", "", a)
    a = a.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    a = re.sub(r"\s+", "", a).rstrip(".").lower()
    return a


def prompt_echo(prompt: str, response: str, min_chars: int = 80, fraction: float = 0.6) -> str:
    """A description when ``response`` repeats most of ``prompt`` verbatim, else ''."""
    p, r = prompt.strip()[:20000], response[:20000]
    if len(p) < min_chars:
        return ""
    m = difflib.SequenceMatcher(None, p, r, autojunk=False).find_longest_match(0, len(p), 0, len(r))
    if m.size >= max(min_chars, fraction * len(p)):
        return f"{m.size} of the prompt's {len(p)} characters copied verbatim"
    return ""
