"""The float path's exact constants (``_float_path._exactval``) never decide differently from the
full (sympy) check: complex numbers in ``i`` (Gaussian rationals), factorials, binomials and
square roots of perfect squares, on generated cases (seeded), and they do decide most of them.
"""

from __future__ import annotations

import functools
import math
import random
from fractions import Fraction

import pytest

from verigym.graders.math import _equivalence as E
from verigym.graders.math import check_equivalent, clear_caches
from verigym.graders.math._exact_path._text import text_decide
from verigym.graders.math._float_path._exactval import Gauss, differ_clearly, gaussian, real_exact
from verigym.graders.math._float_path._sampled import sampled_check
from verigym.graders.math._float_path._sampledexpr import compiled
from verigym.graders.math._shared._reader import read
from verigym.graders.math._shared._rules import decide_texts
from verigym.graders.math._sympy_path._check import check

text_check = functools.partial(decide_texts, text_decide)


def _gauss_text(rng: random.Random) -> str:
    a, b = rng.randint(-6, 6), rng.randint(-6, 6)
    c, d = rng.randint(1, 4), rng.randint(-3, 3)
    forms = [
        f"{a}+{b}i" if b >= 0 else f"{a}{b}i",
        f"{b}i+{a}",
        f"({a}+{b}i)^{rng.randint(0, 3)}",
        f"\\frac{{{a}}}{{{c}}}i",
        f"\\frac{{{a}+{b}i}}{{{c}}}",
        f"\\frac{{1}}{{{c}+{d}i}}",
        f"i^{{{rng.randint(0, 7)}}}",
        f"{c}i^{rng.randint(1, 4)}",
        f"({a}+i)({c}-{abs(d)}i)",
        f"{a}-i",
        f"-{c}i",
        f"\\frac{{{a}}}{{i}}",
        f"{a}",
        f"\\frac{{{a}}}{{{c}}}",
    ]
    return rng.choice(forms)


def _value_text(v: Gauss) -> str:
    """A plain written form of an exact value (so that some pairs are equal)."""
    re_, im = v.re, v.im

    def q(x: Fraction) -> str:
        return str(x.numerator) if x.denominator == 1 else f"\\frac{{{x.numerator}}}{{{x.denominator}}}"

    if im == 0:
        return q(re_) if re_ >= 0 else "-" + q(-re_)
    sign = "+" if im > 0 else "-"
    return f"{q(re_)}{sign}{q(abs(im))}i"


def _value(text: str) -> Gauss | None:
    reading = read(text)
    if reading is None:
        return None
    try:
        return gaussian(compiled(reading.code))
    except Exception:
        return None


def _pairs(rng: random.Random, n: int) -> list[tuple[str, str]]:
    out = []
    for _ in range(n):
        g = _gauss_text(rng)
        kind = rng.random()
        if kind < 0.4 and (v := _value(g)) is not None:
            p = _value_text(v)  # the same value, written plainly
        elif kind < 0.55 and (v := _value(g)) is not None:
            p = _value_text(v + Gauss(Fraction(rng.choice([1, -1]), rng.choice([1, 7, 10**6, 10**12]))))
        else:
            p = _gauss_text(rng)
        out.append((g, p) if rng.random() < 0.5 else (p, g))
    return out


def _factorial_pairs(rng: random.Random, n: int) -> list[tuple[str, str]]:
    out = []
    for _ in range(n):
        k, m = rng.randint(0, 30), rng.randint(0, 8)
        big = rng.choice([5, 12, 100, 2004])
        forms = [
            (f"{k}!", str(math.factorial(k) + rng.choice([0, 0, 1, -1]))),
            (f"\\binom{{{k}}}{{{m}}}", str(math.comb(k, m) + rng.choice([0, 0, 1]))),
            (f"\\frac{{1}}{{{big}!}}", f"\\frac{{1}}{{{big + rng.choice([0, 2])}!}}"),
            (f"\\frac{{{k + m}!}}{{{k}!}}", str(math.perm(k + m, m))),
            (f"{k}!", f"{math.factorial(k)}.0"),
            (f"\\sqrt{{{k * k}}}", str(k + rng.choice([0, 0, 1]))),
            (f"\\sqrt{{\\frac{{{k * k}}}{{{(m + 1) ** 2}}}}}", f"\\frac{{{k}}}{{{m + 1}}}"),
            (f"{k}!^2", str(math.factorial(k) ** 2)),
            (f"\\binom{{{m}}}{{{k}}}", "0"),
        ]
        g, p = rng.choice(forms)
        out.append((g, p) if rng.random() < 0.5 else (p, g))
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_complex_constants_agree_with_the_full_check(seed: int) -> None:
    rng = random.Random(seed)
    decided = 0
    pairs = _pairs(rng, 350)
    for gold, pred in pairs:
        fast = sampled_check(gold, pred)
        full = check(gold, pred)
        assert fast is None or fast == full, (gold, pred, fast, full)
        decided += fast is not None
    assert decided >= len(pairs) // 2  # most of them decided without sympy


@pytest.mark.parametrize("seed", [0, 1])
def test_factorials_binomials_and_square_roots_agree_with_the_full_check(seed: int) -> None:
    rng = random.Random(100 + seed)
    decided = 0
    pairs = _factorial_pairs(rng, 300)
    for gold, pred in pairs:
        fast = sampled_check(gold, pred)
        full = check(gold, pred)
        assert fast is None or fast == full, (gold, pred, fast, full)
        decided += fast is not None
    assert decided >= len(pairs) * 3 // 4


DECIDED = [  # (gold, pred, accepted): the suite's lines these rules take from the worker
    ("3+4i", "4i+3", True),
    ("3+4i", "3-4i", False),
    ("2i", "(1+i)^2", True),
    ("-1", "i^2", True),
    ("-i", "\\frac{1}{i}", True),
    ("2+i", "2+2i", False),
    ("\\frac{1}{2004!}", "\\frac{1}{2006!}", False),
    ("\\frac{1}{2004!}", "\\boxed{\\frac{1}{2004!}}", True),
    ("\\binom{5}{2}", "10", True),
    ("6!", "720", True),
]

DEFERRED = [  # near-equal complex values, i beside a letter, irrational moduli, e^{i pi}
    ("1+i", "1+\\frac{1000000000001}{1000000000000}i"),
    ("x+i", "i+x"),
    ("\\sqrt{2}", "|1+i|"),
    ("e^{i\\pi}", "-1"),
    ("(-1)!", "1"),
    ("\\sqrt{-4}", "2i"),
]


@pytest.mark.parametrize(("gold", "pred", "accepted"), DECIDED)
def test_suite_lines_decided_in_process(gold: str, pred: str, accepted: bool) -> None:
    fast = sampled_check(gold, pred)
    assert fast is not None and fast[0] is accepted
    assert fast == check(gold, pred)
    clear_caches()
    assert check_equivalent(gold, pred).accepted is accepted


@pytest.mark.parametrize(("gold", "pred"), DEFERRED)
def test_deferred_to_the_full_check(gold: str, pred: str) -> None:
    assert sampled_check(gold, pred) is None


def test_exact_values() -> None:
    def code(s: str) -> object:
        reading = read(s)
        assert reading is not None
        return compiled(reading.code)

    assert gaussian(code("(1+i)^2")) == Gauss(Fraction(0), Fraction(2))
    assert gaussian(code("\\frac{1}{2-i}")) == Gauss(Fraction(2, 5), Fraction(1, 5))
    assert real_exact(code("\\binom{10}{3}")) == 120
    assert real_exact(code("\\frac{7!}{5!}")) == 42
    assert differ_clearly(Gauss(Fraction(1)), Gauss(Fraction(1), Fraction(1, 10**5)))
    assert not differ_clearly(Gauss(Fraction(1)), Gauss(Fraction(1), Fraction(1, 10**7)))


@pytest.mark.parametrize("seed", [0, 1])
def test_rational_powers_agree_with_the_full_check(seed: int) -> None:
    """Integer powers of rationals up to |1000| (``10^{-400}``) are exact (sympy's Rational)."""
    rng = random.Random(200 + seed)
    decided = 0
    for _ in range(150):
        base, k = rng.choice([2, 3, 10, -2, 5, 7]), rng.randint(-500, 500)
        g = f"{base}^{{{k}}}" if base > 0 else f"({base})^{{{k}}}"
        p = rng.choice(
            [
                f"\\frac{{1}}{{{base}^{{{-k}}}}}" if base > 0 else f"({base})^{{{k}}}",
                f"2 \\cdot {g}",
                f"{abs(base)}^{{{k + rng.choice([0, 1])}}}",
                "0",
                f"{g} + 1",
            ]
        )
        fast = sampled_check(g, p)
        full = check(g, p)
        assert fast is None or fast == full, (g, p, fast, full)
        decided += fast is not None
    assert decided >= 100


def _pm_set(rng: random.Random) -> tuple[str, str]:
    a, b, c = rng.randint(-3, 3), rng.randint(2, 7), rng.randint(-4, 4)
    gold = f"\\{{{a} \\pm \\sqrt{{{b}}}, {c}\\}}"
    items = [f"{a}+\\sqrt{{{b}}}", f"{a}-\\sqrt{{{b}}}", str(c)]
    rng.shuffle(items)
    if rng.random() < 0.4:
        items[rng.randrange(3)] = f"{a}+2\\sqrt{{{b}}}"
    if rng.random() < 0.2:
        items = items[:2]
    pred = ("\\{" + ", ".join(items) + "\\}") if rng.random() < 0.5 else ", ".join(items)
    return gold, pred


@pytest.mark.parametrize("seed", [0, 1])
def test_set_literals_with_plus_minus_agree_with_the_full_check(seed: int) -> None:
    """``\\{1 \\pm \\sqrt{5}, -2\\}``: a set literal expands item by item, as the full parser does."""
    rng = random.Random(300 + seed)
    decided = 0
    for _ in range(120):
        gold, pred = _pm_set(rng)
        if rng.random() < 0.3:
            gold, pred = pred, gold
        fast = sampled_check(gold, pred)
        full = check(gold, pred)
        assert fast is None or fast == full, (gold, pred, fast, full)
        decided += fast is not None
    assert decided >= 90


def _percent_pair(rng: random.Random) -> tuple[str, str]:
    irrational = rng.choice(
        [("\\sqrt{2} - 1", 2**0.5 - 1), ("\\frac{\\pi}{10}", math.pi / 10), ("\\sqrt{3} - 1", 3**0.5 - 1)]
    )
    text, value = irrational
    places = rng.randint(0, 3)
    shift = rng.choice([0, 0, 0.5, 1, -1]) * 10.0**-places
    pct = f"{round(value * 100 + shift, places):.{places}f}\\%"
    other = rng.choice([text, f"{round(value, places + 2):.{places + 2}f}", f"{rng.randint(1, 99)}\\%", "x"])
    return (pct, other) if rng.random() < 0.6 else (other, pct)


@pytest.mark.parametrize("seed", [0, 1])
def test_percent_signs_agree_with_the_full_check(seed: int) -> None:
    """``41.4\\%`` against ``\\sqrt{2} - 1``: the value and its hundredth (two more places)."""
    rng = random.Random(400 + seed)
    decided = 0
    for _ in range(150):
        gold, pred = _percent_pair(rng)
        fast = sampled_check(gold, pred)
        full = check(gold, pred)
        assert fast is None or fast == full, (gold, pred, fast, full)
        decided += fast is not None
    assert decided >= 100


def test_decimals_against_irrational_constants_agree_with_the_full_check() -> None:
    """``\\pi`` answered ``3.14``: too few significant digits to stand for an irrational (four
    needed), rejected in-process as the full check rejects it; more digits are roundings."""
    rng = random.Random(600)
    consts = [
        ("\\pi", math.pi),
        ("\\sqrt{2}", 2**0.5),
        ("e", math.e),
        ("\\sqrt{3}", 3**0.5),
        ("-\\pi", -math.pi),
    ]
    decided = 0
    for _ in range(200):
        text, value = rng.choice(consts)
        places = rng.randint(0, 5)
        shift = rng.choice([0, 0, 1, -1, 5]) * 10.0**-places
        dec = f"{value + shift:.{places}f}"
        gold, pred = (text, dec) if rng.random() < 0.7 else (dec, text)
        fast = sampled_check(gold, pred)
        full = check(gold, pred)
        assert fast is None or fast == full, (gold, pred, fast, full)
        decided += fast is not None
    assert decided >= 150


@pytest.mark.parametrize(
    ("gold", "pred"),
    [("12:00", "1:00"), ("12:00", "12:00"), ("3:45", "\\boxed{3:45}"), ("12:00", "noon"), ("9:05", "09:05")],
)
def test_times_of_day_are_text_in_process(gold: str, pred: str) -> None:
    """A time of day is text to the full parser (``_parse._parse_item``): compared as text here."""
    fast = text_check(gold, pred)
    assert fast is not None
    assert fast == check(gold, pred)


@pytest.mark.parametrize(("gold", "pred"), [("12:00", "The time is 12:00"), ("12:00", "12")])
def test_lone_numbers_in_text_still_go_to_the_full_check(gold: str, pred: str) -> None:
    assert text_check(gold, pred) is None


def test_exact_decimal_mode_against_irrational_references_agrees_with_the_full_check() -> None:
    """``exact_decimal:N`` with ``\\pi``, ``\\sqrt{2}``, ``e`` as the reference: the answer's
    places, then the reference rounded half up at N places (``_float_path._decimal``)."""
    rng = random.Random(700)
    consts = [
        ("\\pi", math.pi),
        ("\\sqrt{2}", 2**0.5),
        ("e", math.e),
        ("\\frac{\\pi}{7}", math.pi / 7),
        ("-\\sqrt{3}", -(3**0.5)),
    ]
    decided = 0
    for _ in range(150):
        text, value = rng.choice(consts)
        places = rng.randint(0, 5)
        written = rng.randint(0, 6)
        pred = rng.choice(
            [
                f"{value + rng.choice([0, 0, 1, -1]) * 10.0**-written:.{written}f}",
                text,
                "\\frac{22}{7}",
                "3,14",
            ]
        )
        mode = f"exact_decimal:{places}"
        fast = E._fast((text, pred, mode, None))
        full = check(text, pred, mode)
        assert fast is None or tuple(fast) == tuple(full), (text, pred, mode, fast, full)
        decided += fast is not None
    assert decided >= 120
