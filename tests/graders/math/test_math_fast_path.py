"""The math grader's fast paths never decide differently from the full check.

``_rational.fast_check`` (exact rational arithmetic, no sympy) must return the full check's
verdict or defer (None); ``_fast.fast_sympy`` must read an expression as ``latex2sympy2_extended``
does. Random simple answers (seeded) and hostile cases for both, plus the verdict cache.
"""

from __future__ import annotations

import random

import pytest
import sympy
from latex2sympy2_extended import latex2sympy

from verigym.graders.math import check_equivalent, clear_caches
from verigym.graders.math._exact_path._rational import fast_check
from verigym.graders.math._sympy_path._check import check
from verigym.graders.math._sympy_path._fast import fast_sympy
from verigym.graders.math._sympy_path._values import _NC

DECIDED = [  # (gold, pred, accepted): each decided by the fast path
    ("42", "The answer is $\\boxed{42}$.", True),
    ("42", "\\boxed{43}", False),
    ("-7", "-7.0", True),
    ("\\frac{1}{2}", "0.5", True),
    ("\\dfrac{3}{4}", "3/4", True),
    ("\\frac12", "\\tfrac{1}{2}", True),
    ("\\frac{2}{4}", "\\frac{1}{2}", True),
    ("\\sqrt{16}", "4", True),
    ("\\sqrt{\\frac{9}{4}}", "1.5", True),
    ("2^{10}", "1024", True),
    ("25\\%", "0.25", True),
    ("25\\%", "25", True),
    ("50", "0.5", False),
    ("12", "12 \\text{ cm}", True),
    ("\\$5", "5 dollars", True),
    ("7,425,000", "7425000", True),
    ("(1, 2)", "(1,2)", True),
    ("(1, 2)", "(2, 1)", False),
    ("21.93", "21 \\dfrac{13}{14}", True),  # a mixed number, as the full parser reads it
    ("21.93", "25 \\dfrac{13}{14}", False),
    ("6.018", "6\\frac{1}{64}", False),  # 6.015625: not a rounding of it
    ("-\\frac{5}{2}", "-2\\frac{1}{2}", True),
    ("2\\frac{1}{2}", "2.5", True),
    ("[1, 2)", "[1, 2]", False),
    ("(-\\infty, 3]", "(-\\infty, 3]", True),
    ("\\{1, 2, 3\\}", "3, 2, 1", True),
    ("1, 2", "1, 2, 2", True),
    ("1/3", "0.33", True),
    ("1/3", "0.3", False),
    ("1000", "1000.05", False),
    ("0.125", "1/8", True),
    ("3.14159", "3.1416", True),
    ("1 000", "1000", True),  # a space as thousands separator: the only reading
    ("x = 5", "5", True),
    ("x_1=-2, x_2=3", "-2, 3", True),
    ("3 < x", "(3, \\infty)", True),
    ("-4<m\\leq0", "(-4, 0]", True),
    ("-4<m\\leq0", "(-4, 0)", False),
    ("a \\geq 0", "[0, \\infty)", True),
    ("0 < x < 1", "0 < y < 1", True),
    ("5:8", "\\dfrac{5}{8}", True),
    ("1 : (4/3)", "0.75", True),
    ("0.666", "2/3", True),  # a truncated reference
    ("0.667", "2/3", True),  # a rounded one
    ("2/3", "0.66", False),  # the answer must round, not truncate
    ("0.65", "2/3", False),
]

DEFERRED = [  # outside the fast path: a letter, an irrational, a float inside an expression, ...
    ("\\sqrt{8}", "2\\sqrt{2}"),
    ("x + 1", "1 + x"),
    ("\\frac{10}{3}", "1/0.3"),
    ("30^\\circ", "\\frac{\\pi}{6}"),
    ("2\\frac{1}{2} x", "2.5x"),
    ("x = y", "5"),
    ("x \\ne 3", "(3, \\infty)"),
    ("x < 1 \\text{ or } x > 2", "(2, \\infty)"),
    ("5!", "120"),
    ("2^{1000000}", "1"),
    ("\\frac{1}{0}", "1"),
]


@pytest.mark.parametrize(("gold", "pred", "accepted"), DECIDED)
def test_fast_path_decides_common_answers_like_the_full_check(gold: str, pred: str, accepted: bool) -> None:
    fast = fast_check(gold, pred)
    assert fast is not None, "the fast path should decide this line"
    assert fast[0] is accepted
    assert fast[0] == check(gold, pred)[0]


@pytest.mark.parametrize(("gold", "pred"), DEFERRED)
def test_fast_path_defers_what_it_cannot_decide_exactly(gold: str, pred: str) -> None:
    assert fast_check(gold, pred) is None


def test_fast_path_only_in_equivalent_mode() -> None:
    assert fast_check("\\frac{2}{4}", "\\frac{2}{4}", "simplest_form") is None
    assert check_equivalent("1/2", "2/4", mode="simplest_form", timeout=None).accepted is False


def _number(rng: random.Random) -> str:
    a, b = rng.randint(-30, 30), rng.randint(1, 12)
    return rng.choice(
        [
            str(a),
            f"{a / b:.{rng.randint(1, 4)}f}",
            f"\\frac{{{abs(a)}}}{{{b}}}",
            f"{a}/{b}",
            f"{abs(a)}\\%",
            f"\\sqrt{{{b * b}}}",
            f"{a} + \\frac{{1}}{{{b}}}",
            f"{a}\\cdot {b}",
            f"{b}^{{2}}",
            f"{abs(a)} \\text{{ cm}}",
            f"{a}.{rng.randint(0, 99)}",
        ]
    )


def _relation(rng: random.Random) -> str:
    a, b = sorted(rng.sample(range(-9, 10), 2))
    le, lt = rng.choice(["<", "\\le", "\\leq"]), rng.choice(["<", "\\leqslant"])
    var = rng.choice(["x", "a", "m"])
    return rng.choice(
        [
            f"{a} {le} {var} {lt} {b}",
            f"{var} > {a}",
            f"{var} \\ge {b}",
            f"{b} > {var}",
            f"({a}, {b}]",
            f"[{a}, {b})",
            f"(-\\infty, {b}]",
            f"[{a}, \\infty)",
            f"{var} = {a}",
            f"{var}_1 = {a}, {var}_2 = {b}",
            f"{abs(a) + 1}:{abs(b) + 1}",
        ]
    )


def _answer(rng: random.Random) -> str:
    k = rng.random()
    if k < 0.25:
        return _relation(rng)
    if k < 0.6:
        return _number(rng)
    items = ", ".join(_number(rng) for _ in range(rng.randint(2, 3)))
    return rng.choice(
        [items, f"({items})", f"[{items}]", f"\\{{{items}\\}}", f"({_number(rng)}, {_number(rng)}]"]
    )


def test_property_fast_path_agrees_with_the_full_check_on_random_answers() -> None:
    rng = random.Random(17)
    decided = 0
    for _ in range(220):
        gold = _answer(rng)
        pred = rng.choice([gold, _answer(rng), gold.replace(",", ", "), _relation(rng)])
        fast = fast_check(gold, pred)
        if fast is None:
            continue
        decided += 1
        slow = check(gold, pred)
        assert (fast[0], fast[2]) == (slow[0], slow[2]), (gold, pred, fast, slow)
    assert decided >= 120  # the generator stays mostly inside the fast path's domain


_ATOMS = [
    "x", "y", "t", "2", "12", "\\pi", "\\theta", "\\alpha", "\\lambda", "x_1", "x_{2}", "a_{37}", "C_{1}", "b_n",
    "f(x)", "g(x_1, 2)", "T(12)", "|x - 1|", "\\lfloor x \\rfloor", "\\lceil \\frac{n}{2} \\rceil", "\\min(x, 2)",
    "\\max(a, b, 3)", "\\binom{n}{2}", "ab", "2Cx", "x:y", "\\log_{2} x", "\\log_{10}(x)", "3\\frac{1}{4}", "F_{n-k-1}",
    "(n-1)!", "204_5", "a + \\ldots + b", "(x - a_1)\\ldots(x - a_n)", "f(x+1)", "E",
]  # fmt: skip
_FUNCS = ["\\sin", "\\cos", "\\tan", "\\ln", "\\log", "\\sec", "\\exp"]


def _expr(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth > 2 or r < 0.3:
        return rng.choice(_ATOMS)
    if r < 0.5:
        return _expr(rng, depth + 1) + rng.choice([" + ", " - ", "", " "]) + _expr(rng, depth + 1)
    if r < 0.6:
        return f"\\frac{{{_expr(rng, depth + 1)}}}{{{_expr(rng, depth + 1)}}}"
    if r < 0.7:
        return f"({_expr(rng, depth + 1)})^{{2}}"
    f = rng.choice(_FUNCS) + rng.choice(["", "^2"])
    return f + " " + rng.choice(_ATOMS) + rng.choice(["", " + 1", " - y"])


def _numerically_equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    if a.atoms(sympy.core.function.AppliedUndef):
        return bool(sympy.simplify(a - b) == 0)  # f(x) has no value to sample
    syms = sorted(a.free_symbols | b.free_symbols, key=str)
    for seed in range(3):
        pt = {
            s: sympy.Float(random.Random(seed).uniform(0.3, 1.3) + i / 7 + 0.05) for i, s in enumerate(syms)
        }
        try:
            va, vb = complex(a.evalf(20, subs=pt)), complex(b.evalf(20, subs=pt))
        except (TypeError, ValueError, AttributeError):  # sympy cannot evaluate floor(Float) there
            return bool(sympy.simplify(a - b) == 0)
        if abs(va - vb) > 1e-9 * max(1.0, abs(va)):
            return False
    return True


def test_property_fast_sympy_reads_like_latex2sympy() -> None:
    """Subscripts, Greek letters and bare function arguments (``\\sin\\theta``) as the full parser."""
    rng = random.Random(5)
    decided = 0
    for _ in range(150):  # each full parse takes tens of ms: keep the test a few seconds
        s = _expr(rng)
        fast = fast_sympy(s)
        if fast is None:
            continue
        decided += 1
        slow = latex2sympy(s, normalization_config=_NC)
        assert fast == slow or _numerically_equal(fast, slow), (s, fast, slow)
    assert decided >= 90


@pytest.mark.parametrize(
    ("latex", "expected"),
    [
        ("\\tan \\frac{7}{5} \\pi", "tan(7*pi/5)"),  # a bare argument runs over the product
        ("2 \\sin b \\cos a", "2*sin(b)*cos(a)"),  # ... and ends at the next function
        ("\\frac{d !}{2 k(d-k) !}", "factorial(d)/(2*k*factorial(d - k))"),
        ("ab(x-y)^2(ax-ay-b)", "a*b*(x - y)**2*(a*x - a*y - b)"),
        ("S_{MBCN}:S", "Symbol('s_{mbcn}')/s"),
        ("21 \\frac{13}{14}", "Rational(307, 14)"),
        ("-2 \\frac{1}{2}", "Rational(-5, 2)"),
        ("x+2 \\frac{1}{2}", "x + Rational(5, 2)"),
        ("\\frac{n - (a_k + \\ldots + a_0)}{p-1}", "(n - Symbol('a_k') - Symbol('a_0'))/(p - 1)"),
        ("\\lceil n / 2\\rceil+1", "ceiling(n/2) + 1"),
        ("|x||y|", "Abs(x)*Abs(y)"),
        ("\\log_{10} 2", "log(2, 10)"),
        ("Even", "Symbol('e')*E*n*v"),  # "E" is a symbol there, "e" Euler's number
        ("0.5x", "x/2"),
        ("\\sum_{k=0}^{n-1} F_k F_{n-k-1}", "Sum(Symbol('f_k')*Symbol('f_{n-k-1}'), (k, 0, n - 1))"),
    ],
)
def test_fast_sympy_new_forms(latex: str, expected: str) -> None:
    names = {c: sympy.Symbol(c) for c in "abdknpsvxy"}
    want = sympy.sympify(expected, locals=names)
    got = fast_sympy(latex)
    assert got is not None and sympy.simplify(got - want) == 0, (latex, got, want)


@pytest.mark.parametrize(
    "latex", ["odd", "dx", "f(2x)", "2 \\frac{1}{2} x", "a - \\ldots - b", "\\sin |x|", "\\text{13}"]
)
def test_fast_sympy_leaves_ambiguous_forms_to_the_full_parser(latex: str) -> None:
    assert fast_sympy(latex) is None


def test_fast_sympy_names_and_bare_arguments() -> None:
    x1, theta = sympy.Symbol("x_1"), sympy.Symbol("theta")
    assert fast_sympy("x_{1} + \\theta") == x1 + theta
    assert fast_sympy("a_{37}") == sympy.Symbol("a_{37}")
    assert fast_sympy("\\lambda") == sympy.Symbol("lambda")  # a Python keyword, still a symbol
    assert fast_sympy("\\rho\\sin\\theta") == sympy.Symbol("rho") * sympy.sin(theta)
    x, y = sympy.symbols("x y")
    assert fast_sympy("\\sin x y") == sympy.sin(x * y)  # the bare argument runs over the product
    assert fast_sympy("\\gamma") is None  # the full parser reads Euler's constant
    assert fast_sympy("\\cot\\pi") is None  # no zoo: the full parser keeps cot(pi)
    assert fast_sympy("F(x) + T(12)") == sympy.Function("F")(sympy.Symbol("x")) + sympy.Function("T")(12)
    f = sympy.Symbol("f")
    assert fast_sympy("x(x+1)") == x * (x + 1) and fast_sympy("f(-3/4)") == -3 * f / 4  # products there
    assert fast_sympy("f(2x)") is None and fast_sympy("dx") is None and fast_sympy("odd") is None
    assert fast_sympy("e(x)") is None


def test_explicit_product_sign_ends_a_bare_function_argument() -> None:
    """hardverify hv-225: ``\\cot t \\cdot \\ln(\\cos t)`` is cot(t) ln(cos t), not cot(t ln cos t)."""
    t = sympy.Symbol("t")
    assert fast_sympy("\\cot t \\cdot \\ln(\\cos t)") == sympy.cot(t) * sympy.log(sympy.cos(t))
    gold = "\\frac{1}{2} \\cdot \\cot t \\cdot \\ln (\\cos t) \\cdot e^{-\\sec^2 t}"
    assert check(gold, "\\dfrac{\\cos t \\cdot \\ln(\\cos t)}{2 e^{\\sec^2 t} \\sin t}")[0]
    assert not check(gold, "\\dfrac{1}{2} \\cot t \\cdot \\ln(\\cos t) \\cdot e^{-\\sec^2 t + 1}")[0]


@pytest.mark.parametrize(
    ("gold", "good", "bad"),
    [
        ("90^\n", "90^\\circ", "91^\\circ"),  # hv-217: a superscript lost in transcription
        ("②③", "2, 3", "2, 4"),  # hv-231: circled numbers list the items
        ("(- \\frac {1}{2}, \\sqrt {2}.]", "\\left( -\\frac{1}{2}, \\sqrt{2} \\right]", "(-1/2, \\sqrt{2})"),
        # hv-128: a set difference written with a minus sign
        (
            "\\{x | x < \\frac{3}{2}\\} - \\{-6\\}",
            "(-\\infty, -6) \\cup (-6, \\frac{3}{2})",
            "(-\\infty, \\frac{3}{2})",
        ),
    ],
)
def test_repaired_references(gold: str, good: str, bad: str) -> None:
    assert check(gold, good)[0]
    assert not check(gold, bad)[0]


def test_verdict_cache_and_clear_caches() -> None:
    clear_caches()
    first = check_equivalent("x^2 - 1", "(x-1)(x+1)")
    again = check_equivalent("x^2 - 1", "(x-1)(x+1)")
    assert first == again and first.accepted
    clear_caches()  # also empties the worker's parse caches; the verdict is recomputed alike
    assert check_equivalent("x^2 - 1", "(x-1)(x+1)") == first
    assert check_equivalent("x^2 - 1", "(x-1)(x+2)").accepted is False
    long = "Some reasoning. " * 40
    assert check_equivalent("5", long + "The answer is 5.").accepted  # keyed by a hash of the text
    assert not check_equivalent("5", long + "The answer is 6.").accepted
