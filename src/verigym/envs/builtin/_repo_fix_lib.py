"""The functions, injected bugs and tests that ``repo_fix`` builds its tiny repositories from.

Each ``Func`` has a correct body, one or more buggy bodies (a realistic one-line slip each)
and test cases ``(call, expected)``. Which tests a bug breaks is not written by hand: it is
computed by running the (trusted, project-written) code in-process at generation time, so the
FAIL_TO_PASS / PASS_TO_PASS split is always right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FUNCS", "MODULES", "Func", "evaluate_call", "module_source"]


@dataclass(frozen=True)
class Func:
    name: str
    signature: str
    doc: str
    body: str
    bugs: tuple[str, ...]
    cases: tuple[tuple[str, str], ...]  # (call expression, expected value as a Python literal)

    def source(self, body: str | None = None) -> str:
        text = body if body is not None else self.body
        lines = "\n".join("    " + line for line in text.strip("\n").splitlines())
        return f'def {self.signature}:\n    """{self.doc}"""\n{lines}\n'


FUNCS: dict[str, Func] = {
    f.name: f
    for f in (
        Func(
            "clamp", "clamp(x, lo, hi)", "Limit x to the closed range [lo, hi].",
            "return max(lo, min(x, hi))",
            ("return max(lo, min(x, lo))", "return min(lo, max(x, hi))"),
            (("clamp(5, 0, 3)", "3"), ("clamp(-2, 0, 3)", "0"), ("clamp(2, 0, 3)", "2"), ("clamp(3, 0, 3)", "3")),
        ),
        Func(
            "mean", "mean(xs)", "The arithmetic mean of a non-empty list of numbers.",
            "return sum(xs) / len(xs)",
            ("return sum(xs) / (len(xs) - 1)", "return sum(xs) // len(xs)"),
            (("mean([1, 2, 3, 4])", "2.5"), ("mean([5])", "5.0"), ("mean([2, 4])", "3.0"), ("mean([1, 2])", "1.5")),
        ),
        Func(
            "median", "median(xs)", "The median of a non-empty list of numbers.",
            "s = sorted(xs)\nm = len(s) // 2\nreturn s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2",
            ("s = list(xs)\nm = len(s) // 2\nreturn s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2",
             "s = sorted(xs)\nm = len(s) // 2\nreturn s[m] if len(s) % 2 else (s[m] + s[m + 1]) / 2"),
            (("median([3, 1, 2])", "2"), ("median([4, 1, 3, 2])", "2.5"), ("median([7])", "7"), ("median([1, 2, 3])", "2")),
        ),
        Func(
            "factorial", "factorial(n)", "n! for n >= 0.",
            "out = 1\nfor i in range(2, n + 1):\n    out *= i\nreturn out",
            ("out = 1\nfor i in range(2, n):\n    out *= i\nreturn out",),
            (("factorial(5)", "120"), ("factorial(0)", "1"), ("factorial(1)", "1"), ("factorial(3)", "6")),
        ),
        Func(
            "last_n", "last_n(xs, n)", "The last n items of a list (an empty list when n is 0).",
            "return list(xs[-n:]) if n > 0 else []",
            ("return list(xs[-n:])", "return list(xs[-n + 1:]) if n > 0 else []"),
            (("last_n([1, 2, 3], 2)", "[2, 3]"), ("last_n([1, 2, 3], 0)", "[]"), ("last_n([1], 1)", "[1]"), ("last_n([4, 5, 6], 3)", "[4, 5, 6]")),
        ),
        Func(
            "to_fahrenheit", "to_fahrenheit(c)", "Convert degrees Celsius to Fahrenheit.",
            "return c * 9 / 5 + 32",
            ("return c * 5 / 9 + 32", "return (c + 32) * 9 / 5"),
            (("to_fahrenheit(100)", "212.0"), ("to_fahrenheit(0)", "32.0"), ("to_fahrenheit(-40)", "-40.0"), ("to_fahrenheit(10)", "50.0")),
        ),
        Func(
            "word_count", "word_count(text)", "The number of whitespace-separated words in text.",
            "return len(text.split())",
            ('return len(text.split(" "))',),
            (("word_count('a  b')", "2"), ("word_count('one two three')", "3"), ("word_count('')", "0"), ("word_count('hi')", "1")),
        ),
        Func(
            "is_palindrome", "is_palindrome(s)", "Whether s reads the same backwards, ignoring case and non-letters.",
            "t = [c.lower() for c in s if c.isalnum()]\nreturn t == t[::-1]",
            ("t = [c for c in s if c.isalnum()]\nreturn t == t[::-1]", "t = [c.lower() for c in s]\nreturn t == t[::-1]"),
            (("is_palindrome('Racecar')", "True"), ("is_palindrome('A man, a plan, a canal: Panama')", "True"), ("is_palindrome('abc')", "False"), ("is_palindrome('aba')", "True")),
        ),
        Func(
            "count_vowels", "count_vowels(s)", "The number of vowels (a, e, i, o, u, any case) in s.",
            'return sum(1 for c in s.lower() if c in "aeiou")',
            ('return sum(1 for c in s.lower() if c in "aeio")', 'return sum(1 for c in s if c in "aeiou")'),
            (("count_vowels('Umbrella')", "3"), ("count_vowels('sky')", "0"), ("count_vowels('banana')", "3"), ("count_vowels('ou')", "2")),
        ),
        Func(
            "slugify", "slugify(text)", "Lowercase words of text joined by single hyphens.",
            'import re\nreturn "-".join(re.findall(r"[a-z0-9]+", text.lower()))',
            ('import re\nreturn "-".join(re.findall(r"[a-z0-9]+", text))', 'import re\nreturn "-".join(re.split(r"\\s", text.lower()))'),
            (("slugify('Hello World')", "'hello-world'"), ("slugify('  Many   spaces ')", "'many-spaces'"), ("slugify('abc')", "'abc'"), ("slugify('a1 b2')", "'a1-b2'")),
        ),
        Func(
            "capitalize_words", "capitalize_words(text)", "Each space-separated word with its first letter upper-cased.",
            'return " ".join(w[:1].upper() + w[1:] for w in text.split(" "))',
            ('return " ".join(w[:1].upper() + w[2:] for w in text.split(" "))', 'return " ".join(w.upper() for w in text.split(" "))'),
            (("capitalize_words('hello world')", "'Hello World'"), ("capitalize_words('a')", "'A'"), ("capitalize_words('x yz')", "'X Yz'"), ("capitalize_words('')", "''")),
        ),
        Func(
            "merge_counts", "merge_counts(a, b)", "A new dict with the counts of a and b added key by key.",
            "out = dict(a)\nfor k, v in b.items():\n    out[k] = out.get(k, 0) + v\nreturn out",
            ("out = dict(a)\nfor k, v in b.items():\n    out[k] = v\nreturn out",),
            (("merge_counts({'x': 1}, {'x': 2})", "{'x': 3}"), ("merge_counts({}, {'y': 1})", "{'y': 1}"), ("merge_counts({'x': 1}, {})", "{'x': 1}"), ("merge_counts({'a': 1}, {'b': 2})", "{'a': 1, 'b': 2}")),
        ),
    )
}  # fmt: skip

MODULES: dict[str, tuple[str, ...]] = {
    "numbers": ("clamp", "mean", "median", "factorial", "last_n", "to_fahrenheit"),
    "text": ("word_count", "is_palindrome", "count_vowels", "slugify", "capitalize_words", "merge_counts"),
}


def module_source(funcs: list[str], bodies: dict[str, str] | None = None) -> str:
    """A module defining ``funcs`` (``bodies`` overrides some function bodies, e.g. with a bug)."""
    parts = [FUNCS[f].source((bodies or {}).get(f)) for f in funcs]
    return '"""Utilities."""\n\n\n' + "\n\n".join(parts)


def evaluate_call(source: str, call: str) -> Any:
    """The value of ``call`` with ``source`` (trusted, project-written code) executed first."""
    scope: dict[str, Any] = {}
    exec(compile(source, "<repo_fix>", "exec"), scope)
    return eval(call, scope)
