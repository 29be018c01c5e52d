"""Equivalence, extraction and strictness modes of the math grader (in-process, no timeout)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verigym.graders.math import check_equivalent, extract_answer

SUITE = Path(__file__).resolve().parents[2] / "suites" / "math.jsonl"


def ok(gold: str, pred: str, mode: str = "equivalent", question: str | None = None) -> bool:
    verdict = check_equivalent(gold, pred, mode=mode, timeout=None, question=question)
    assert verdict.error is None, verdict.reason
    return verdict.accepted


@pytest.mark.parametrize(
    ("gold", "pred", "expected"),
    [
        (r"\frac{1}{2004!}", r"\frac{1}{2006!}", False),  # tiny values are not chopped to zero
        ("4", r"4\sqrt{2}", False),
        (r"2x + 3y = 6", r"2x + 3y = 7", False),  # different lines, although both "parse to 0"
        (r"1 - \frac{1}{e}", r"1 + \frac{1}{e}", False),
        (r"\sqrt{1/n}", r"\frac{1}{\sqrt n}", True),  # Math-Verify's known false negative
        ("1000.05", "1000", False),
        ("50", "0.5", False),
        (r"\pi", "3.14", False),
        (r"\frac{1}{3}", "0.3333", True),
        ("7425000", "7,425,000", True),
        ("32349", "32, 349", False),
        ("5", "x = 5", True),
        (r"y = 2x + 1", r"2x - y + 1 = 0", True),
        (r"xy = 6", r"y = \frac{6}{x}", True),
        ("(0,1)", "[0,1]", False),
        (r"(1, \infty)", "x > 1", True),
        (r"(1, \infty)", r"x \ge 1", False),
        (r"\{1,2,3\}", r"\{3,2,1\}", True),
        ("(1,2)", "(2,1)", False),
        (r"\begin{pmatrix}1 & 2\\3 & 4\end{pmatrix}", r"\begin{bmatrix}1 & 2\\3 & 4\end{bmatrix}", True),
        (r"\begin{pmatrix}1 & 2\\3 & 4\end{pmatrix}", r"\begin{pmatrix}1 & 3\\2 & 4\end{pmatrix}", False),
        ("3+4i", "4i+3", True),
        ("3+4i", "3-4i", False),
        (r"25\%", "0.25", True),
        (r"\frac{\pi}{6}", r"30^\circ", True),
        (r"\frac{\pi}{6}", "30", False),
        (r"f(x) = 2x + 1", r"f(t) = 2t + 1", True),
        ("f(x)", "f(y)", False),
        (r"\sin^2 x + \cos^2 x", "1", True),
    ],
)
def test_equivalence(gold: str, pred: str, expected: bool) -> None:
    assert ok(gold, pred) is expected


def test_hedged_boxes_fail_unless_the_reference_is_that_set() -> None:
    assert not ok("2", r"It is $\boxed{2}$ or perhaps $\boxed{3}$.")
    assert ok("2, 3", r"The roots are $\boxed{2}$ and $\boxed{3}$.")
    assert ok("2", r"So $\boxed{2}$. Checking again: $\boxed{2}$.")
    verdict = check_equivalent("2", r"\boxed{2} \boxed{3}", timeout=None)
    assert not verdict.accepted and "hedge" in verdict.reason


def test_extraction_anchors_and_unanchored_guard() -> None:
    assert extract_answer("Work: 10 + 7.\nAnswer: 17") == "17"
    assert extract_answer("Thus the final answer is $\\frac{3}{4}$. I hope it is correct.") == "\\frac{3}{4}"
    assert extract_answer("<think>2? 4?</think> The answer is 5.") == "5"
    assert extract_answer(r"We need to simplify $\frac{x^2-1}{x-1}$.") is None
    assert not ok("x+1", r"Simplify $\frac{x^2-1}{x-1}$ by factoring.")
    question = r"Simplify $\frac{x^2-1}{x-1}$."
    assert not ok(r"\frac{x^2-1}{x-1}", r"Look at $\frac{x^2-1}{x-1}$ once more.", question=question)
    assert ok("x+1", r"Cancelling the common factor leaves $x+1$.", question=question)
    assert not check_equivalent("3", "", timeout=None).accepted


def test_strictness_modes() -> None:
    assert ok(r"\frac{1}{2}", r"\frac{2}{4}")
    assert not ok(r"\frac{1}{2}", r"\frac{2}{4}", mode="simplest_form")
    assert ok(r"\frac{1}{2}", r"\frac{1}{2}", mode="simplest_form")
    assert not ok(r"2\sqrt{2}", r"\sqrt{8}", mode="simplest_form")
    assert ok(r"\frac{1}{3}", "0.33", mode="exact_decimal:2")
    assert not ok(r"\frac{1}{3}", "0.333", mode="exact_decimal:2")
    assert not ok(r"\frac{1}{3}", r"\frac{1}{3}", mode="exact_decimal(2)")
    assert ok("2.25", "2.3", mode="exact_decimal:1")  # half up
    assert ok(r"5 \text{ cm}", "5")
    assert not ok(r"5 \text{ cm}", "5", mode="with_units")
    assert ok(r"5 \text{ cm}", r"5\,\mathrm{cm}", mode="with_units")
    assert not ok(r"25\%", "25", mode="with_units")
    with pytest.raises(ValueError, match="unknown math mode"):
        check_equivalent("1", "1", mode="roughly")
    with pytest.raises(ValueError, match="places"):
        check_equivalent("1", "1", mode="exact_decimal")


def test_own_suite_has_no_misses_and_required_coverage() -> None:
    lines = [json.loads(raw) for raw in SUITE.read_text().splitlines() if raw.strip()]
    assert len(lines) >= 150
    cats = {line["id"].rsplit("-", 1)[0] for line in lines}
    assert {"known", "units", "percent", "degrees", "thousands", "named", "interval", "set", "tuple"} <= cats
    assert {"matrix", "complex", "hedge", "extract", "mode"} <= cats
    misses = [
        line["id"]
        for line in lines
        if ok(line["gold"], line["pred"], line.get("mode", "equivalent"), line.get("question"))
        != line["label"]
    ]
    assert misses == []


def test_unreadable_reference_is_an_error_not_a_zero() -> None:
    verdict = check_equivalent("⊕⊗", "2, 3", timeout=None)
    assert verdict.error is not None and "not parseable" in verdict.reason and not verdict.accepted
    assert check_equivalent("⊕⊗", "⊕⊗", timeout=None).accepted  # the same text is still a match
    assert check_equivalent("", "5", timeout=None).error is not None
