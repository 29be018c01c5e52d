"""The sandbox boundary keeps plain-Python test semantics (issue 14's code-grader defects).

Each test here failed before the boundary was redesigned: candidate-raised StopIteration ending
an iterator in the grader, in-place changes copied back before the right-hand side ran, results
over the old 1,000,000-byte reply limit, multiprocessing, deep plain data, huge ints, iterators,
prompt helpers in HumanEval checks, host site-packages importable, and the codec's own limits.
"""

from __future__ import annotations

import json

import pytest

from verigym.graders.code import run_function_tests
from verigym.graders.code._codec import CodecError, decode, dumps, encode


def _passes(code: str, tests: str, entry: str = "f", **kw: object) -> bool:
    return run_function_tests(code, tests, entry, **kw).all_passed  # type: ignore[arg-type]


def test_candidate_stopiteration_cannot_end_an_iterator_in_the_tests() -> None:
    cheat = "def f(x):\n    raise StopIteration\n"
    assert not _passes(cheat, "assert all(map(f, [1, 2]))\n")
    assert not _passes(cheat, "assert not any(map(f, [1, 2]))\n")
    assert not _passes(
        cheat, "def check(candidate):\n    for ok in map(candidate, [1]):\n        assert ok\n"
    )
    res = run_function_tests(cheat, "assert all(map(f, [1]))\n", "f")
    assert "StopIteration" in res.cases[0].reason
    caught = "try:\n    f(1)\n    ok = False\nexcept Exception:\n    ok = True\nassert ok\n"
    assert _passes(cheat, caught)  # still an exception the tests can catch, as PEP 479 makes it


def test_argument_mutation_is_visible_after_the_statement_not_inside_it() -> None:
    cheat = "def f(xs):\n    xs.clear()\n    return []\n"
    assert not _passes(cheat, "data = [3, 1, 2]\nassert f(data) == sorted(data)\n")
    assert not _passes(
        "def f(d):\n    d.clear()\n    return {}\n",
        "d = {'a': 1}\nassert f(d) == {v: k for k, v in d.items()}\n",
    )
    inplace = "def f(xs):\n    xs.sort()\n"
    assert _passes(inplace, "data = [3, 1, 2]\nf(data)\nassert data == [1, 2, 3]\n")
    in_check = "def check(candidate):\n    d = [2, 1]\n    candidate(d)\n    assert d == [1, 2]\n"
    assert _passes(inplace, in_check)


def test_large_results_and_arguments_cross_the_boundary() -> None:
    code = "def f(n):\n    return list(range(n))\n"
    assert _passes(code, "assert f(100000) == list(range(100000))\n")
    search = "def f(xs, t):\n    return xs.index(t)\n"
    assert _passes(search, "assert f(list(range(0, 2000000, 2)), 1999998) == 999999\n")
    over = "def f():\n    return 'x' * (3 * 1024 * 1024)\n"
    res = run_function_tests(over, "assert f() == 'x'\n", "f", max_result_bytes=1024 * 1024)
    assert not res.all_passed and "limit" in res.cases[0].reason


def test_multiprocessing_pool_works_in_the_sandbox() -> None:
    code = (
        "import multiprocessing\ndef _sq(x):\n    return x * x\n"
        "def f(n):\n    with multiprocessing.Pool(2) as p:\n        return sum(p.map(_sq, range(n)))\n"
    )
    assert _passes(code, "assert f(10) == 285\n")


def test_deep_plain_data_both_ways() -> None:
    code = "import sys\nsys.setrecursionlimit(20000)\ndef f(x):\n    return 0 if not x else 1 + f(x[0])\n"
    assert _passes(code, "x = []\nfor _ in range(3000):\n    x = [x]\nassert f(x) == 3000\n")
    nest = "def f(n):\n    x = []\n    for _ in range(n):\n        x = [x]\n    return x\n"
    assert _passes(nest, "r = f(1500)\nd = 0\nwhile r:\n    r = r[0]\n    d += 1\nassert d == 1500\n")


def test_results_keep_their_types_huge_ints_and_iterators() -> None:
    assert _passes(
        "import math\ndef f(n):\n    return math.factorial(n)\n",
        "import math\nassert f(3000) == math.factorial(3000)\n",
    )
    gen = "def f(n):\n    return (i for i in range(n))\n"
    assert _passes(gen, "assert list(f(3)) == [0, 1, 2]\n")
    assert not _passes(gen, "assert f(3) == [0, 1, 2]\n")  # a generator is not a list in plain Python
    assert _passes("def f():\n    return range(3)\n", "assert f() == range(3)\n")
    assert _passes("def f():\n    return {'a': 1}.keys()\n", "assert f() == {'a'}\n")


def test_module_state_is_fresh_per_case_and_shared_within_one() -> None:
    code = "n = [0]\ndef f():\n    n[0] += 1\n    return n[0]\n"
    assert _passes(code, "assert f() == 1\nassert f() == 1\nassert [f(), f()] == [1, 2]\n")


def test_humaneval_check_with_loops_and_prompt_helpers() -> None:
    helper = "def enc(s):\n    return s[::-1]\n"
    tests = "def check(candidate):\n    for w in ['ab', 'xyz']:\n        assert candidate(enc(w)) == w\n"
    good = "def dec(s):\n    return enc(s)\n"
    assert _passes(good, tests, "dec", prelude=helper, tests_prelude=helper)
    cheat = "def enc(s):\n    return s\ndef dec(s):\n    return s\n"  # redefining the helper does not reach the tests
    assert not _passes(cheat, tests, "dec", prelude=helper, tests_prelude=helper)


def test_host_site_packages_are_not_importable() -> None:
    import sysconfig

    from verigym.graders.code.sandbox import _site_dirs

    code = (
        "import sys\nsys.path[:0] = {dirs!r}\nsys.path.append({base!r})\n"
        "def f():\n    import pytest\n    return 1\n"
    ).format(dirs=list(_site_dirs()), base=sysconfig.get_paths()["purelib"])
    res = run_function_tests(code, "assert f() == 1\n", "f")
    assert not res.all_passed and "ModuleNotFoundError" in res.cases[0].reason


def test_codec_round_trips_without_recursion_and_rejects_malformed() -> None:
    deep: list[object] = []
    x = deep
    for _ in range(5000):
        x.append([])
        x = x[0]  # type: ignore[assignment]
    back_deep, depth = decode(json.loads(dumps(encode(deep)))), 0  # no RecursionError on the way
    while back_deep:
        back_deep, depth = back_deep[0], depth + 1
    assert depth == 5000
    for value in [2**20000, float("inf"), (1, [2, {3: frozenset({4})}]), b"\x00", bytearray(b"a"), 1j]:
        back = decode(json.loads(dumps(encode(value))))
        assert back == value and type(back) is type(value)
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(CodecError):
        encode(cyclic, max_items=1000)
    for bad in ([[0, 2], 1], [[99, 1], 1], [1, 2], [[0, -1]], [[2, 1], [0, 0], 1], [{"a": 1}]):
        with pytest.raises(CodecError):
            decode(bad)


def test_single_use_workers_without_the_zygote() -> None:
    """The path of non-root hosts and unsafe mode: one worker per candidate, no hand-back."""
    import marshal

    from verigym.graders.code._session import WorkerSession
    from verigym.graders.code.sandbox import Limits, Sandbox

    code = "n = [0]\ndef f(xs):\n    n[0] += 1\n    xs.append(n[0])\n    return n[0]\n"
    with WorkerSession(
        code, mode="function", entry_point=["f"], limits=Limits(timeout_s=3), sandbox=Sandbox(), warm=False
    ) as ses:
        assert not ses.zygote
        ses.start()
        blob = marshal.dumps((([1],), {}))
        first = ses.run_case({"op": "call", "name": "f", "blob": blob})
        second = ses.run_case({"op": "call", "name": "f", "blob": blob})
        assert first.ok and decode(first.data["value"]) == 1 and decode(second.data["value"]) == 2
        assert decode(first.data["changed"]["0"]) == [1, 1]
        ses.end_case()
        fresh = ses.run_case({"op": "call", "name": "f", "blob": blob})
        assert decode(fresh.data["value"]) == 1  # module state is fresh for the next case
        proc = ses.proc
    assert proc is not None and proc.poll() is not None  # killed at the end, never handed back
