"""Reference answers written as prose, truncated decimals, order chains, parametrised tuples:
each accepted form with a hand-checked near miss that must stay rejected (HardVerify-Math's
pairs, FP must stay 0)."""

from __future__ import annotations

import pytest

from verigym.graders.math._sympy_path._check import check

CASES = [  # (reference, accepted answer, rejected answer)
    ("Kafelnikov served in the first game", "Kafelnikov", "Becker"),  # hv-362
    ("The transformed function $f(x+1)-1$ is odd.", "odd", "even"),  # hv-404
    ("\\text{Any odd number of participants}", "odd", "even"),  # hv-320
    ("More time is required for the round trip on the river.", "\\text{the round trip}", "\\text{the lake trip}"),
    ("The function is not odd.", "\\text{the function is not odd}", "odd"),  # a negated sentence states nothing
    ("$\\text{infinitely many}$", "\\infty", "0"),  # hv-330
    ("The sum is less than zero.", "f(x_1) + f(x_2) + f(x_3) < 0", "f(x_1) + f(x_2) + f(x_3) > 0"),
    ("The rent for each $A$ room is $240$ yuan, and for each $B$ room is $210$ yuan.",
     "240 \\text{ yuan (A)},\\ 210 \\text{ yuan (B)}", "240 \\text{ yuan (A)},\\ 220 \\text{ yuan (B)}"),
    ("b < a < d < c", "b, a, d, c", "a < b < c < d"),  # hv-336: an order chain as a list
    ("b < a < d < c", "b, a, d, c", "a, b, c, d"),
    ("(k, \\, \\ell) = (-32 + 3x, \\; 64 - 5x)", "(-32 + 3t, 64 - 5t) \\text{ for some integer } t",
     "(-32 + 3t, 64 + 5t) \\text{ for some integer } t"),  # hv-472: the parameter renamed
    ("(x, 2x)", "(t, 2t)", "(t, 3t)"),
    ("R=1 \\text{ is both a necessary and sufficient condition}", "1", "0"),  # hv-358
    ("$f(x)=-1$,$f(x)=x+1$", "f(x) = -1 \\text{ for all } x \\in \\mathbb{Z}, \\text{ and } f(x) = x + 1",
     "f(x) = -1 \\text{ for all } x \\in \\mathbb{Z}, \\text{ and } f(x) = x"),  # hv-150
    ("∀x＞0, 3<sup>x</sup>≥x<sup>2</sup>", "\\forall x > 0, 3^x \\geq x^2", "\\forall x > 0, 3^x \\geq x"),
    ("41.494", "17 + 10\\sqrt{6}", "17 + 10\\sqrt{2}"),  # hv-378: 41.4949 truncated
    ("6.01", "6 \\frac{1}{64}", "4 \\frac{1}{64}"),  # hv-396: 6.015625 truncated
    ("6.02", "6 \\frac{1}{64}", "6.01"),  # rounded; the answer itself must round, not truncate
    ("0.666", "\\frac{2}{3}", "0.665"),
]  # fmt: skip


@pytest.mark.parametrize(("gold", "good", "bad"), CASES)
def test_reference_forms(gold: str, good: str, bad: str) -> None:
    assert check(gold, good)[0], (gold, good)
    assert not check(gold, bad)[0], (gold, bad)


def test_truncation_is_only_for_the_reference() -> None:
    assert not check("\\frac{2}{3}", "0.66")[0]  # a model's truncation is a wrong rounding
    assert check("\\frac{2}{3}", "0.67")[0]
    assert not check("17 + 10\\sqrt{6}", "41.494")[0]
