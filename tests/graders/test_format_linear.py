"""The answer parsers of ``graders/format.py`` run in linear time and parse exactly as before.

They read model output, which can be degenerate (thousands of unclosed ``\\boxed{`` or
``<think>``, an "answer" line of spaces); the previous versions took quadratic time there (100 s
for 100 k characters of ``\\boxed{``). The reference implementations below are those versions,
kept to show on random texts that the linear ones give the same results.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable

import pytest

from verigym.envs.builtin.arithmetic import parse_integer
from verigym.graders import format as fmt
from verigym.graders._hacking_text import final_answers
from verigym.graders.format import extract_all_boxed, extract_answer_line, extract_boxed, strip_think

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_LINE = re.compile(
    r"(?:^|\n)[ \t>*#_-]*(?:final[ \t]+)?answer[ \t]*[*_]*[ \t]*[:：][*_]*[ \t]*([^\n]*)", re.IGNORECASE
)


def strip_think_before(text: str) -> str:
    closes = list(_THINK_CLOSE.finditer(text))
    opens = list(_THINK_OPEN.finditer(text))
    if closes and (not opens or closes[0].start() < opens[0].start()):
        text = text[closes[0].end() :]
    text = _THINK_BLOCK.sub("", text)
    dangling = _THINK_OPEN.search(text)
    if dangling:
        text = text[: dangling.start()]
    return text.strip()


def extract_all_boxed_before(text: str) -> list[str]:
    out: list[str] = []
    for match in _BOXED.finditer(text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            i += 1
        if depth == 0:
            out.append(text[match.end() : i - 1].strip())
    return out


def answer_lines_before(text: str) -> list[tuple[int, str]]:
    return [(m.start(), m.group(1)) for m in _ANSWER_LINE.finditer(text)]


def extract_answer_line_before(text: str) -> str | None:
    candidates = answer_lines_before(text)
    candidates += [(m.start(), m.group(1)) for m in fmt._FINAL_IS.finditer(text)]
    return (fmt._clean_answer(max(candidates)[1]) or None) if candidates else None


PIECES = [
    "<think>", "</think>", "<THINK>", "</Think>", "\\boxed{", "\\boxed {", "\\fbox{", "\\boxed", "{", "}",
    "}}", "a", "x y", " ", "\t", "\n", "answer", "Answer:", "final answer", "Final Answer:", "**", "*",
    "_", ":", "：", ">", "#", "-", "12", "3.0", "-7", "1,234",
]  # fmt: skip


def test_same_results_as_the_quadratic_versions_on_random_texts() -> None:
    rng = random.Random(0)
    for _ in range(4000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40)))
        assert strip_think(text) == strip_think_before(text), text
        assert extract_all_boxed(text) == extract_all_boxed_before(text), text
        before = extract_all_boxed_before(text)
        assert extract_boxed(text) == (before[-1] if before else None), text
        assert [(m.start(), m.group(1)) for m in fmt._ANSWER_LINE.finditer(text)] == answer_lines_before(text)
        assert extract_answer_line(text) == extract_answer_line_before(text), text


ADVERSARIAL = {
    "unclosed boxed": "\\boxed{" * 20_000,
    "unclosed think": "<think>" * 20_000,
    "answer lines of spaces": ("\nanswer" + " " * 16_000) * 9,
    "answer line of tabs and stars": "\nanswer" + " \t" * 20_000 + "*" * 20_000 + " " * 40_000,
    "nested boxed": "\\boxed{" * 10_000 + "}" * 10_000,
    "digits": "1" * 4000,
}


def _cpu_s(fn: Callable[[], object]) -> float:
    """The least CPU time of this thread over three calls of ``fn``: neither other processes on the
    machine nor a one-off pause count."""
    best = float("inf")
    for _ in range(3):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_degenerate_replies_parse_in_linear_time(name: str) -> None:
    text = ADVERSARIAL[name]  # up to ~140 k characters; the quadratic versions took 2 s to minutes

    def parse() -> None:
        parse_integer(text)
        strip_think(text)
        extract_boxed(text)
        extract_answer_line(text)
        final_answers(text)  # the hacking detectors' reading of the same boxes

    def scan() -> None:  # the unit of linear work: one Python loop over the characters
        for _ in text:
            pass

    # the cost in units of that loop, so the machine's speed and load cancel out: the linear
    # parsers cost 10 to 110 of them (110: the nested boxes, whose contents overlap), the
    # quadratic versions kept above 20,000 to 150,000
    units = _cpu_s(parse) / max(_cpu_s(scan), 1e-6)
    assert units < 2000, units
