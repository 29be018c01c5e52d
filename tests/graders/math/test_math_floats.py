"""The float walk used by the math grader's sampling agrees with ``evalf`` or refuses.

``_floats.fvalue`` must return ``evalf``'s value (to far better than the sampler's 1e-8) or raise
``Unsure``; ``_numeric.sample`` with the walk must give the verdict of the ``evalf``-only rule.
"""

from __future__ import annotations

import random

import pytest
import sympy

from verigym.graders.math._sympy_path._floats import Unsure, fvalue
from verigym.graders.math._sympy_path._numeric import _agree, _value_at, points, sample

x, y, n = sympy.symbols("x y n")
_LEAVES = [x, y, n, sympy.Integer(2), sympy.Rational(3, 7), sympy.pi, sympy.E, sympy.I]
_UNARY = [sympy.sin, sympy.cos, sympy.tan, sympy.exp, sympy.log, sympy.sqrt, sympy.Abs, sympy.atan,
          sympy.asin, sympy.floor, sympy.factorial, sympy.cot]  # fmt: skip


def _random_expr(rng: random.Random, depth: int = 0) -> sympy.Expr:
    if depth > 2 or rng.random() < 0.3:
        return rng.choice(_LEAVES)
    k = rng.random()
    a, b = _random_expr(rng, depth + 1), _random_expr(rng, depth + 1)
    if k < 0.25:
        return a + b
    if k < 0.45:
        return a * b
    if k < 0.55:
        return a / b if b != 0 else a
    if k < 0.7:
        return a ** rng.choice([2, 3, -1, sympy.Rational(1, 2), sympy.Rational(1, 3)])
    if k < 0.75:
        return sympy.binomial(a, b)
    return rng.choice(_UNARY)(a)


def _reference_sample(a: sympy.Expr, b: sympy.Expr, syms: list[sympy.Symbol]) -> bool | None:
    """The sampling rule with ``evalf`` only (the grader's rule before the float walk)."""
    seen = 0
    for pt in points(syms, 6, 1234):
        va, vb = _value_at(a, pt), _value_at(b, pt)
        if va is None or vb is None:
            continue
        if not _agree(va, vb):
            return False
        seen += 1
    if seen < 3:
        return None
    for pt in points(syms, 3, 4321):
        neg = {s: -v for s, v in pt.items()}
        va, vb = _value_at(a, neg), _value_at(b, neg)
        if va is not None and vb is not None and va.is_real and vb.is_real and not _agree(va, vb):
            return False
    return True


def test_float_walk_matches_evalf_or_refuses() -> None:
    rng = random.Random(3)
    decided = 0
    for _ in range(300):
        e = _random_expr(rng)
        for pt in points([x, y, n], 1, rng.randint(0, 99)) + [{x: -1.3, y: 0.7, n: -2.2}]:
            try:
                got = fvalue(e, pt)
            except Unsure:
                continue
            ref = _value_at(e, pt)
            assert ref is not None, (e, pt, got)
            assert abs(got - complex(ref)) <= 1e-10 * max(1.0, abs(got)), (e, pt, got, ref)
            decided += 1
    assert decided >= 300


@pytest.mark.parametrize(
    ("expr", "pt"),
    [
        (
            sympy.log(x * (1 + sympy.I) * (1 - sympy.I) - 3 * x),
            {x: 2.0},
        ),  # on the branch cut after complex arithmetic
        (sympy.sqrt(x - 3 + sympy.I * 1e-12), {x: 1.0}),  # next to it
        (sympy.asin(x + sympy.I), {x: 0.5}),
        (sympy.floor(x), {x: 2.5}),  # evalf cannot evaluate it at a float: the rule skips the point
        (sympy.exp(x), {x: 800.0}),  # beyond float range
        (sympy.sin(x), {x: 1e9}),  # phase lost
        ((x + 1) ** 2 - x**2 - 2 * x, {x: 1e7}),  # cancellation: the float sum lost its digits
        (sympy.Function("f")(x), {x: 1.0}),  # unknown function
        (sympy.Integer(10) ** 400 * x, {x: 1.0}),
    ],
)
def test_float_walk_refuses_what_floats_cannot_vouch_for(
    expr: sympy.Expr, pt: dict[sympy.Symbol, float]
) -> None:
    with pytest.raises(Unsure):
        fvalue(expr, pt)


@pytest.mark.parametrize("v", [-2.7, -1.5, -0.3, 0.4, 1.5, 2.7])
def test_branch_cuts_as_sympy_takes_them(v: float) -> None:
    for e in (
        sympy.log(x),
        sympy.sqrt(x),
        x ** sympy.Rational(1, 3),
        sympy.asin(x),
        sympy.acos(x),
        sympy.log(x - 3),
    ):
        want = complex(e.evalf(20, subs={x: v}))
        assert abs(fvalue(e, {x: v}) - want) <= 1e-12 * max(1.0, abs(want)), (e, v)


def test_sampling_with_the_float_walk_gives_the_evalf_verdict() -> None:
    rng = random.Random(11)
    pairs = []
    for _ in range(60):
        a = _random_expr(rng)
        b = rng.choice(
            [sympy.expand(a), a + sympy.Rational(1, 10**9) * x, _random_expr(rng), a * (1 + x - x)]
        )
        pairs.append((a, b))
    pairs += [
        (sympy.sqrt(x**2), x),
        (sympy.Abs(x), x),
        (sympy.sqrt(1 / x), 1 / sympy.sqrt(x)),
        (x, x + 1e-12),
    ]
    for a, b in pairs:
        syms = sorted(a.free_symbols | b.free_symbols, key=str)
        if not syms:
            continue
        assert sample(a, b, syms) == _reference_sample(a, b, syms), (a, b)
