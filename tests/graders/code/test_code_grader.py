"""code_grader in a Rubric: function and stdin/stdout problems, modes, errors vs fails."""

from __future__ import annotations

import pytest

from verigym.graders.code import (
    code_grader,
    compare_output,
    extract_code,
    run_function_tests,
    run_io_tests,
)
from verigym.graders.code.sandbox import Sandbox
from verigym.rubric import Rubric
from verigym.types import Message, Task, Trajectory, Turn


def _traj(text: str) -> Trajectory:
    msg = Message(role="assistant", content=text)
    return Trajectory(
        task_id="t", prompt=[Message(role="user", content="q")], turns=[Turn(source="model", messages=[msg])]
    )


FN_TASK = Task(
    id="sq",
    prompt=(Message(role="user", content="write sq"),),
    info={
        "entry_point": "sq",
        "tests": "assert sq(2) == 4\nassert sq(-3) == 9\nassert sq(0) == 0\nassert sq(10) == 100\n",
    },
)


def test_extract_code_takes_last_python_block() -> None:
    text = "first\n```python\nx = 1\n```\nthen\n```python\ndef f():\n    return 2\n```\n"
    assert extract_code(text) == "def f():\n    return 2\n"
    assert extract_code("```\ny = 3\n```") == "y = 3\n"
    assert extract_code("def g(): return 1") == "def g(): return 1"
    assert extract_code("no code here, sorry!") is None


async def test_fraction_and_all_modes() -> None:
    wrong_on_zero = "```python\ndef sq(x):\n    return x * x if x else 1\n```"
    frac = Rubric(graders=[code_grader("code", mode="fraction")])
    allm = Rubric(graders=[code_grader("code", mode="all")])
    s1 = await frac.score(FN_TASK, _traj(wrong_on_zero))
    s2 = await allm.score(FN_TASK, _traj(wrong_on_zero))
    assert s1.reward == 0.75 and s2.reward == 0.0
    s3 = await allm.score(FN_TASK, _traj("```python\ndef sq(x):\n    return x ** 2\n```"))
    assert s3.reward == 1.0 and "passed 4/4" in s3.grades["code"].detail


async def test_candidate_failures_are_fails_not_errors() -> None:
    rubric = Rubric(graders=[code_grader("code")])
    for body in ("import sys\nsys.exit(0)", "def sq(x):\n    raise RuntimeError('boom')", "def sq(x:\n"):
        score = await rubric.score(FN_TASK, _traj(f"```python\n{body}\n```"))
        assert score.error is None and score.reward == 0.0, (body, score)
    score = await rubric.score(FN_TASK, _traj("I cannot solve this."))
    assert score.reward == 0.0 and "no code" in score.grades["code"].detail


async def test_infrastructure_and_task_problems_are_errors() -> None:
    rubric = Rubric(graders=[code_grader("code")])
    bad_task = Task(id="x", prompt=(Message(role="user", content="q"),), info={})
    score = await rubric.score(bad_task, _traj("```python\nx = 1\n```"))
    assert score.error is not None and score.reward is None
    broken_tests = Task(id="y", prompt=FN_TASK.prompt, info={"entry_point": "sq", "tests": "x = = 1"})
    score = await rubric.score(broken_tests, _traj("```python\ndef sq(x):\n    return x * x\n```"))
    assert score.error is not None and "parse" in score.error


def test_results_cross_the_boundary_as_plain_typed_data() -> None:
    tests = "assert f() == (1, 2)\nassert f() != [1, 2]\nassert type(g()) is dict and g() == {(1, 2): {3}}\n"
    code = "def f():\n    return (1, 2)\ndef g():\n    return {(1, 2): {3}}\n"
    res = run_function_tests(code, tests, "f")
    assert not res.all_passed  # g is not the entry point: the tests cannot reach it
    res = run_function_tests(
        code.replace("def g", "def _g"), "assert f() == (1, 2)\nassert f() != [1, 2]\n", "f"
    )
    assert res.all_passed


def test_candidate_exceptions_reach_tests_as_builtin_types() -> None:
    tests = "try:\n    f(0)\n    raised = False\nexcept ValueError:\n    raised = True\nassert raised\nassert f(2) == 0.5\n"
    code = "def f(x):\n    if x == 0:\n        raise ValueError('zero')\n    return 1 / x\n"
    assert run_function_tests(code, tests, "f").all_passed


def test_humaneval_check_style() -> None:
    tests = (
        "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 6\n\ncheck(inc)\n"
    )
    res = run_function_tests("def inc(x):\n    return x + 1\n", tests, "inc")
    assert res.all_passed and res.total == 2


def test_io_problems_strict_and_float_tolerance() -> None:
    code = "n = int(input())\nprint(n * 2)\nprint(1 / 3)\n"
    cases = [
        {"stdin": "2\n", "stdout": "4\n0.333333\n"},
        {"stdin": "5\n", "stdout": "10\n0.3333333333333333\n"},
    ]
    strict = run_io_tests(code, cases)
    assert [c.passed for c in strict.cases] == [False, True]
    tol = run_io_tests(code, cases, float_tol=1e-6)
    assert tol.all_passed
    crash = run_io_tests("raise SystemExit(4)", cases[:1])
    assert not crash.all_passed and "runtime error" in crash.cases[0].reason
    slow = run_io_tests("while True:\n    pass\n", cases[:1], timeout_s=0.5)
    assert "timeout" in slow.cases[0].reason


def test_compare_output_rules() -> None:
    assert compare_output("1 2  \n3\n\n", "1 2\n3")[0]
    assert not compare_output("1 2\n3", "1 2\n4")[0]
    assert not compare_output("a", "a\n", exact=True)[0]
    assert compare_output("1.0000001", "1.0", float_tol=1e-6)[0]
    assert not compare_output("1.01", "1.0", float_tol=1e-6)[0]
    assert not compare_output("nan", "1.0", float_tol=1.0)[0]
    assert not compare_output("1000", "1000.05 x", float_tol=1e-4)[0]


async def test_network_attempts_are_logged_for_the_detectors() -> None:
    code = "```python\nimport socket\ndef sq(x):\n    try:\n        socket.create_connection(('10.0.0.1', 80), timeout=0.1)\n    except OSError:\n        pass\n    return x * x\n```"
    traj = _traj(code)
    score = await Rubric(graders=[code_grader("code")]).score(FN_TASK, traj)
    assert score.reward == 1.0
    assert any("socket.connect" in e for e in traj.state["sandbox_events"])


def test_unsafe_mode_grades_without_bwrap() -> None:
    box = Sandbox(unsafe_no_sandbox=True)
    box.bwrap = None
    res = run_function_tests("def sq(x):\n    return x * x\n", "assert sq(3) == 9\n", "sq", sandbox=box)
    assert res.all_passed


def test_each_candidate_gets_a_fresh_sandbox() -> None:
    writer = "import os\nopen('/tmp/left_behind', 'w').write('x')\ndef f():\n    return os.getuid()\n"
    reader = "import os\ndef f():\n    return os.path.exists('/tmp/left_behind')\n"
    first = run_function_tests(writer, "assert f() == -1\n", "f")
    assert not first.all_passed
    for _ in range(3):  # the warm pool hands out a new worker each time, never a used one
        assert run_function_tests(reader, "assert f() is False\n", "f").all_passed


def test_in_place_changes_to_arguments_reach_the_tests() -> None:
    tests = "xs = [3, 1, 2]\nsort_it(xs)\nassert xs == [1, 2, 3]\nd = {}\nsort_it([2, 1], d)\nassert d == {'n': 2}\n"
    good = "def sort_it(xs, stats=None):\n    xs.sort()\n    if stats is not None:\n        stats['n'] = len(xs)\n"
    bad = "def sort_it(xs, stats=None):\n    return sorted(xs)\n"
    assert run_function_tests(good, tests, "sort_it").all_passed
    assert not run_function_tests(bad, tests, "sort_it").all_passed


def test_python_path_makes_installed_packages_importable() -> None:
    from verigym.graders.code.sandbox import site_packages

    code = "import numpy as np\ndef norm(v):\n    return float(np.linalg.norm(np.array(v)))\n"
    tests = "assert abs(norm([3, 4]) - 5.0) < 1e-12\n"
    assert not run_function_tests(code, tests, "norm").all_passed  # stdlib only by default
    assert run_function_tests(code, tests, "norm", python_path=[site_packages()]).all_passed


async def test_missing_bwrap_is_an_errored_grade_with_the_remedy(monkeypatch: pytest.MonkeyPatch) -> None:
    import verigym.graders.code.sandbox as sandbox_mod

    monkeypatch.setattr(sandbox_mod.shutil, "which", lambda name: None)
    score = await Rubric(graders=[code_grader("code")]).score(
        FN_TASK, _traj("```python\ndef sq(x):\n    return x * x\n```")
    )
    assert score.reward is None and score.error is not None and "--unsafe-no-sandbox" in score.error
