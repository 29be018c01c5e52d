"""Function-writing problems of the ``code`` environment, tier 1 (easy), written for verigym.

Each problem: ``id``, ``tier``, ``entry_point``, ``prompt`` (the statement with the signature),
``solution`` (a reference solution) and ``tests`` (hidden ``assert`` lines calling the entry
point). Tiers 2 and 3 are in ``code_problems_hard``. ``tests/envs/builtin/test_code.py`` checks that every
reference solution passes its tests.
"""

from __future__ import annotations

__all__ = ["TIER1"]

TIER1: list[dict[str, object]] = [
    {
        "id": "c01", "tier": 1, "entry_point": "sum_of_evens",
        "prompt": "Write `sum_of_evens(nums: list[int]) -> int` returning the sum of the even numbers in `nums`.",
        "solution": "def sum_of_evens(nums):\n    return sum(n for n in nums if n % 2 == 0)\n",
        "tests": "assert sum_of_evens([1, 2, 3, 4]) == 6\nassert sum_of_evens([]) == 0\nassert sum_of_evens([-2, -3, 5]) == -2\nassert sum_of_evens([7, 9]) == 0\n",
    },
    {
        "id": "c02", "tier": 1, "entry_point": "reverse_words",
        "prompt": "Write `reverse_words(s: str) -> str` that reverses the order of the words of `s` (words are separated by runs of spaces; the result joins them with single spaces and has no leading or trailing space).",
        "solution": "def reverse_words(s):\n    return ' '.join(reversed(s.split()))\n",
        "tests": "assert reverse_words('hello world') == 'world hello'\nassert reverse_words('  a   b c ') == 'c b a'\nassert reverse_words('') == ''\nassert reverse_words('one') == 'one'\n",
    },
    {
        "id": "c03", "tier": 1, "entry_point": "is_palindrome",
        "prompt": "Write `is_palindrome(s: str) -> bool`: True when `s` reads the same backwards, ignoring case and every character that is not a letter or digit.",
        "solution": "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n",
        "tests": "assert is_palindrome('A man, a plan, a canal: Panama')\nassert not is_palindrome('hello')\nassert is_palindrome('')\nassert is_palindrome('No lemon, no melon')\nassert not is_palindrome('ab1')\n",
    },
    {
        "id": "c04", "tier": 1, "entry_point": "count_vowels",
        "prompt": "Write `count_vowels(s: str) -> int` returning how many characters of `s` are vowels (a, e, i, o, u in either case).",
        "solution": "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)\n",
        "tests": "assert count_vowels('Hello World') == 3\nassert count_vowels('xyz') == 0\nassert count_vowels('AEIOUaeiou') == 10\nassert count_vowels('') == 0\n",
    },
    {
        "id": "c05", "tier": 1, "entry_point": "fizzbuzz",
        "prompt": "Write `fizzbuzz(n: int) -> list[str]` returning the strings for 1..n: 'Fizz' for multiples of 3, 'Buzz' for multiples of 5, 'FizzBuzz' for both, otherwise the number as a string.",
        "solution": "def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n        s = ('Fizz' if i % 3 == 0 else '') + ('Buzz' if i % 5 == 0 else '')\n        out.append(s or str(i))\n    return out\n",
        "tests": "assert fizzbuzz(5) == ['1', '2', 'Fizz', '4', 'Buzz']\nassert fizzbuzz(15)[-1] == 'FizzBuzz'\nassert fizzbuzz(0) == []\nassert len(fizzbuzz(30)) == 30\n",
    },
    {
        "id": "c06", "tier": 1, "entry_point": "max_of_three",
        "prompt": "Write `max_of_three(a: int, b: int, c: int) -> int` returning the largest of the three numbers without using the built-in `max`.",
        "solution": "def max_of_three(a, b, c):\n    m = a\n    if b > m:\n        m = b\n    if c > m:\n        m = c\n    return m\n",
        "tests": "assert max_of_three(1, 2, 3) == 3\nassert max_of_three(3, 2, 1) == 3\nassert max_of_three(-5, -2, -9) == -2\nassert max_of_three(4, 4, 4) == 4\n",
    },
    {
        "id": "c07", "tier": 1, "entry_point": "celsius_to_fahrenheit",
        "prompt": "Write `celsius_to_fahrenheit(c: float) -> float` converting degrees Celsius to Fahrenheit (F = C * 9/5 + 32).",
        "solution": "def celsius_to_fahrenheit(c):\n    return c * 9 / 5 + 32\n",
        "tests": "assert celsius_to_fahrenheit(0) == 32\nassert celsius_to_fahrenheit(100) == 212\nassert abs(celsius_to_fahrenheit(-40) + 40) < 1e-9\nassert abs(celsius_to_fahrenheit(37) - 98.6) < 1e-9\n",
    },
    {
        "id": "c08", "tier": 1, "entry_point": "factorial",
        "prompt": "Write `factorial(n: int) -> int` returning n! for n >= 0 (0! is 1).",
        "solution": "def factorial(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n    return r\n",
        "tests": "assert factorial(0) == 1\nassert factorial(1) == 1\nassert factorial(5) == 120\nassert factorial(20) == 2432902008176640000\n",
    },
    {
        "id": "c09", "tier": 1, "entry_point": "count_words",
        "prompt": "Write `count_words(text: str) -> dict[str, int]` mapping each lowercase word of `text` (words are split on whitespace, case-insensitive) to how many times it occurs.",
        "solution": "def count_words(text):\n    out = {}\n    for w in text.lower().split():\n        out[w] = out.get(w, 0) + 1\n    return out\n",
        "tests": "assert count_words('the cat the Dog') == {'the': 2, 'cat': 1, 'dog': 1}\nassert count_words('') == {}\nassert count_words('A a A') == {'a': 3}\n",
    },
    {
        "id": "c10", "tier": 1, "entry_point": "second_largest",
        "prompt": "Write `second_largest(nums: list[int]) -> int | None` returning the second largest distinct value of `nums`, or None when there are fewer than two distinct values.",
        "solution": "def second_largest(nums):\n    d = sorted(set(nums))\n    return d[-2] if len(d) >= 2 else None\n",
        "tests": "assert second_largest([3, 1, 4, 4]) == 3\nassert second_largest([5]) is None\nassert second_largest([2, 2]) is None\nassert second_largest([-1, -7, -3]) == -3\n",
    },
    {
        "id": "c11", "tier": 1, "entry_point": "capitalize_words",
        "prompt": "Write `capitalize_words(s: str) -> str` that upper-cases the first letter of every space-separated word and lower-cases the rest, keeping the spaces as they are.",
        "solution": "def capitalize_words(s):\n    return ' '.join(w[:1].upper() + w[1:].lower() for w in s.split(' '))\n",
        "tests": "assert capitalize_words('hello wORLD') == 'Hello World'\nassert capitalize_words('a  b') == 'A  B'\nassert capitalize_words('') == ''\nassert capitalize_words('x') == 'X'\n",
    },
    {
        "id": "c12", "tier": 1, "entry_point": "digit_sum",
        "prompt": "Write `digit_sum(n: int) -> int` returning the sum of the decimal digits of `n` (use the absolute value for negative numbers).",
        "solution": "def digit_sum(n):\n    return sum(int(d) for d in str(abs(n)))\n",
        "tests": "assert digit_sum(123) == 6\nassert digit_sum(0) == 0\nassert digit_sum(-45) == 9\nassert digit_sum(99999) == 45\n",
    },
    {
        "id": "c13", "tier": 1, "entry_point": "remove_duplicates",
        "prompt": "Write `remove_duplicates(items: list) -> list` returning the items without repeats, keeping the first occurrence of each in the original order.",
        "solution": "def remove_duplicates(items):\n    seen = []\n    for x in items:\n        if x not in seen:\n            seen.append(x)\n    return seen\n",
        "tests": "assert remove_duplicates([1, 2, 1, 3, 2]) == [1, 2, 3]\nassert remove_duplicates([]) == []\nassert remove_duplicates(['b', 'a', 'b']) == ['b', 'a']\n",
    },
    {
        "id": "c14", "tier": 1, "entry_point": "is_leap_year",
        "prompt": "Write `is_leap_year(year: int) -> bool` for the Gregorian calendar (divisible by 4, except centuries not divisible by 400).",
        "solution": "def is_leap_year(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n",
        "tests": "assert is_leap_year(2024)\nassert not is_leap_year(1900)\nassert is_leap_year(2000)\nassert not is_leap_year(2023)\n",
    },
    {
        "id": "c15", "tier": 1, "entry_point": "clamp",
        "prompt": "Write `clamp(x: float, low: float, high: float) -> float` returning `x` limited to the range [low, high].",
        "solution": "def clamp(x, low, high):\n    return low if x < low else high if x > high else x\n",
        "tests": "assert clamp(5, 0, 10) == 5\nassert clamp(-1, 0, 10) == 0\nassert clamp(11, 0, 10) == 10\nassert clamp(2.5, 2.5, 3) == 2.5\n",
    },
]  # fmt: skip
