"""The form a question demands (issue 27): read from the question, enforced on the written answer,
named in every rejection, decided the same in-process and in the full check, and equal products
accepted in any order (``tests/suites/math_forms.jsonl``)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from verigym.graders.math import check_equivalent, math_grader
from verigym.graders.math._demanded._forms import demanded
from verigym.graders.math._equivalence import _fast
from verigym.graders.math._sympy_path._check import check
from verigym.types import Grade, Message, Task, Trajectory, Turn

SUITE = Path(__file__).resolve().parents[2] / "suites" / "math_forms.jsonl"
LINES = [json.loads(raw) for raw in SUITE.read_text().splitlines() if raw.strip()]
CATEGORIES = {"seed", "lowest", "fraction", "improper", "mixed", "rationalized", "radical", "exact"}
CATEGORIES |= {"nearest", "decimal", "product", "sum"}


def _args(line: dict[str, str]) -> tuple[str, str, str, str | None]:
    return line["gold"], line["pred"], line.get("mode") or "equivalent", line.get("question")


def test_forms_suite_has_no_misses_and_both_labels_in_every_class() -> None:
    assert len(LINES) >= 250
    cats = {line["id"].rsplit("-", 1)[0] for line in LINES}
    assert cats == CATEGORIES
    for cat in cats:
        labels = {line["label"] for line in LINES if line["id"].startswith(cat + "-")}
        assert labels == {True, False}, cat
    misses = []
    for line in LINES:
        gold, pred, mode, question = _args(line)
        verdict = check_equivalent(gold, pred, mode=mode, question=question, timeout=None)
        assert verdict.error is None, (line["id"], verdict.reason)
        if verdict.accepted != line["label"]:
            misses.append((line["id"], verdict.reason))
    assert misses == []


def test_every_form_rejection_names_the_demand_and_where_it_came_from() -> None:
    named = 0
    for line in LINES:
        gold, pred, mode, question = _args(line)
        forms = demanded(mode, question)
        verdict = check_equivalent(gold, pred, mode=mode, question=question, timeout=None)
        if line["label"] or not forms.demands or verdict.accepted:
            continue
        assert verdict.reason.startswith(
            ("not in the demanded form (", "not equivalent", "the answer restates")
        ), verdict.reason
        if verdict.reason.startswith("not in the demanded form ("):
            name = verdict.reason.split("(", 1)[1].split(",", 1)[0]
            assert name in {d.name for d in forms.demands}, (line["id"], verdict.reason)
            assert "from the question" in verdict.reason or "from the mode" in verdict.reason
            named += 1
    assert named >= 80


def test_in_process_paths_decide_forms_like_the_full_check() -> None:
    decided = 0
    for line in LINES:
        args = _args(line)
        fast = _fast(args)
        if fast is None:
            continue
        decided += 1
        slow = check(*args)
        assert (fast[0], fast[2]) == (slow[0], slow[2]), (line["id"], fast, slow)
        assert fast[1] == slow[1], (line["id"], fast, slow)
    assert decided >= 0.9 * len(LINES), decided


QUESTIONS = [
    "Give your answer in simplest form.",
    "Express your answer as a common fraction.",
    "Express your answer as an improper fraction.",
    "Express your answer as a mixed number.",
    "Rationalize the denominator.",
    "Express your answer in simplest radical form.",
    "Find the exact value.",
    "Round to the nearest tenth.",
    "Give the answer to the nearest hundredth, as a decimal.",
    "Express your answer as a decimal.",
    "Express your answer as a common fraction, rounded to the nearest tenth.",
    None,
]


def _writing(rng: random.Random, p: int, q: int, sign: str) -> str:
    k = rng.choice([1, 1, 2, 3])
    whole, rest = divmod(p, q)
    return rng.choice(
        [
            f"{sign}\\frac{{{p * k}}}{{{q * k}}}",
            f"\\frac{{{sign}{p * k}}}{{{q * k}}}",
            f"{sign}{p * k}/{q * k}",
            f"{sign}{p / q:.{rng.randint(1, 5)}f}",
            f"{sign}{whole}\\frac{{{rest * k}}}{{{q * k}}}" if whole and rest else f"{sign}{p}/{q}",
            f"{sign}{whole} {rest}/{q}" if whole and rest else f"{sign}\\frac{{{p}}}{{{q}}}",
            f"{sign}\\frac{{{p}\\sqrt{{2}}}}{{{q}\\sqrt{{2}}}}",
            f"{sign}\\sqrt{{{p * p * k}}}/{q}",
            f"{sign}{p * 1.4142135623730951 / q:.{rng.randint(1, 6)}f}",
            f"{sign}\\frac{{{p}}}{{{q}}}\\sqrt{{2}}",
            f"{sign}\\frac{{{p}}}{{{q}\\sqrt{{2}}}}",
        ]
    )


def test_forms_fuzzed_in_process_never_differs_from_the_full_check() -> None:
    rng = random.Random(27)
    decided = 0
    for _ in range(400):
        p, q = rng.randint(1, 30), rng.randint(2, 12)
        sign = rng.choice(["", "-"])
        gold = rng.choice(
            [f"{sign}\\frac{{{p}}}{{{q}}}", f"{sign}\\frac{{{p}\\sqrt{{2}}}}{{{q}}}", f"{sign}{p / q}"]
        )
        args = (gold, _writing(rng, p, q, sign), rng.choice(["equivalent", "equivalent", "simplest_form"]))
        full = (*args, rng.choice(QUESTIONS))
        fast = _fast(full)
        if fast is None:
            continue
        decided += 1
        slow = check(*full)
        assert (fast[0], fast[1], fast[2]) == slow, (full, fast, slow)
    assert decided >= 300, decided


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("Give your answer in simplest form.", {"simplest form"}),
        ("Write the fraction in lowest terms.", {"simplest form"}),
        ("Express your answer as a common fraction.", {"common fraction"}),
        ("Express the answer as a fraction.", {"fraction"}),
        ("What is the shaded area as a fraction of the square?", set()),
        ("Express your answer as an improper fraction.", {"improper fraction"}),
        ("Express your answer as a mixed number.", {"mixed number"}),
        ("Write it as an improper fraction rather than a mixed number.", {"improper fraction"}),
        ("Simplify and rationalize the denominator.", {"rationalized denominator"}),
        ("Express your answer in simplest radical form.", {"simplest radical form"}),
        ("Find the exact value of sin 15.", {"exact value"}),
        ("Do not approximate.", {"exact value"}),
        (r"Express the area in terms of $\pi$.", {"exact value"}),
        ("Express your answer as a decimal.", {"decimal form"}),
        ("Give a fraction, not as a decimal.", set()),
        ("What is x to the nearest tenth?", {"nearest tenth"}),
        ("Round to two decimal places.", {"2 decimal places"}),
        ("Round to the nearest hundred.", {"nearest hundred"}),
        ("What point on the line is nearest to the origin?", set()),
        ("Find the exact value, then give it approximately.", set()),  # an approximation drops exactness
        ("How many marbles are red?", set()),
        (None, set()),
    ],
)
def test_phrases_to_demands(question: str | None, names: set[str]) -> None:
    assert {d.name for d in demanded("equivalent", question).demands} == names


def test_an_explicit_mode_wins_over_the_question() -> None:
    assert demanded("exact_decimal:2", "Express your answer as a common fraction.").demands == ()
    simplest = demanded("simplest_form", "Round to the nearest tenth. Express it as a decimal.")
    assert [d.name for d in simplest.demands] == ["simplest form"] and simplest.places is None
    assert {d.name for d in demanded("with_units", "Give it as a common fraction.").demands} == {
        "common fraction"
    }
    ok = check_equivalent(r"\frac{1}{3}", "0.33", mode="exact_decimal:2", question="as a common fraction")
    assert ok.accepted
    rounded = check_equivalent(r"\frac{1}{3}", "0.3", mode="simplest_form", question="to the nearest tenth")
    assert not rounded.accepted and "simplest form, from the mode simplest_form" in rounded.reason


def test_units_and_mixed_numbers_as_written() -> None:
    assert not check_equivalent("6xy", "6ab", timeout=None).accepted  # letters are not a unit
    assert not check_equivalent("2xy", "2", timeout=None).accepted
    assert check_equivalent("5 cm", "5", timeout=None).accepted  # a unit symbol still is
    assert check_equivalent("12 \\text{ m}^2", "12", timeout=None).accepted
    assert check_equivalent(r"\frac{7}{2}", "3 1/2", timeout=None).accepted  # a mixed number
    assert not check_equivalent(r"\frac{7}{2}", "3 5/2", timeout=None).accepted


def test_the_grader_detail_names_the_rule() -> None:
    task = Task(
        id="t",
        prompt=(Message(role="user", content="Express your answer as a common fraction."),),
        answer=r"\frac{3}{8}",
    )

    def traj(text: str) -> Trajectory:
        reply = Message(role="assistant", content=text)
        return Trajectory(
            task_id="t", prompt=list(task.prompt), turns=[Turn(source="model", messages=[reply])]
        )

    grader = math_grader()
    bad = grader.fn(task, traj(r"\boxed{0.375}"))
    good = grader.fn(task, traj(r"\boxed{\frac{3}{8}}"))
    assert isinstance(bad, Grade) and isinstance(good, Grade)  # math_grader returns a Grade
    assert bad.score == 0.0 and "common fraction" in bad.detail and "0.375 is a decimal" in bad.detail
    assert good.score == 1.0


def test_form_checks_do_not_import_sympy() -> None:
    code = (
        "import sys\n"
        "from verigym.graders.math._demanded._forms import demanded, enforce\n"
        "from verigym.graders.math._demanded._rounding import fast_round\n"
        "from verigym.graders.math._shared._rules import prepare\n"
        "ans = prepare('\\\\frac{1}{2}', '\\\\frac{-2}{4}', None)\n"
        "out = enforce(demanded('simplest_form', None), ans, fast_round, strict=True)\n"
        "assert out[0] is False and 'lowest terms' in out[1], out\n"
        "ans = prepare('\\\\sqrt{2}', '1.4', None)\n"
        "assert enforce(demanded('equivalent', 'to the nearest tenth'), ans, fast_round, strict=True).gold == '1.4'\n"
        "assert 'sympy' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
