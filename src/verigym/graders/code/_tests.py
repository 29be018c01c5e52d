"""Hidden-test evaluation for function problems, in the grader's process (never in the sandbox).

The tests run as plain Python, in order, with each entry point (and HumanEval's ``candidate``)
bound to a proxy that calls the sandboxed candidate and returns its result rebuilt as plain data.
Two shapes:

- **top-level asserts** (MBPP, the built-in ``code`` env): every top-level statement runs in
  order; each top-level ``assert`` is one case (a failed one does not stop the next). A statement
  that raises before the candidate was ever called means the tests are broken (an error); after a
  call, the remaining cases fail.
- **``def check(candidate)``** (HumanEval): the module runs verbatim (helpers, constants,
  ``METADATA``; a top-level ``check(...)`` call is the harness's and is skipped), then
  ``check(proxy)`` is called once. When the body of ``check`` is only asserts, each is reported
  as a case, but they share one candidate process as in the official harness (the candidate's
  module state carries over, and the per-case time limit covers the whole check); otherwise
  (loops, helpers, locals) the call is one case, passed when it returns.

Where the boundary could change what the tests mean, it does not:

- a candidate's exception reaches the tests as its nearest built-in class (``except ValueError``
  works), except control-flow ones: ``StopIteration``/``StopAsyncIteration`` become
  :class:`CandidateStopIteration` (a ``RuntimeError``, as PEP 479 does for generators) so they
  cannot silently end an ``all(map(candidate, xs))`` in the grader; ``SystemExit``,
  ``KeyboardInterrupt`` and ``GeneratorExit`` fail the case.
- in-place changes the candidate makes to a list/dict/set/bytearray argument become visible to the
  tests at the end of the *statement* that made the call (a flush is inserted after every statement
  of the tests), never inside it: ``assert sort_copy(xs) == sorted(xs)`` compares with the
  original ``xs`` even when the candidate emptied it.
"""

from __future__ import annotations

import ast
import builtins
import copy
import marshal
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType
from typing import Any, TypeVar

from verigym.graders.code._codec import CodecError, decode, encode

__all__ = ["CandidateFailure", "CandidateStopIteration", "CaseResult", "TaskTestsError", "evaluate_asserts"]

FILENAME = "<hidden tests>"
_FLUSH = "__verigym_flush__"
_CONTROL = ("StopIteration", "StopAsyncIteration")
_Node = TypeVar("_Node", bound=ast.AST)


@dataclass
class CaseResult:
    """One case's verdict: its label (``line N: <assert>`` or ``check(f)``), passed, and why not."""

    name: str
    passed: bool
    reason: str = ""


class TaskTestsError(ValueError):
    """The hidden tests themselves are broken (the task's fault): an errored grade, not a fail."""


class CandidateFailure(BaseException):
    """The candidate crashed, timed out or broke its runner during a call.

    A ``BaseException`` so that a test's own ``except Exception`` cannot swallow it.
    """

    def __init__(self, reason: str, error: str = "", msg: str = "") -> None:
        super().__init__(reason)
        self.reason, self.error, self.msg = reason, error, msg


class CandidateStopIteration(RuntimeError):
    """The candidate raised ``StopIteration``: a plain error here, so no iterator ends early."""


class _State:
    def __init__(self) -> None:
        self.calls = 0
        self.pending: list[tuple[Any, Any]] = []

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        for arg, new in pending:
            _copy_into(arg, new)


def _pack(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Arguments as marshal data (fast, trusted direction) or, for other types, as tokens."""
    try:
        return {"blob": marshal.dumps((args, kwargs))}
    except ValueError:
        pass
    try:
        return {"tokens": encode([list(args), kwargs])}
    except CodecError as exc:
        raise TaskTestsError(f"the tests pass an argument that is not plain data: {exc}") from None


class _Proxy:
    def __init__(self, name: str, call: Callable[[dict[str, Any]], Any], state: _State) -> None:
        self._name, self._call, self._state = name, call, state
        self.__name__ = self.__qualname__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        payload = {"name": self._name, **_pack(args, kwargs)}
        self._state.calls += 1
        try:
            reply = self._call(payload)
        except CandidateFailure as failure:
            raise _as_exception(failure) from None
        try:
            value = decode(reply.get("value"))
            changed = {k: decode(v) for k, v in dict(reply.get("changed") or {}).items()}
        except (CodecError, ValueError, TypeError) as exc:
            raise CandidateFailure(f"unsupported result: {exc}") from None
        for key, new in changed.items():
            arg = args[int(key)] if key.isdigit() and int(key) < len(args) else kwargs.get(key)
            if arg is not None:
                self._state.pending.append((arg, new))
        return value


def _as_exception(failure: CandidateFailure) -> BaseException:
    """The candidate's exception as the tests should see it (see the module docstring)."""
    name = failure.error
    if name in _CONTROL:
        return CandidateStopIteration(f"the candidate raised {name}")
    exc_type = getattr(builtins, name, None) if name else None
    if isinstance(exc_type, type) and issubclass(exc_type, Exception) and exc_type is not Exception:
        try:
            return exc_type(failure.msg)  # lets tests expecting ValueError work
        except Exception:
            return failure
    return failure


def _copy_into(arg: Any, new: Any) -> None:
    """Mirror an in-place change the candidate made to a mutable argument."""
    if type(arg) in (list, bytearray) and type(new) is type(arg):
        arg[:] = new
    elif type(arg) in (dict, set) and type(new) is type(arg):
        arg.clear()
        arg.update(new)


def _flush_after(stmt: ast.stmt) -> ast.Expr:
    where = {"lineno": stmt.lineno, "col_offset": stmt.col_offset}
    where |= {"end_lineno": stmt.end_lineno or stmt.lineno, "end_col_offset": stmt.end_col_offset or 0}
    return ast.Expr(ast.Call(ast.Name(_FLUSH, ast.Load(), **where), [], [], **where), **where)


def _with_flushes(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """``stmts`` with ``__verigym_flush__()`` after every statement of every block. The tree given
    is not changed: compound statements are shallow copies with new statement lists (a deep copy of
    the tests' tree cost more than running them)."""
    out: list[ast.stmt] = []
    for stmt in stmts:
        out.append(_blocks_flushed(stmt))
        if not (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"):
            out.append(_flush_after(stmt))
    return out


def _blocks_flushed(node: _Node) -> _Node:
    changed: dict[str, list[Any]] = {}
    for name, value in ast.iter_fields(node):
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            changed[name] = _with_flushes(value)
        elif isinstance(value, list) and value and isinstance(value[0], ast.excepthandler | ast.match_case):
            changed[name] = [_blocks_flushed(v) for v in value]
    if not changed:
        return node
    new = copy.copy(node)
    for name, value in changed.items():
        setattr(new, name, value)
    return new


# compiled tests by (source, statement spans): the k samples of a task share their tests' code
_CODE: dict[tuple[str, tuple[tuple[int, int, int, int], ...]], CodeType] = {}
_CODE_MAX = 4096


def _compile(stmts: list[ast.stmt], source: str) -> CodeType:
    """``stmts`` (parsed from ``source``) with flushes, compiled; cached by their place in ``source``."""
    spans = tuple((s.lineno, s.col_offset, s.end_lineno or 0, s.end_col_offset or 0) for s in stmts)
    key = (source, spans)
    code = _CODE.get(key)
    if code is None:
        module = ast.Module(body=_with_flushes(stmts), type_ignores=[])
        code = compile(module, FILENAME, "exec", dont_inherit=True, optimize=0)
        if len(_CODE) >= _CODE_MAX:
            _CODE.clear()
        _CODE[key] = code
    return code


def _imports_entry(stmt: ast.stmt, entries: list[str]) -> bool:
    return isinstance(stmt, ast.ImportFrom) and any(a.name in entries for a in stmt.names)


def _calls_check(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id == "check"
    )


def _where(exc: BaseException, lines: list[str]) -> str:
    """``line N: <source>`` of the innermost frame of the tests in ``exc``'s traceback."""
    tb, lineno = exc.__traceback__, 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            lineno = tb.tb_lineno
        tb = tb.tb_next
    if not 0 < lineno <= len(lines):
        return ""
    return f"line {lineno}: {lines[lineno - 1].strip()[:100]}: "


def _reason(exc: BaseException) -> str:
    if isinstance(exc, CandidateFailure):
        return exc.reason
    if isinstance(exc, AssertionError):
        return "assertion failed" + (f" ({exc})" if str(exc) else "")
    return f"{type(exc).__name__}: {exc}"[:300]


def evaluate_asserts(
    tests: str,
    entries: list[str],
    call: Callable[[dict[str, Any]], Any],
    *,
    stop_on_fail: bool = False,
    end_case: Callable[[], None] = lambda: None,
    prelude: str = "",
) -> list[CaseResult]:
    """Run ``tests`` with each entry point bound to a proxy over ``call`` (see the module docstring).

    ``end_case()`` is called after each case (the candidate's state is fresh for the next one);
    ``prelude`` is trusted code run first in the tests' namespace (e.g. a HumanEval prompt's helpers).
    """
    try:
        tree = ast.parse(tests)
        pre = ast.parse(prelude) if prelude else None
    except SyntaxError as exc:
        raise TaskTestsError(f"the tests do not parse: {exc}") from None
    body = [s for s in tree.body if not _imports_entry(s, entries)]
    lines = tests.splitlines()
    state = _State()
    ns: dict[str, Any] = {"__builtins__": builtins, "__name__": "__hidden_tests__", _FLUSH: state.flush}
    proxies = {e: _Proxy(e, call, state) for e in entries}
    if pre is not None:
        try:
            exec(_compile(pre.body, prelude), ns)
        except Exception as exc:
            raise TaskTestsError(f"the tests' prelude raised {type(exc).__name__}: {exc}") from None
    ns.update(proxies)
    if any(isinstance(s, ast.Assert) for s in body):
        return _top_level(body, ns, state, tests, stop_on_fail, end_case)
    checks = [s for s in body if isinstance(s, ast.FunctionDef) and s.name == "check" and s.args.args]
    if not checks:
        raise TaskTestsError("the tests contain no assert statements (top-level or in def check(candidate))")
    setup = [s for s in body if not _calls_check(s)]
    try:
        exec(_compile(setup, tests), ns)
    except Exception as exc:
        raise TaskTestsError(f"the tests' setup code raised {type(exc).__name__}: {exc}") from None
    finally:
        end_case()
    ns.update(proxies)
    check, proxy = ns.get("check"), proxies[entries[0]]
    if not callable(check):
        raise TaskTestsError("the tests define check but it is not callable")
    simple = [
        s for s in checks[-1].body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    if simple and all(isinstance(s, ast.Assert) for s in simple):
        # each assert of check is a case, but check(candidate) is one call in the official harness:
        # the candidate's state carries over between its asserts (one forked child, not one each)
        ns[checks[-1].args.args[0].arg] = proxy
        try:
            return _top_level(simple, ns, state, tests, stop_on_fail, lambda: None)
        finally:
            end_case()
    label = f"check({entries[0]})"
    try:
        check(proxy)
        state.flush()
        return [CaseResult(label, True)]
    except TaskTestsError:
        raise
    except (Exception, CandidateFailure) as exc:
        return [CaseResult(label, False, (_where(exc, lines) + _reason(exc))[:400])]
    finally:
        end_case()


def _top_level(
    body: list[ast.stmt],
    ns: dict[str, Any],
    state: _State,
    source: str,
    stop_on_fail: bool,
    end_case: Callable[[], None],
) -> list[CaseResult]:
    results: list[CaseResult] = []
    broken: str | None = None
    for stmt in body:
        is_case = isinstance(stmt, ast.Assert)
        label = f"line {stmt.lineno}: {ast.unparse(stmt.test)[:80]}" if isinstance(stmt, ast.Assert) else ""
        if broken is not None or (stop_on_fail and results and not results[-1].passed):
            if is_case:
                why = broken or "not run (an earlier case failed)"
                results.append(CaseResult(label, False, why))
            continue
        try:
            exec(_compile([stmt], source), ns)
            if is_case:
                results.append(CaseResult(label, True))
        except TaskTestsError:
            raise
        except (Exception, CandidateFailure) as exc:
            if is_case:
                results.append(CaseResult(label, False, _reason(exc)))
            elif state.calls == 0 and not isinstance(exc, CandidateFailure):
                raise TaskTestsError(
                    f"the tests' line {stmt.lineno} raised {type(exc).__name__}: {exc}"
                ) from None
            else:
                broken = f"an earlier statement failed on the candidate: {_reason(exc)}"[:300]
        finally:
            state.flush()
            end_case()
    return results
