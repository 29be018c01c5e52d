"""Templated word problems of the ``math`` environment, with exact answers.

Each template is ``(rng, level) -> (question, answer)``: the answer is exact (an integer, a
fraction written ``\\frac{p}{q}``, or a multiple of ``\\pi``), computed with ``Fraction`` from
the same numbers the question states. Higher levels add steps (a round trip, a drain pipe, a
second discount, a condition on the count) and larger numbers.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from fractions import Fraction

__all__ = ["TEMPLATES", "fmt"]

Template = Callable[[random.Random, int], tuple[str, str]]
_NAMES = ["Ana", "Ben", "Chloe", "Dev", "Emil", "Fatima", "Goran", "Hiro", "Ines", "Jonas"]


def fmt(value: Fraction | int) -> str:
    """An exact answer: ``7``, ``-3`` or ``\\frac{7}{3}``."""
    v = Fraction(value)
    if v.denominator == 1:
        return str(v.numerator)
    sign = "-" if v < 0 else ""
    return f"{sign}\\frac{{{abs(v.numerator)}}}{{{v.denominator}}}"


def speed(rng: random.Random, level: int) -> tuple[str, str]:
    who = rng.choice(_NAMES)
    if level == 1:
        v, t = rng.randint(3, 15) * 4, rng.randint(2, 9)
        return f"{who} drives at {v} km/h for {t} hours. How many kilometres does {who} travel?", fmt(v * t)
    if level == 2:
        u, v = rng.sample(range(20, 90, 5), 2)
        q = f"{who} drives to a town at {u} km/h and comes back the same way at {v} km/h. What is the average speed of the whole round trip, in km/h?"
        return q, fmt(Fraction(2 * u * v, u + v))
    u, v = rng.sample(range(30, 120, 6), 2)
    d = rng.randint(150, 900)
    late = rng.choice([0, 1]) if level >= 4 else 0
    extra = f" The second train leaves {late} hour later." if late else ""
    q = (
        f"Two trains start {d} km apart and travel toward each other, the first at {u} km/h and the "
        f"second at {v} km/h.{extra} How many hours after the first train leaves do they meet?"
    )
    return q, fmt(Fraction(d + v * late, u + v)) if late else fmt(Fraction(d, u + v))


def work(rng: random.Random, level: int) -> tuple[str, str]:
    a, b = rng.sample(range(2, 13), 2)
    if level == 1:
        r, t = rng.randint(3, 30), rng.randint(2, 12)
        return f"A machine makes {r} bottles per hour. How many bottles does it make in {t} hours?", fmt(
            r * t
        )
    if level == 2:
        q = f"Pipe A fills a tank in {a} hours and pipe B fills it in {b} hours. How many hours do both pipes take together?"
        return q, fmt(1 / (Fraction(1, a) + Fraction(1, b)))
    c = rng.randint(max(a, b) * 2, 40)
    q = (
        f"Pipe A fills a tank in {a} hours and pipe B fills it in {b} hours, while a drain empties the "
        f"full tank in {c} hours. With both pipes and the drain open, how many hours does it take to fill the empty tank?"
    )
    return q, fmt(1 / (Fraction(1, a) + Fraction(1, b) - Fraction(1, c)))


def ratio(rng: random.Random, level: int) -> tuple[str, str]:
    if level <= 2:
        p, q = rng.sample(range(1, 10), 2)
        k = rng.randint(2, 6 * level)
        text = f"A bag holds red and blue marbles in the ratio {p}:{q}. There are {(p + q) * k} marbles. How many are red?"
        return text, fmt(p * k)
    p, q, r = rng.sample(range(1, 10), 3)
    k = rng.randint(3, 20)
    who = rng.sample(_NAMES, 3)
    text = (
        f"{who[0]}, {who[1]} and {who[2]} share {(p + q + r) * k} dollars in the ratio {p}:{q}:{r}. "
        f"How many more dollars does {who[0]} get than {who[2]}?"
    )
    return text, fmt((p - r) * k)


def percent(rng: random.Random, level: int) -> tuple[str, str]:
    price = rng.randint(4, 60) * 5
    d = rng.choice([10, 15, 20, 25, 30, 40])
    if level == 1:
        return f"A coat costs {price} dollars and is {d}% off. What is the sale price in dollars?", fmt(
            Fraction(price * (100 - d), 100)
        )
    t = rng.choice([5, 8, 10, 12])
    value = Fraction(price * (100 - d), 100) * Fraction(100 + t, 100)
    text = (
        f"A lamp costs {price} dollars. It is {d}% off, and then a {t}% sales tax is added to the sale price."
    )
    if level >= 3:
        e = rng.choice([5, 10])
        value = Fraction(price * (100 - d) * (100 - e), 10000) * Fraction(100 + t, 100)
        text = (
            f"A lamp costs {price} dollars. It is {d}% off, a coupon then takes {e}% off the reduced price, "
            f"and finally a {t}% sales tax is added."
        )
    return text + " What does the lamp cost in dollars? Give the exact value.", fmt(value)


def geometry(rng: random.Random, level: int) -> tuple[str, str]:
    if level == 1:
        w, h = rng.randint(2, 30), rng.randint(2, 30)
        return f"A rectangle is {w} cm wide and {h} cm tall. What is its area in square centimetres?", fmt(
            w * h
        )
    if level == 2:
        a, b, c = rng.choice([(3, 4, 5), (5, 12, 13), (8, 15, 17), (7, 24, 25)])
        k = rng.randint(1, 6)
        text = f"A right triangle has legs of {a * k} m and {b * k} m. How long is its hypotenuse, in metres?"
        return text, fmt(c * k)
    r = rng.randint(2, 15)
    if level == 3:
        return (
            f"A circle has a radius of {r} cm. What is its area in square centimetres? Give the answer in terms of pi.",
            f"{r * r}\\pi",
        )
    s = 2 * r
    text = (
        f"A circle of radius {r} cm is cut out of a square of side {s} cm that just contains it. "
        "What area of the square is left, in square centimetres? Give the answer in terms of pi."
    )
    return text, f"{s * s} - {r * r}\\pi"


def counting(rng: random.Random, level: int) -> tuple[str, str]:
    if level == 1:
        s, p = rng.randint(2, 9), rng.randint(2, 9)
        return (
            f"{rng.choice(_NAMES)} has {s} shirts and {p} pairs of trousers. How many different outfits of one shirt and one pair of trousers are there?",
            fmt(s * p),
        )
    if level == 2:
        n = rng.randint(5, 14)
        k = rng.randint(2, 4)
        return f"In how many ways can a committee of {k} people be chosen from {n} people?", fmt(
            math.comb(n, k)
        )
    if level == 3:
        word = rng.choice(["BANANA", "LETTER", "PEPPER", "BALLOON", "COFFEE", "SUCCESS", "COMMITTEE"])
        total = math.factorial(len(word))
        for c in Counter(word).values():
            total //= math.factorial(c)
        return f"How many different arrangements of the letters of the word {word} are there?", fmt(total)
    m, w = rng.randint(4, 8), rng.randint(3, 7)
    k = rng.randint(3, 4)
    text = (
        f"A club has {m} men and {w} women. In how many ways can a committee of {k} be chosen "
        "with at least one woman?"
    )
    return text, fmt(math.comb(m + w, k) - math.comb(m, k))


def probability(rng: random.Random, level: int) -> tuple[str, str]:
    r, b = rng.randint(2, 9), rng.randint(2, 9)
    if level <= 2:
        if level == 1:
            return (
                f"A bag has {r} red and {b} blue balls. One ball is drawn at random. What is the probability that it is red?",
                fmt(Fraction(r, r + b)),
            )
        text = f"A bag has {r} red and {b} blue balls. Two balls are drawn without replacement. What is the probability that both are red?"
        return text, fmt(Fraction(r, r + b) * Fraction(r - 1, r + b - 1))
    n = rng.randint(2, 3 if level == 3 else 4)
    return (
        f"A fair six-sided die is rolled {n} times. What is the probability of getting at least one six?",
        fmt(1 - Fraction(5, 6) ** n),
    )


def average(rng: random.Random, level: int) -> tuple[str, str]:
    k = rng.randint(3, 4 + level)
    scores = [rng.randint(50, 100) for _ in range(k)]
    listed = ", ".join(map(str, scores))
    who = rng.choice(_NAMES)
    if level == 1:
        return f"{who}'s test scores are {listed}. What is the mean score?", fmt(Fraction(sum(scores), k))
    target = sum(scores) // k + rng.randint(1, 6)
    text = f"{who}'s test scores so far are {listed}. What score does {who} need on the next test for the mean of all the tests to be exactly {target}?"
    return text, fmt(target * (k + 1) - sum(scores))


TEMPLATES: dict[str, Template] = {
    "speed": speed,
    "work": work,
    "ratio": ratio,
    "percent": percent,
    "geometry": geometry,
    "counting": counting,
    "probability": probability,
    "average": average,
}
"""Topic name -> template."""
