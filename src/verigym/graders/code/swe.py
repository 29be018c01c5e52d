"""SWE-style grading of a repository task: patch, reset the tests, run FAIL_TO_PASS / PASS_TO_PASS.

Following SWE-bench's harness, hardened against the reward hacks seen in practice:

1. the candidate's tree is ``files_after`` (or ``files_before`` with the unified diff ``patch``
   applied; a patch that does not apply is a fail);
2. every *protected* file (tests, ``conftest.py``, pytest/tox/setup config, CI files) is reset to
   its original version, test files the candidate added are removed, deleted ones are restored,
   and the hidden test files are written over everything;
3. pytest runs in the bubblewrap sandbox (no network, read-only system, the grader's pytest
   bound read-only, plugin autoload off, no cache), on a fresh directory with no git history;
4. resolved = every FAIL_TO_PASS test passed and every PASS_TO_PASS test passed; a missing,
   skipped, xfailed or erroring test is not a pass, and a broken collection fails its tests.

Anything the candidate's code causes is a fail with a reason; only an unusable sandbox or a grader
without pytest is an error (``SweResult.error``).

Limit, as for every unit-test harness: the tests run in the same process as the code they test,
so determined code could still forge its results. The layers here: the report travels on its own
descriptor with a per-run nonce held in a closure (a printed fake report is ignored), outcomes are
also taken from a hook around each test call (patched report objects do not help), and changes
that reach into the test run (pytest internals, the runner, caller frames, the heap,
``os._exit``, naming hidden test files) fail before anything runs (``forbid_framework_refs``).

``Task.info`` keys read by :func:`swe_grader`: ``repo_files`` (dict path → text, the repository
before), ``hidden_tests`` (dict path → text), ``fail_to_pass`` and ``pass_to_pass`` (lists of
pytest node ids). The candidate's tree is ``trajectory.state["files"]`` when a repository
environment put it there, else the last ```` ```diff ```` block of the final answer is applied.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.graders.code._pytest_run import (
    SITE_INSIDE,
    env,
    new_nonce,
    parse_report,
    pytest_site_dir,
    runner_source,
)
from verigym.graders.code.patch import PatchError, apply_patch, changed_paths
from verigym.graders.code.sandbox import Limits, Sandbox, SandboxUnavailable, python_executable
from verigym.graders.families import GraderFamily
from verigym.rubric import Grader
from verigym.types import Grade, Task, Trajectory

__all__ = [
    "BENCH",
    "PROTECTED_PATTERNS",
    "TEST_PATTERNS",
    "PatchError",
    "SweResult",
    "apply_patch",
    "bench_verdict",
    "framework_refs",
    "grade_repo",
    "is_protected",
    "is_test_path",
    "swe_grader",
]

TEST_PATTERNS = ("test_*.py", "*_test.py", "tests/*", "test/*", "testing/*", "conftest.py")
PROTECTED_PATTERNS = (
    *TEST_PATTERNS,
    "pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "noxfile.py",
    ".github/*",
    ".gitlab-ci.yml",
    ".circleci/*",
    ".pre-commit-config.yaml",
    "Makefile",
)


def _matches(path: str, patterns: Sequence[str]) -> bool:
    parts = path.split("/")
    for pat in patterns:
        if "/" in pat:  # a directory anywhere in the path
            head = pat.split("/")[0]
            if head in parts[:-1]:
                return True
        elif fnmatch.fnmatch(parts[-1], pat):
            return True
    return False


def is_test_path(path: str, patterns: Sequence[str] = TEST_PATTERNS) -> bool:
    """True for test files: ``test_*.py``, ``*_test.py``, ``conftest.py`` or under ``tests/``."""
    return _matches(path, patterns)


def is_protected(path: str, patterns: Sequence[str] = PROTECTED_PATTERNS) -> bool:
    """True for files the candidate may not change: tests, test/CI configuration."""
    return _matches(path, patterns)


@dataclass
class SweResult:
    """The outcome of one repository grading. ``status`` maps node id → passed/failed/error/
    skipped/xfail/missing for every FAIL_TO_PASS and PASS_TO_PASS test."""

    resolved: bool = False
    fail_to_pass: dict[str, str] = field(default_factory=dict)
    pass_to_pass: dict[str, str] = field(default_factory=dict)
    reset_files: list[str] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    collect_errors: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    reason: str = ""
    log: str = ""
    wall_s: float = 0.0
    error: str | None = None

    @property
    def fraction(self) -> float:
        every = list(self.fail_to_pass.values()) + list(self.pass_to_pass.values())
        return sum(s == "passed" for s in every) / len(every) if every else 0.0

    def detail(self) -> str:
        f2p = sum(s == "passed" for s in self.fail_to_pass.values())
        p2p = sum(s == "passed" for s in self.pass_to_pass.values())
        text = (
            f"{'resolved' if self.resolved else 'not resolved'}: FAIL_TO_PASS {f2p}/{len(self.fail_to_pass)}, "
            f"PASS_TO_PASS {p2p}/{len(self.pass_to_pass)}"
        )
        if self.reason:
            text += f"; {self.reason}"
        if self.reset_files or self.removed_files:
            text += f"; reset {len(self.reset_files)} / removed {len(self.removed_files)} protected files"
        return text[:600]


def prepare_tree(
    files_before: Mapping[str, str],
    files_after: Mapping[str, str],
    hidden_tests: Mapping[str, str],
    protected: Sequence[str] = PROTECTED_PATTERNS,
) -> tuple[dict[str, str], list[str], list[str]]:
    """The tree to test: protected files reset, added ones removed, hidden tests written.

    Returns (tree, reset paths, removed paths)."""
    tree = {p: t for p, t in files_after.items() if not p.startswith(".git/") and p != ".git"}
    added, modified, deleted = changed_paths(files_before, tree)
    removed = [p for p in added if is_protected(p, protected) and p not in hidden_tests]
    reset = [p for p in modified + deleted if is_protected(p, protected)]
    for p in removed:
        del tree[p]
    for p in reset:
        tree[p] = files_before[p]
    tree.update(hidden_tests)
    return tree, reset, removed


def grade_repo(
    files_before: Mapping[str, str],
    files_after: Mapping[str, str] | None,
    hidden_tests: Mapping[str, str],
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str] = (),
    *,
    patch: str | None = None,
    timeout_s: float = 120.0,
    memory_mb: int = 2048,
    plugins: Sequence[str] = (),
    protected: Sequence[str] = PROTECTED_PATTERNS,
    forbid_framework_refs: bool = True,
    unsafe_no_sandbox: bool = False,
) -> SweResult:
    """Grade one repository task (see the module docstring). Give ``files_after`` or ``patch``.

    ``forbid_framework_refs``: fail a change whose non-test files newly import pytest, _pytest or
    pluggy, inspect their callers' frames or name a hidden test file (the code under test runs in
    pytest's process and could rewrite its reports or read the expected values)."""
    result = SweResult(
        fail_to_pass=dict.fromkeys(fail_to_pass, "missing"),
        pass_to_pass=dict.fromkeys(pass_to_pass, "missing"),
    )
    if files_after is None:
        if patch is None:
            raise ValueError("grade_repo needs files_after or patch")
        try:
            files_after = apply_patch(files_before, patch)
        except PatchError as exc:
            result.reason = f"the patch does not apply: {exc}"
            return result
    tree, result.reset_files, result.removed_files = prepare_tree(
        files_before, files_after, hidden_tests, protected
    )
    if forbid_framework_refs:
        touched = framework_refs(files_before, tree, hidden_tests)
        if touched:
            result.reason = f"the change reaches into the test run: {', '.join(touched[:3])}"
            return result
    ids = list(dict.fromkeys([*fail_to_pass, *pass_to_pass]))
    targets = sorted({i.split("::")[0] for i in ids if i.split("::")[0] in tree})
    if not targets:
        result.reason = "none of the FAIL_TO_PASS / PASS_TO_PASS test files exist in the tree"
        return result
    args = [
        "-q",
        "-rN",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "--rootdir=.",
        "-W",
        "ignore::DeprecationWarning",
    ]
    for plugin in plugins:
        args += ["-p", plugin]
    nonce = new_nonce()
    try:
        box = Sandbox(unsafe_no_sandbox=unsafe_no_sandbox, ro_binds=[(pytest_site_dir(), SITE_INSIDE)])
        src = runner_source(args + targets, pytest_site_dir() if unsafe_no_sandbox else SITE_INSIDE)
        run = box.run(
            [python_executable(), "-S", "-I", "-B", "-c", src],
            files=tree,
            stdin=nonce + "\n",
            limits=Limits(
                timeout_s=timeout_s, memory_mb=memory_mb, max_procs=128, max_output_bytes=2_000_000
            ),
            env=env(),
        )
    except (SandboxUnavailable, RuntimeError) as exc:
        result.error = str(exc)
        return result
    result.wall_s, result.log = run.wall_s, run.stdout[-4000:]
    result.events = list(run.events[:50])  # written as they happen, so kept even if the run dies
    markers = parse_report(run.stderr, nonce)
    if markers["import_error"] or not markers["boot"]:
        result.error = (
            f"pytest could not start in the sandbox: {markers['import_error'] or run.stderr[-300:]}"
        )
        return result
    report = markers["report"]
    if report is None:
        why = run.killed_reason or f"exit code {run.exit_code}"
        result.reason = f"the test run ended without a report ({why}): the code under test broke the runner"
        return result
    statuses: dict[str, str] = {str(k): str(v) for k, v in dict(report.get("results", {})).items()}
    result.collect_errors = [str(c) for c in report.get("collect_errors", [])]
    result.events = result.events or [str(e) for e in report.get("events", [])][:50]
    for table in (result.fail_to_pass, result.pass_to_pass):
        for test_id in table:
            table[test_id] = statuses.get(test_id, "missing")
    every = list(result.fail_to_pass.values()) + list(result.pass_to_pass.values())
    result.resolved = bool(every) and all(s == "passed" for s in every)
    if not result.resolved:
        bad = [
            f"{t}: {s}" for t, s in {**result.fail_to_pass, **result.pass_to_pass}.items() if s != "passed"
        ]
        result.reason = "; ".join(bad[:3]) + (
            f" (collection errors: {', '.join(result.collect_errors[:3])})" if result.collect_errors else ""
        )
    return result


_FRAMEWORK = re.compile(
    r"^\s*(?:import|from)\s+(_pytest|pytest|pluggy)\b|__import__\(\s*['\"](_pytest|pytest|pluggy)"
    r"|sys\.modules\s*\[\s*['\"](_pytest|pytest|pluggy|__main__)|\b_getframe\b|\.f_back\b"
    r"|inspect\.(stack|currentframe|getouterframes)\(|^\s*import\s+__main__|\bos\._exit\b"
    r"|\bgc\.get_(objects|referrers|referents)\b",
    re.M,
)


def framework_refs(
    files_before: Mapping[str, str], tree: Mapping[str, str], hidden_tests: Mapping[str, str] | None = None
) -> list[str]:
    """Changed non-test files that newly reach into the test run: import pytest/_pytest/pluggy or
    ``__main__`` (the runner), inspect callers' frames or the heap, call ``os._exit``, or name a
    hidden test file (to read the expected values)."""
    names = {p.rsplit("/", 1)[-1].removesuffix(".py") for p in (hidden_tests or {})}
    out = []
    for path, text in tree.items():
        old = files_before.get(path, "")
        if not path.endswith(".py") or is_test_path(path) or old == text:
            continue
        new_refs = set(_FRAMEWORK.findall(text)) - set(_FRAMEWORK.findall(old))
        reads = [n for n in names if n and n in text and n not in old]
        if new_refs or reads:
            out.append(path + (f" (names {reads[0]})" if reads else ""))
    return sorted(out)


_DIFF = re.compile(r"```(?:diff|patch)[^\n]*\n(.*?)```", re.S)


def swe_grader(
    name: str = "swe",
    mode: str = "resolved",
    *,
    weight: float = 1.0,
    timeout_s: float = 120.0,
    unsafe_no_sandbox: bool = False,
) -> Grader:
    """A ``Grader`` for repository tasks: 1/0 for resolved (``mode="resolved"``) or the fraction of
    FAIL_TO_PASS + PASS_TO_PASS tests passing (``mode="fraction"``). Sandbox events, reset and
    removed files are recorded in ``trajectory.state`` (``sandbox_events``, ``swe_reset_files``,
    ``swe_removed_files``) for the anti-hacking detectors."""
    if mode not in ("resolved", "fraction"):
        raise ValueError(f"swe_grader mode must be 'resolved' or 'fraction', got {mode!r}")

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        info = task.info
        missing = [k for k in ("repo_files", "hidden_tests", "fail_to_pass") if k not in info]
        if missing:
            return Grade.failed(f"task {task.id!r}: info lacks {', '.join(missing)}")
        after = trajectory.state.get("files")
        patch = None
        if not isinstance(after, dict):
            after = None
            blocks = _DIFF.findall(trajectory.final_text)
            if not blocks:
                return Grade(score=0.0, detail="no patch (```diff block) and no final files")
            patch = blocks[-1]
        result = grade_repo(
            info["repo_files"],
            after,
            patch=patch,
            hidden_tests=info["hidden_tests"],
            fail_to_pass=list(info["fail_to_pass"]),
            pass_to_pass=list(info.get("pass_to_pass", [])),
            timeout_s=float(info.get("timeout_s", timeout_s)),
            unsafe_no_sandbox=unsafe_no_sandbox,
        )
        if result.error is not None:
            return Grade.failed(f"task {task.id!r}: {result.error}")
        trajectory.state.setdefault("sandbox_events", []).extend(result.events)
        trajectory.state["swe_reset_files"] = result.reset_files
        trajectory.state["swe_removed_files"] = result.removed_files
        score = float(result.resolved) if mode == "resolved" else result.fraction
        return Grade(score=score, detail=result.detail())

    return Grader(fn=grade, weight=weight, name=name, timeout=None)


def bench_verdict(line: Mapping[str, Any], *, unsafe_no_sandbox: bool = False) -> bool:
    """Verifier-bench hook for repository lines ``{"id", "repo_files", "patch" | "files_after",
    "hidden_tests", "fail_to_pass", "pass_to_pass", "expect"}``: True when resolved.
    Raises ``RuntimeError`` on an infrastructure error."""
    result = grade_repo(
        line["repo_files"],
        line.get("files_after"),
        patch=line.get("patch"),
        hidden_tests=line["hidden_tests"],
        fail_to_pass=list(line["fail_to_pass"]),
        pass_to_pass=list(line.get("pass_to_pass", [])),
        timeout_s=float(line.get("timeout_s", 60.0)),
        unsafe_no_sandbox=unsafe_no_sandbox,
    )
    if result.error is not None:
        raise RuntimeError(result.error)
    return result.resolved


BENCH = GraderFamily("swe", bench_verdict, suites=("code_swe.jsonl",))
