"""The in-process paths together (exact, float, text: ``_grader._fast``) never decide differently
from the full sympy check, and the text path reads prose as the full check does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from verigym.graders.math._equivalence import _fast
from verigym.graders.math._exact_path._text import text_decide
from verigym.graders.math._shared._rules import Answers, prepare
from verigym.graders.math._sympy_path._check import check

_LINES = [json.loads(x) for x in (Path(__file__).parent / "suite_lines.jsonl").read_text().splitlines()]


def test_in_process_paths_agree_with_the_full_check_on_the_public_suites() -> None:
    decided = 0
    for line in _LINES:
        args = (line["gold"], line["pred"], "equivalent", line.get("question"))
        fast = _fast(args)
        if fast is None:
            continue
        decided += 1
        slow = check(*args)
        assert (fast[0], fast[2]) == (slow[0], slow[2]), (line["id"], fast, slow)
    assert decided >= 250, decided  # of the 449 lines the exact path leaves to sympy


CASES = [  # (gold, pred, verdict or None: deferred)
    ("Kafelnikov served in the first game", "Kafelnikov", True),  # the sentence states it
    ("Kafelnikov served in the first game", "Becker", False),
    ("The quotient does not change", "\\text{quotient}", False),  # a negation: never stated
    ("line segment, circle", "\\text{line segment and circle}", True),  # lists of texts
    ("line segment, circle", "\\text{line segment and equilateral triangle}", False),
    ("\\text{Any odd number of participants}", "odd", True),
    ("ellipszis", "ellipse", False),
    ("circle", "\\text{circle}", True),
    ("circle", "circle, ellipse", False),  # one text against a list
    ("\\text{infinitely many}", "\\infty", None),  # a value, not text: the full check
    ("Petya will receive 2 tokens", "Petya", None),  # digits: a number may be the answer there
    ("x = 1", "one", None),
    ("first strategy", "20 \\text{ cm}", None),
]


@pytest.mark.parametrize(("gold", "pred", "verdict"), CASES)
def test_text_path_cases(gold: str, pred: str, verdict: bool | None) -> None:
    ans = prepare(gold, pred, None)
    assert isinstance(ans, Answers)
    fast = text_decide(ans)
    assert (None if fast is None else fast[0]) is verdict
    if fast is not None:
        assert fast[0] == check(gold, pred)[0]


def test_text_path_does_not_import_sympy() -> None:
    code = (
        "import sys\n"
        "from verigym.graders.math._shared._rules import prepare\n"
        "from verigym.graders.math._exact_path._text import text_decide\n"
        "assert text_decide(prepare('Petya will win the game', 'Petya', None))[0] is True\n"
        "assert 'sympy' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
