"""The adversarial code suite (tests/suites/code_adversarial.jsonl) through verifier-bench.

45 hostile candidates that probe the boundary (candidate-raised StopIteration, argument aliasing,
patching what the tests use, redefining a HumanEval prompt's helpers, results that only look
right) and 27 correct but unusual ones (large and deep data, multiprocessing, iterators, huge ints,
heavy compute, prompt helpers): 0 false passes, 0 false fails, 0 errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verigym.graders.bench import run_bench

SUITE = Path(__file__).resolve().parents[2] / "suites" / "code_adversarial.jsonl"


def test_adversarial_suite_counts() -> None:
    lines = [json.loads(x) for x in SUITE.read_text().splitlines() if x.strip()]
    assert sum(x["expect"] == "fail" for x in lines) >= 40
    assert sum(x["expect"] == "pass" for x in lines) >= 15


def test_adversarial_suite_no_false_pass_no_false_fail() -> None:
    result = run_bench("code", SUITE, jobs=2)
    assert result.errors == [], result.to_json()
    assert result.false_positives == [], result.false_positives
    assert result.false_negatives == [], result.false_negatives


def _cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "verigym", "verifier-bench", "--grader", "code", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_malformed_code_suite_lines_exit_2_naming_file_and_line(tmp_path: Path) -> None:
    ok = {"id": "a", "entry_point": "f", "solution": "def f():\n    return 1\n", "tests": "assert f() == 1\n"}
    for bad, why in [
        ({k: v for k, v in ok.items() if k != "tests"}, "missing field 'tests'"),
        ({**ok, "tests": "assert f( == 1"}, "field 'tests' does not parse"),
        ({**ok, "entry_point": "not a name"}, "entry_point"),
    ]:
        suite = tmp_path / "suite.jsonl"
        suite.write_text(
            json.dumps({**ok, "id": "z", "expect": "pass"})
            + "\n"
            + json.dumps({**bad, "expect": "pass"})
            + "\n"
        )
        out = _cli(["--suite", str(suite)])
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert f"{suite}:2" in out.stderr and why in out.stderr, out.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])  # 2: the error is raised in the bench processes
def test_without_bubblewrap_one_line_says_how_to_install_it(tmp_path: Path, jobs: str) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    out = _cli(["--suite", str(SUITE), "--jobs", jobs], env={**os.environ, "PATH": str(empty)})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "apt-get install bubblewrap" in lines[0], out.stderr
