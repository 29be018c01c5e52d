"""The warm-run shortcuts of the math grader change no result: ``clean``'s skipped substitutions
(``_norm._NEEDLES``) give the text every substitution gives, and the float path's remembered
values (``Expr.at``, ``_relevant``) are the values computed afresh, forgotten by ``clear_caches``.
Texts: every gold and prediction of the suites, and generated strings (seeded) made of the
fragments the substitutions look for.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from verigym.graders.math import check_equivalent, clear_caches
from verigym.graders.math._float_path import _sampledexpr as X
from verigym.graders.math._float_path._bounded import Unsure
from verigym.graders.math._float_path._sampledexpr import Expr, compiled, points
from verigym.graders.math._shared import _norm
from verigym.graders.math._shared._reader import read

ROOT = Path(__file__).resolve().parents[3]
SUITES = [ROOT / "tests" / "suites" / "math.jsonl", ROOT / "tests" / "suites" / "math_forms.jsonl"]
SUITES.append(Path(__file__).with_name("suite_lines.jsonl"))

FRAGMENTS = [
    "\\dfrac", "\\tfrac", "\\frac", "12", "x", "\\le", "\\leq", "\\leqslant", "<=", "=<", ">=", "=>", "!=",
    "\\ge", "\\neq", "\\ne", "\\sqcup", "\\cupdot", "\\lt", "\\gt", "\\textbf{", "\\mbox{", "\\hbox {",
    "\\text{", "\\text {{a}}", "\\mathrm{e}", "\\operatorname{ e }", "^\\degree", "\\textcirc", "\\text{sin}",
    "^(2)", "2.5e-3", "1E5", "\\text{ for all } x", "\\text{ where }", "\\text{ is both}", "\\forall x \\in",
    "\\mathbb{R}", "^{\\circ}", "^\\circ", "\\cdots", "\\dots", "<sup>2</sup>", "\\sin^{-1}", "\\tan^-1",
    " ", ",", "{", "}", "(", ")", "e", "E", "a", "1", "-", "=", "<", ">", "\\", "^", "box", "for ",
]  # fmt: skip


def _suite_texts() -> list[str]:
    out: list[str] = []
    for path in SUITES:
        for raw in path.read_text().splitlines():
            if raw.strip():
                line = json.loads(raw)
                out += [str(line["gold"]), str(line["pred"])]
    return out


def _generated(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 8))) for _ in range(n)]


def _clean_every_substitution(s: str) -> str:
    """``clean`` as it was before the needles: every substitution of ``_RENAME`` applied."""
    saved = _norm._NEEDLES
    _norm._NEEDLES = tuple(("",) for _ in saved)  # "" is in every text: nothing skipped
    try:
        return _norm.clean(s)
    finally:
        _norm._NEEDLES = saved


def test_needles_cover_every_match() -> None:
    """Each pattern's match contains one of its needles (what makes skipping it sound)."""
    texts = _suite_texts() + _generated(4000, 7)
    assert len(_norm._NEEDLES) == len(_norm._RENAME)
    for (pat, _), needles in zip(_norm._RENAME, _norm._NEEDLES, strict=True):
        for s in texts:
            m = pat.search(s)
            if m is not None:
                assert any(n in m.group(0) for n in needles), (pat.pattern, s)


def test_clean_same_text_with_and_without_needles() -> None:
    texts = _suite_texts() + _generated(4000, 11)
    matched = 0
    for s in texts:
        assert _norm.clean(s) == _clean_every_substitution(s), s
        matched += _norm._ANY_RENAME.search(s) is not None
    assert matched > 1000  # the generated texts do reach the substitutions


def _expr(text: str) -> Expr:
    reading = read(text)
    assert reading is not None
    return Expr(reading, compiled(reading.code))


@pytest.mark.parametrize("text", ["x^2 - 1", "\\frac{\\sqrt{x}}{x+1}", "\\sin x + \\cos y", "2^{n} - n"])
def test_remembered_values_equal_fresh_ones(text: str) -> None:
    clear_caches()
    e = _expr(text)
    syms = sorted(e.names)
    for pt in points(syms, 6, 1234) + points(syms, 3, 4321):
        first, again, fresh = e.at(pt), e.at(pt), e._at(pt)
        assert again is first  # remembered
        assert (fresh.z, fresh.e, fresh.cx) == (first.z, first.e, first.cx)
    assert X._VALUES
    clear_caches()
    assert not X._VALUES and not X._RELEVANT


def test_relevant_remembered_both_ways() -> None:
    clear_caches()
    X._relevant(_expr("x + 1"))  # x changes the value
    with pytest.raises(Unsure):
        X._relevant(_expr("n - n + 2"))  # n cancels: sympy drops it
    with pytest.raises(Unsure):
        X._relevant(_expr("n - n + 2"))  # the remembered outcome raises too
    assert sorted(X._RELEVANT.values()) == [False, True]


def test_verdicts_same_cold_and_warm_on_a_list() -> None:
    """A list compared item by item reuses values; the verdicts match a cold run's."""
    pairs = [
        ("x^2, x+1, 2x", "2x, x^2, 1+x"),
        ("x^2, x+1, 2x", "2x, x^2, x+2"),
        ("\\frac{1}{x}, x^3", "x^3, x^{-1}"),
    ]
    cold = []
    for g, p in pairs:
        clear_caches()
        cold.append(check_equivalent(g, p))
    clear_caches()
    warm = [check_equivalent(g, p) for g, p in pairs]
    assert warm == cold
    assert [v.accepted for v in cold] == [True, False, True]
