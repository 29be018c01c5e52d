"""One absolute value (``|x|``, ``\\sqrt{x^2}`` against ``|x|``, ``|3+4i|``) in the float path
(``_sampled._one_abs``) never decides differently from the full (sympy) check, on generated
pairs (seeded), and it decides most of them; other bars (two absolute values, set-builders,
equations) still go to the full check.
"""

from __future__ import annotations

import random

import pytest

from verigym.graders.math import clear_caches
from verigym.graders.math._float_path._sampled import sampled_check
from verigym.graders.math._sympy_path._check import check


def _lin(rng: random.Random) -> tuple[int, int]:
    return rng.choice([-3, -2, -1, 1, 2, 3]), rng.randint(-4, 4)


def _sign(b: int) -> str:
    return f"+ {b}" if b >= 0 else f"- {-b}"


def _pair(rng: random.Random) -> tuple[str, str]:
    """A reference with one absolute value and an answer that is often, not always, equal."""
    a, b = _lin(rng)
    c = rng.choice([1, 2, 3, -2])
    kind = rng.randrange(8)
    if kind == 0:  # |ax+b| against |-ax-b|, or a sign slip
        slip = rng.choice([0, 0, 1])
        return f"|{a}x {_sign(b)}|", f"|{-a}x {_sign(-b + slip)}|"
    if kind == 1:  # c|x| against |cx|
        return f"{c}|x|", rng.choice([f"|{c}x|", f"{abs(c)}|x|", f"{c}x"])
    if kind == 2:  # sqrt((ax+b)^2) against |ax+b|
        return f"\\sqrt{{({a}x {_sign(b)})^2}}", rng.choice([f"|{a}x {_sign(b)}|", f"{a}x {_sign(b)}"])
    if kind == 3:  # |x|^k against x^k
        k = rng.randint(1, 4)
        return f"|x|^{k}", rng.choice([f"x^{k}", f"|x^{k}|", f"-x^{k}"])
    if kind == 4:  # a constant: |p/q|, |a+bi|
        p, q = rng.randint(-9, 9), rng.randint(1, 5)
        return f"|\\frac{{{p}}}{{{q}}}|", rng.choice(
            [f"\\frac{{{abs(p)}}}{{{q}}}", f"{p}/{q}", f"{abs(p) + 1}/{q}"]
        )
    if kind == 5:
        m, n = rng.randint(-6, 6), rng.randint(1, 6)
        return f"|{m}+{n}i|", rng.choice(
            ["5", f"\\sqrt{{{m * m + n * n}}}", f"{abs(m) + n}", f"|{n}i {_sign(m)}|"]
        )
    if kind == 6:  # x|x| against x^2
        return "x|x|", rng.choice(["x^2", "|x^3|/x", "|x|x"])
    return f"|x^2 {_sign(b)}|", rng.choice([f"x^2 {_sign(b)}", f"|{-1}x^2 {_sign(-b)}|"])


def test_one_absolute_value_agrees_with_the_full_check() -> None:
    rng = random.Random(43)
    decided = agreed = 0
    seen = set()
    for _ in range(400):
        gold, pred = _pair(rng)
        if (gold, pred) in seen:
            continue
        seen.add((gold, pred))
        clear_caches()
        fast = sampled_check(gold, pred)
        if fast is None:
            continue
        decided += 1
        full = check(gold, pred)
        assert fast[0] == full[0], (gold, pred, fast, full)
        agreed += 1
    assert decided >= 0.6 * len(seen), (decided, len(seen))
    assert agreed == decided


@pytest.mark.parametrize(
    ("gold", "pred", "accepted"),
    [("|x|", "x", False), ("\\sqrt{x^2}", "|x|", True), ("5", "|3+4i|", True), ("|-3|", "3", True)],
)
def test_listed_absolute_values(gold: str, pred: str, accepted: bool) -> None:
    clear_caches()
    fast = sampled_check(gold, pred)
    assert fast is not None and fast[0] is accepted
    assert check(gold, pred)[0] is accepted


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        ("|x| + |y|", "|y| + |x|"),
        ("y = |x|", "|x| = y"),
        ("\\{x | x > 0\\}", "(0, \\infty)"),
        ("|x|<3", "(-3, 3)"),
    ],
)
def test_other_bars_still_defer(gold: str, pred: str) -> None:
    clear_caches()
    assert sampled_check(gold, pred) is None or sampled_check(gold, pred) == check(gold, pred)
    if "|" in gold and "\\{" not in gold and gold.count("|") > 2:
        assert sampled_check(gold, pred) is None
