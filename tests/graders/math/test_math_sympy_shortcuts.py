"""Shortcuts that skip slow work must give what that work gives.

``_values._abs_piece`` reads ``|c1 x + c0| op c`` as an interval or two rays instead of calling
``solveset`` (30-100 ms on ``Abs``); the sets must be the ones ``solveset`` returns, so every
verdict built on them stays the same. The modes ``with_units`` and ``exact_decimal:N`` are
decided in the calling process where they can be (``_equivalence._fast``), with the full check's
verdict, reason and extracted answer.
"""

from __future__ import annotations

import sys

import pytest
import sympy

from verigym.graders.math import _equivalence, check_equivalent
from verigym.graders.math._sympy_path._check import check
from verigym.graders.math._sympy_path._values import _OPS, _abs_piece
from verigym.graders.math._sympy_path._worker import _preload

_X = sympy.Symbol("x")
_Z = sympy.Symbol("z", real=True)
_R = sympy.Rational


@pytest.mark.parametrize(
    ("inner", "bound", "op", "flip"),
    [
        (_X, 3, "<", False),
        (_X, 3, "\\le", False),
        (_X, 3, ">", False),
        (_X, 3, "\\ge", False),
        (_X - 1, _R(1, 2), "<", True),
        (_X + _R(3, 2), 2, "\\ge", True),
        (_Z - 4, 1, ">", False),
        (-_Z + 1, _R(7, 3), "\\le", True),
    ],
)
def test_abs_piece_is_what_solveset_returns(inner: sympy.Expr, bound: object, op: str, flip: bool) -> None:
    x = next(iter(inner.free_symbols))
    e, c = sympy.Abs(inner), sympy.sympify(bound)
    a, b = (c, e) if flip else (e, c)
    mine = _abs_piece(a, b, op, x)
    assert mine is not None
    assert mine == sympy.solveset(_OPS[op](a, b), x, sympy.S.Reals)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (sympy.Abs(_X**2 - 1), sympy.Integer(3)),  # not linear inside
        (sympy.Abs(_X), sympy.sqrt(2)),  # irrational bound
        (sympy.Abs(_X), sympy.Integer(0)),  # bound not positive: solveset decides
        (sympy.Abs(_X), sympy.Integer(-1)),
        (_X, sympy.Integer(2)),  # no absolute value
    ],
)
def test_abs_piece_leaves_the_rest_to_solveset(a: sympy.Expr, b: sympy.Expr) -> None:
    assert _abs_piece(a, b, "<", _X) is None


@pytest.mark.parametrize(
    ("gold", "pred", "accepted"),
    [
        ("(-3, 3)", "|x| < 3", True),
        ("(-3, 3)", "|x| \\le 3", False),
        ("[-3, 3]", "|x| \\le 3", True),
        ("(-\\infty, -3) \\cup (3, \\infty)", "|x| > 3", True),
        ("1 \\le |z| \\le \\frac{3}{2}", "[-\\frac{3}{2}, -1] \\cup [1, \\frac{3}{2}]", True),
        ("1 \\le |z| \\le \\frac{3}{2}", "[-\\frac{3}{2}, -1) \\cup [1, \\frac{3}{2}]", False),
    ],
)
def test_absolute_value_inequalities_in_the_full_check(gold: str, pred: str, accepted: bool) -> None:
    verdict = check_equivalent(gold, pred, timeout=None)
    assert verdict.error is None
    assert verdict.accepted is accepted


def test_worker_preloads_what_simplify_imports_on_first_use() -> None:
    _preload()
    assert "sympy.physics.units" in sys.modules


_UNITS = [
    ("5 \\text{ cm}", "5 \\text{ cm}"),
    ("5 \\text{ cm}", "5"),
    ("5 \\text{ cm}", "5 \\text{ m}"),
    ("5 \\text{ cm}", "6 \\text{ cm}"),
    ("25\\%", "25"),
    ("25\\%", "25\\%"),
    ("90^\\circ", "90"),
    ("90^\\circ", "90^{\\circ}"),
    ("3 \\text{ hours}", "The answer is $\\boxed{3\\text{ hours}}$."),
    ("7", "7 \\text{ apples}"),
]


@pytest.mark.parametrize(("gold", "pred"), _UNITS)
def test_with_units_in_process_is_the_full_check(gold: str, pred: str) -> None:
    fast = _equivalence._fast((gold, pred, "with_units", None))
    assert fast is not None
    assert fast == check(gold, pred, "with_units")


@pytest.mark.parametrize("gold", ["2.25", "\\frac{1}{3}", "-\\frac{5}{8}", "1/7", "0.045"])
@pytest.mark.parametrize("pred", ["2.25", "2.3", "0.33", "0.333", "-0.63", "0.14", "0.05", "0.04", "3"])
@pytest.mark.parametrize("places", [0, 2])
def test_exact_decimal_in_process_is_the_full_check(gold: str, pred: str, places: int) -> None:
    mode = f"exact_decimal:{places}"
    fast = _equivalence._fast((gold, pred, mode, None))
    assert fast is not None
    assert fast == check(gold, pred, mode)


@pytest.mark.parametrize(("gold", "pred"), [("\\sqrt{x}", "3.14"), ("1,000", "1000.00"), ("2.25", "2.3 cm")])
def test_exact_decimal_leaves_the_rest_to_the_full_check(gold: str, pred: str) -> None:
    # (pi against 3.14 is decided in floats now: _float_path._decimal, test_math_exact_values.py)
    assert _equivalence._fast((gold, pred, "exact_decimal:2", None)) is None
