"""Answer parsers (think, boxed, Answer: lines, XML) and the strict format grader."""

from __future__ import annotations

import pytest

from verigym.graders.format import (
    XMLParser,
    extract_all_boxed,
    extract_answer_line,
    extract_boxed,
    extract_xml,
    format_errors,
    format_grader,
    strip_think,
)
from verigym.types import Message, Task, Trajectory, Turn

TASK = Task(id="t", prompt=(Message(role="user", content="q"),))


def traj(text: str) -> Trajectory:
    return Trajectory(
        task_id="t",
        prompt=[],
        turns=[Turn(source="model", messages=[Message(role="assistant", content=text)])],
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>2+2 is 5?</think>The answer is 4", "The answer is 4"),
        ("<THINK>a</THINK> x <think>b</think> y", "x  y"),
        ("reasoning from the template</think>\n42", "42"),
        ("ok <think>never finished", "ok"),
        ("no reasoning", "no reasoning"),
    ],
)
def test_strip_think(text: str, expected: str) -> None:
    assert strip_think(text) == expected


def test_boxed_nested_and_last() -> None:
    assert extract_boxed(r"first \boxed{1} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert extract_boxed(r"\fbox{ 7 }") == "7"
    assert extract_boxed(r"\boxed{unclosed {") is None
    assert extract_boxed("nothing") is None
    assert extract_all_boxed(r"\boxed{a} \boxed{b{c}} \boxed{d") == ["a", "b{c}"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("work...\nAnswer: 42", "42"),
        ("**Final Answer:** $x=3$.", "x=3"),
        ("answer: 1\nmore\nAnswer: 2", "2"),
        ("So the final answer is 17.", "17"),
        ("Answer:   \n", None),
        ("the answers are many", None),
    ],
)
def test_answer_line(text: str, expected: str | None) -> None:
    assert extract_answer_line(text) == expected


def test_xml_and_parser() -> None:
    assert extract_xml("<answer> 1 </answer><answer>2</answer>", "answer") == "2"
    assert extract_xml("<answer>1", "answer") is None
    parser = XMLParser(["think", "answer"])
    text = parser.format(think="hmm", answer="4")
    assert text == "<think>\nhmm\n</think>\n<answer>\n4\n</answer>"
    assert parser.parse(text) == {"think": "hmm", "answer": "4"}
    assert parser.parse_answer(text) == "4" and parser.errors(text) == []
    with pytest.raises(ValueError, match="unknown fields"):
        parser.format(verdict="x")
    with pytest.raises(ValueError, match="invalid XML tag"):
        XMLParser(["bad tag"])


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("<think>a</think><answer>4</answer>", None),
        ("<think>a</think>\nsome text\n<answer>4</answer>", None),
        ("<answer>4</answer>", "missing <think>"),
        ("<think>a</think><answer>4</answer><answer>5</answer>", "appears more than once"),
        ("<think>a</think><answer>4</answr>", "never closed"),
        ("<think>a</answer><answer>4</answer>", "</answer> without"),
        ("<think>a<answer>4</answer></think>", "opened inside <think>"),
        ("<answer>4</answer><think>a</think>", "out of order"),
        ("</think><answer>4</answer>", "</think> without"),
    ],
)
async def test_format_grader_is_strict(text: str, error: str | None) -> None:
    grade = await format_grader().grade(TASK, traj(text))
    assert grade.ok
    if error is None:
        assert grade.score == 1.0, grade.detail
    else:
        assert grade.score == 0.0 and error in grade.detail


async def test_format_grader_options() -> None:
    optional_think = format_grader(required=["answer"])
    assert (await optional_think.grade(TASK, traj("<answer>4</answer>"))).score == 1.0
    boxed = format_grader((), boxed=True, name="boxed")
    assert boxed.name == "boxed"
    assert (await boxed.grade(TASK, traj(r"<think>\boxed{3}</think> so \boxed{4}"))).score == 1.0
    hedged = await boxed.grade(TASK, traj(r"\boxed{3} or \boxed{4}"))
    assert hedged.score == 0.0 and "found 2" in hedged.detail
    assert format_errors("<a>x</a>", ["a", "b"], required=["a"], ordered=False) == []
    assert XMLParser(["answer"]).grader().name == "format"
