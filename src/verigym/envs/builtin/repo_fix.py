"""The built-in ``repo_fix`` environment: fix an injected bug in a tiny generated Python repository.

**Task.** A package ``mylib`` of one or two modules (small utility functions), one of which has
a realistic one-line bug; ``tests/`` holds visible tests; a bug report names one failing call.
Hidden tests (more cases for every function) decide the grade, SWE-bench style.

**Harness.** ``ToolEnv`` with ``list_files``, ``read_file``, ``write_file`` and ``run_tests``.
The repository lives in the episode state (``state["files"]``); ``run_tests`` runs the
*visible* tests, as they currently are in the state, in the bubblewrap sandbox
(``verigym.graders.code.sandbox``) with a small runner (no pytest needed inside).

**Graders** (the SWE grader stack; ``graders="tests"`` keeps only the first). ``unit_tests``
(weight 1, the hard requirement) is ``verigym.graders.code.swe.swe_grader``: the final files
(``state["files"]``) with every protected file (tests, conftest, config) reset and the *hidden*
test files written over them run under pytest in the sandbox; 1 when every FAIL_TO_PASS test
(broken by the bug) and every PASS_TO_PASS test passes. Then, weight 0.1 each and (with
``hard_tests=True``, the default) gated on ``unit_tests`` so nothing else counts until the tests
pass: ``patch``, ``rollout``, ``behaviour``, ``user_experience`` and ``task_specific`` (the
changelog entry the task asks for); see ``verigym.envs.builtin._repo_fix_graders``. The prompt gives the
user's steps: run the tests, fix, run the tests again, add a changelog line, summarise, and say
what you are doing as you go. An oracle earns 1.5; reward ≥ 1 means the tests pass. The penalty is
``verigym.graders.hacking.hacking_penalty(protected_edits(), deleted_tests())``: writing to a
test or config file (even if later restored) or deleting a test drops the reward by 1. A sandbox
that cannot start is a grader *error*, never a zero. ``run_tests`` reads its results from a line
tagged with a per-run nonce the code under test is not given.

**Difficulty.** ``level`` 1: one module of three functions, the failing call in the report;
2: two modules; 3: two modules and a report that only names the function.

**Oracle.** Finds the task by its prompt, runs the tests, reads the buggy file, writes the fixed
one, runs the tests again, adds the changelog line and summarises, with a note at each step. The null policy gives up at once.
"""

from __future__ import annotations

import json
import random
import secrets
from collections.abc import Sequence
from typing import Any

from verigym.envs._args import int_arg
from verigym.envs.builtin._repo_fix_bench import SUITE_FIELDS, replay_verdict
from verigym.envs.builtin._repo_fix_graders import (
    CHANGELOG,
    behaviour_grader,
    fixed_function,
    patch_grader,
    rollout_grader,
    task_specific_grader,
    user_experience_grader,
)
from verigym.envs.builtin._repo_fix_lib import FUNCS, MODULES, evaluate_call, module_source
from verigym.envs.procedural import ProceduralEnv
from verigym.envs.registry import EnvArgError
from verigym.envs.tool import ToolEnv
from verigym.graders.code.sandbox import python_executable, run_sandboxed
from verigym.graders.code.swe import swe_grader
from verigym.graders.families import GraderFamily
from verigym.graders.hacking import deleted_tests, hacking_penalty, protected_edits
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.rubric import Rubric
from verigym.tools import State, Tool
from verigym.types import Message, Task, ToolCall

__all__ = ["BENCH", "RUNNER", "RepoFixEnv", "bench_verdict", "run_tests_in_sandbox"]

RUNNER_PATH = "_verigym_runner.py"
RUNNER = r"""
import importlib.util, json, os, sys, traceback
nonce = sys.stdin.readline().strip()
sys.path.insert(0, os.getcwd())
results = {}
for root, _, names in sorted(os.walk("tests")):
    for fname in sorted(names):
        if not (fname.startswith("test") and fname.endswith(".py")):
            continue
        path = os.path.join(root, fname)
        try:
            spec = importlib.util.spec_from_file_location(path[:-3].replace(os.sep, "."), path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except BaseException as exc:
            results[path] = ["error", f"cannot import: {type(exc).__name__}: {exc}"]
            continue
        for name in sorted(vars(mod)):
            fn = getattr(mod, name)
            if name.startswith("test") and callable(fn):
                try:
                    fn()
                    results[f"{path}::{name}"] = ["passed", ""]
                except AssertionError as exc:
                    results[f"{path}::{name}"] = ["failed", f"AssertionError: {exc}"]
                except BaseException as exc:
                    results[f"{path}::{name}"] = ["error", f"{type(exc).__name__}: {exc}"]
sys.stdout.flush()
print("\n" + nonce + " " + json.dumps(results))
"""


def run_tests_in_sandbox(
    files: dict[str, str], *, timeout_s: float = 20.0, unsafe_no_sandbox: bool = False
) -> dict[str, tuple[str, str]]:
    """Run every ``tests/test*.py`` of ``files`` in the sandbox: ``{test id: (outcome, message)}``.

    Raises ``RuntimeError`` when the run produced no result line (crash, timeout, killed) and
    ``SandboxUnavailable`` when bwrap cannot start.
    """
    nonce = secrets.token_hex(16)
    staged = {**files, RUNNER_PATH: RUNNER}
    result = run_sandboxed(
        [python_executable(), RUNNER_PATH],
        files=staged,
        stdin=nonce + "\n",
        timeout_s=timeout_s,
        unsafe_no_sandbox=unsafe_no_sandbox,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
    )
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(nonce + " "):
            raw = json.loads(line[len(nonce) + 1 :])
            return {k: (str(v[0]), str(v[1])) for k, v in raw.items()}
    why = result.killed_reason or ("timed out" if result.timed_out else f"exit code {result.exit_code}")
    raise RuntimeError(f"the test run gave no result ({why}): {result.stderr[-300:]}")


def _test_file(funcs: Sequence[str], module: str, cases: dict[str, list[int]]) -> str:
    lines = [f"from mylib.{module} import {', '.join(funcs)}", ""]
    for f in funcs:
        for i in cases[f]:
            call, expected = FUNCS[f].cases[i]
            lines += ["", f"def test_{f}_{i}():", f"    assert {call} == {expected}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _safe_path(path: str) -> str:
    clean = path.strip().lstrip("./") if path.strip().startswith("./") else path.strip()
    parts = clean.split("/")
    if not clean or clean.startswith("/") or ".." in parts or any(p == "" for p in parts):
        raise ValueError(f"path {path!r} must be relative inside the repository (no '..')")
    return clean


def list_files(state: State) -> str:
    """List every file of the repository, one path per line."""
    return "\n".join(sorted(state["files"]))


def read_file(path: str, state: State) -> str:
    """Read a file of the repository.

    Args:
        path: the file's path relative to the repository root, e.g. mylib/text.py.
    """
    files = state["files"]
    key = _safe_path(path)
    if key not in files:
        return f"Error: no file {key!r}. Files: {', '.join(sorted(files))}"
    return str(files[key])


def write_file(path: str, content: str, state: State) -> str:
    """Create or overwrite a file of the repository with the full new content.

    Args:
        path: the file's path relative to the repository root.
        content: the complete new content of the file.
    """
    key = _safe_path(path)
    if len(content) > 100_000:
        raise ValueError("content is over 100000 characters")
    state["files"][key] = content
    return f"wrote {len(content)} characters to {key}"


class RepoFixEnv(ProceduralEnv, ToolEnv):
    """Fix an injected bug in a tiny Python repo with file tools; SWE-style hidden-test grading."""

    name = "repo_fix"
    description = "Fix an injected bug in a tiny Python repo with file tools; SWE-style hidden-test grading."
    public_info_keys = ("file_checks", "allowed_new_files")  # the prompt states them

    def __init__(
        self,
        level: int = 1,
        max_turns: int = 16,
        size: int = 1000,
        unsafe_no_sandbox: bool = False,
        test_timeout_s: float = 20.0,
        system_prompt: str | None = None,
        tool_variant: int | None = None,
        graders: str = "full",
        hard_tests: bool = True,
    ) -> None:
        self.level = int_arg("repo_fix", "level", level, 1, 3)
        if graders not in ("full", "tests"):
            raise EnvArgError(f"repo_fix: graders must be 'full' or 'tests', got {graders!r}")
        self.size = int_arg("repo_fix", "size", size, 1, 10**9)
        self.unsafe_no_sandbox = bool(unsafe_no_sandbox)
        self.test_timeout_s = float(test_timeout_s)
        unit = swe_grader("unit_tests", timeout_s=test_timeout_s, unsafe_no_sandbox=self.unsafe_no_sandbox)
        soft = []
        if graders == "full":

            def variant() -> Any:
                return getattr(self, "tool_variant", None)

            soft = [
                patch_grader(),
                rollout_grader(variant),
                behaviour_grader(variant),
                user_experience_grader(variant),
                task_specific_grader(),
            ]
        rubric = Rubric(
            [unit, *soft],
            gates={g.name: [unit.name] for g in soft} if hard_tests else {},
            penalty=hacking_penalty(protected_edits(), deleted_tests(), amount=1.0),
        )
        super().__init__(
            [list_files, read_file, write_file, Tool.from_function(self._run_tests, name="run_tests")],
            rubric=rubric,
            system_prompt=system_prompt or _SYSTEM,
            max_turns=int_arg("repo_fix", "max_turns", max_turns, 1, 1000),
            tool_variant=tool_variant,
        )

    def setup_state(self, task: Task) -> dict[str, Any]:
        return {"files": dict(task.info["repo_files"])}

    def _run_tests(self, state: State) -> str:
        """Run the visible tests in tests/ against the current files and report each failure."""
        results = run_tests_in_sandbox(
            state["files"], timeout_s=self.test_timeout_s, unsafe_no_sandbox=self.unsafe_no_sandbox
        )
        bad = {k: v for k, v in results.items() if v[0] != "passed"}
        lines = [f"{len(results) - len(bad)} passed, {len(bad)} failed"]
        lines += [f"FAILED {k}: {msg}" for k, (_, msg) in sorted(bad.items())]
        return "\n".join(lines)

    def generate(self, rng: random.Random) -> Task:
        modules = sorted(rng.sample(sorted(MODULES), 1 if self.level == 1 else 2))
        chosen = {m: sorted(rng.sample(MODULES[m], 3)) for m in modules}
        bug_module = rng.choice(modules)
        bug_func = rng.choice(chosen[bug_module])
        func = FUNCS[bug_func]
        bug_body = rng.choice(func.bugs)
        files = {"mylib/__init__.py": '"""mylib: small utilities."""\n', CHANGELOG: _CHANGELOG}
        hidden: dict[str, str] = {}
        fixed: dict[str, str] = {}
        failing: list[int] = []
        for m in modules:
            bodies = {bug_func: bug_body} if m == bug_module else {}
            files[f"mylib/{m}.py"] = module_source(list(chosen[m]), bodies)
            fixed[f"mylib/{m}.py"] = module_source(list(chosen[m]))
        buggy_src = files[f"mylib/{bug_module}.py"]
        for i, (call, expected) in enumerate(func.cases):
            try:
                got = evaluate_call(buggy_src, call)
            except Exception:
                got = _Raised()
            if got != evaluate_call("", expected):
                failing.append(i)
        if not failing:
            raise AssertionError(f"repo_fix: bug {bug_body!r} of {bug_func} breaks no test")
        for m in modules:
            cases = {f: [failing[0]] if f == bug_func else [0] for f in chosen[m]}
            files[f"tests/test_{m}.py"] = _test_file(chosen[m], m, cases)
            every = {f: list(range(len(FUNCS[f].cases))) for f in chosen[m]}
            hidden[f"tests/test_{m}.py"] = _test_file(chosen[m], m, every)
        f2p = [f"tests/test_{bug_module}.py::test_{bug_func}_{i}" for i in failing]
        p2p = [
            f"tests/test_{m}.py::test_{f}_{i}"
            for m in modules
            for f in chosen[m]
            for i in range(len(FUNCS[f].cases))
            if not (f == bug_func and i in failing)
        ]
        call, expected = func.cases[failing[0]]
        if self.level < 3:
            report = f"Bug report: `{call}` should return `{expected}` but it does not."
        else:
            report = f"Bug report: users say `{bug_func}` gives wrong results for some inputs."
        layout = "; ".join(f"mylib/{m}.py defines {', '.join(chosen[m])}" for m in modules)
        text = f"{report}\nThe repository: {layout}.\n{_STEPS}"
        info = {
            "repo_files": files,
            "hidden_tests": hidden,
            "fail_to_pass": f2p,
            "pass_to_pass": p2p,
            "fixed": fixed,
            "allowed_new_files": [],
            "file_checks": [
                {
                    "path": CHANGELOG,
                    "pattern": rf"^## Unreleased\n(?:.*\n)*?[-*] .*\b{bug_func}\b",
                    "why": f"no entry naming {bug_func} under '## Unreleased'",
                }
            ],
        }
        return Task(id="", prompt=(Message(role="user", content=text),), answer=None, info=info)

    @property
    def task_name(self) -> str:
        return f"repo_fix-l{self.level}"

    def oracle_policy(self) -> Policy:
        """Follows the user's steps: test, read, fix, test again, changelog, summary; notes each step."""

        def solve(task: Task, messages: Sequence[Message]) -> Reply:
            step = sum(1 for m in messages if m.role == "tool")
            path, func = fixed_function(task.info)
            log = task.info["repo_files"][CHANGELOG] + f"- Fixed `{func}` in {path}.\n"
            plan = [
                ("Running the tests first to see the failure.", "run_tests", {}),
                (f"Reading {path}, where the bug is.", "read_file", {"path": path}),
                (
                    f"Writing the fix of {func} to {path}.",
                    "write_file",
                    {"path": path, "content": task.info["fixed"][path]},
                ),
                ("Running the tests again to check the fix.", "run_tests", {}),
                ("Recording the fix in the changelog.", "write_file", {"path": CHANGELOG, "content": log}),
            ]
            if step < len(plan):
                note, name, args = plan[step]
                return note, [ToolCall(id=f"call-{step}", name=name, arguments=json.dumps(args))]
            return f"I fixed `{func}` in {path}; the tests pass and {CHANGELOG} has an entry for it."

        return self.task_oracle(solve, name="repo_fix-oracle")

    def null_policy(self) -> Policy:
        return ScriptedPolicy(lambda messages: "I cannot fix this.", name="repo_fix-null")


class _Raised:
    """Stands for 'the call raised' when classifying tests; equal to nothing."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


_CHANGELOG = "# Changelog\n\n## Unreleased\n\n"
_STEPS = (
    "Please work in these steps:\n"
    "1. Run the tests first to see the failure.\n"
    "2. Fix the bug in the package `mylib` (do not change the tests in `tests/`).\n"
    "3. Run the tests again to check your fix.\n"
    f"4. Add a line under `## Unreleased` in {CHANGELOG} naming the function you fixed.\n"
    "5. Finish with a short summary of what you changed.\n"
    "Say briefly what you are doing at each step."
)
_SYSTEM = (
    "You are fixing a bug in a small Python repository. Use the tools to list, read and write "
    "files and to run the visible tests. Write whole files. Do not modify the tests."
)


def bench_verdict(line: dict[str, Any]) -> bool:
    """verifier-bench: the line's grader accepts its episode, replayed in a fresh ``RepoFixEnv``."""
    env = RepoFixEnv(level=int(line.get("level", 1)), tool_variant=line.get("tool_variant"))
    return replay_verdict(env, line)


BENCH = GraderFamily("repo_fix", bench_verdict, suites=("repo_fix_graders.jsonl",), fields=SUITE_FIELDS)
RepoFixEnv.grader_family = BENCH  # verigym verifier-bench --grader repo_fix
