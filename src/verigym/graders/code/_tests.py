"""Hidden-test evaluation for function problems, in the grader's process (never in the sandbox).

The tests' top-level ``assert`` statements are the cases (or the asserts inside a HumanEval-style
``def check(candidate)``); everything else is setup run once. The entry point (and ``candidate``)
is bound to a proxy that calls the sandboxed candidate and returns its result rebuilt as plain data.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from verigym.graders.code._codec import CodecError, decode, encode

__all__ = ["CandidateFailure", "CaseResult", "TaskTestsError", "evaluate_asserts"]


@dataclass
class CaseResult:
    name: str
    passed: bool
    reason: str = ""


class TaskTestsError(ValueError):
    """The hidden tests themselves are broken (the task's fault): an errored grade, not a fail."""


class CandidateFailure(BaseException):
    """The candidate crashed, timed out or broke its runner during a call.

    A ``BaseException`` so that a test's own ``except Exception`` cannot swallow it.
    """

    def __init__(self, reason: str, error: str = "") -> None:
        super().__init__(reason)
        self.reason, self.error = reason, error


class _Counter:
    calls = 0


class _Proxy:
    def __init__(self, name: str, call: Callable[[dict[str, Any]], Any], counter: _Counter) -> None:
        self._name, self._call, self._counter = name, call, counter

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            payload = {"name": self._name, "args": encode(list(args)), "kwargs": encode(dict(kwargs))}
        except CodecError as exc:
            raise TaskTestsError(f"the tests pass an argument that is not plain data: {exc}") from None
        self._counter.calls += 1
        try:
            reply = self._call(payload)
        except CandidateFailure as failure:
            name, _, msg = failure.error.partition(": ")
            exc_type = getattr(builtins, name, None) if failure.error else None
            if isinstance(exc_type, type) and issubclass(exc_type, Exception) and exc_type is not Exception:
                raise exc_type(msg) from None  # lets tests that expect e.g. ValueError work
            raise
        try:
            value = decode(reply.get("value"))
            after = decode(reply["args_after"]) if "args_after" in reply else None
        except (CodecError, ValueError, RecursionError) as exc:
            raise CandidateFailure(f"unsupported result: {exc}") from None
        if isinstance(after, list) and len(after) == len(args):
            for arg, new in zip(args, after, strict=True):
                _copy_into(arg, new)
        return value


def _copy_into(arg: Any, new: Any) -> None:
    """Mirror an in-place change the candidate made to a mutable argument."""
    if type(arg) is list and type(new) is list:
        arg[:] = new
    elif type(arg) in (dict, set) and type(new) is type(arg):
        arg.clear()
        arg.update(new)


def _split(tests: str, entries: list[str]) -> tuple[list[ast.stmt], list[ast.Assert], dict[str, str]]:
    try:
        tree = ast.parse(tests)
    except SyntaxError as exc:
        raise TaskTestsError(f"the tests do not parse: {exc}") from None
    body = [s for s in tree.body if not _imports_entry(s, entries)]
    names = {e: e for e in entries}
    asserts = [s for s in body if isinstance(s, ast.Assert)]
    if asserts:
        return [s for s in body if not isinstance(s, ast.Assert)], asserts, names
    checks = [s for s in body if isinstance(s, ast.FunctionDef) and s.name == "check" and s.args.args]
    if not checks:
        raise TaskTestsError("the tests contain no assert statements (top-level or in def check(candidate))")
    check = checks[-1]
    names[check.args.args[0].arg] = entries[0]
    setup = [s for s in body if s is not check and not _calls_check(s)]
    setup += [s for s in check.body if not isinstance(s, ast.Assert)]
    asserts = [s for s in check.body if isinstance(s, ast.Assert)]
    if not asserts:
        raise TaskTestsError("def check(candidate) contains no top-level assert statements")
    return setup, asserts, names


def _imports_entry(stmt: ast.stmt, entries: list[str]) -> bool:
    return isinstance(stmt, ast.ImportFrom) and any(a.name in entries for a in stmt.names)


def _calls_check(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id == "check"
    )


def _run(stmts: list[ast.stmt], ns: dict[str, Any]) -> None:
    module = ast.Module(body=stmts, type_ignores=[])
    exec(compile(module, "<hidden tests>", "exec", dont_inherit=True, optimize=0), ns)


def evaluate_asserts(
    tests: str, entries: list[str], call: Callable[[dict[str, Any]], Any], *, stop_on_fail: bool = False
) -> list[CaseResult]:
    """Evaluate every assert of ``tests`` with each entry point bound to a proxy over ``call``."""
    setup, asserts, names = _split(tests, entries)
    proxy = _Counter()
    proxies = {alias: _Proxy(entry, call, proxy) for alias, entry in names.items()}
    ns: dict[str, Any] = {"__builtins__": builtins, "__name__": "__hidden_tests__"}
    ns.update(proxies)
    labels = [f"line {a.lineno}: {ast.unparse(a.test)[:80]}" for a in asserts]
    try:
        _run(setup, ns)
    except CandidateFailure as exc:
        return [CaseResult(label, False, exc.reason) for label in labels]
    except TaskTestsError:
        raise
    except Exception as exc:
        if proxy.calls == 0:
            raise TaskTestsError(f"the tests' setup code raised {type(exc).__name__}: {exc}") from None
        return [
            CaseResult(label, False, f"setup failed on the candidate's result: {exc!r}"[:300])
            for label in labels
        ]
    ns.update(proxies)
    results: list[CaseResult] = []
    for stmt, label in zip(asserts, labels, strict=True):
        if stop_on_fail and results and not results[-1].passed:
            results.append(CaseResult(label, False, "not run (an earlier case failed)"))
            continue
        try:
            _run([stmt], ns)
            results.append(CaseResult(label, True))
        except AssertionError:
            results.append(CaseResult(label, False, "assertion failed"))
        except CandidateFailure as exc:
            results.append(CaseResult(label, False, exc.reason))
        except TaskTestsError:
            raise
        except Exception as exc:
            results.append(CaseResult(label, False, f"{type(exc).__name__}: {exc}"[:300]))
    return results
