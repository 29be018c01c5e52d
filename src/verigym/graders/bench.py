"""verifier-bench: measure a grader family's false positives and false negatives on a labeled suite.

A suite is a JSONL file; each line has an ``id`` and a label, either ``label: bool`` (True: the
grader should accept) or ``expect: "pass" | "fail"``, plus the family's own fields (math:
``gold``, ``pred``, optional ``mode``). A family is a ``families.GraderFamily`` that its own module
declares (``BENCH``): its verdict ``(line) -> bool`` (True = accept), raising on an infrastructure
error, its required keys, an optional line check (raises ``ValueError`` for a malformed line,
reported with file:line before anything runs) and an optional warm-up run once before timing.
``load_family`` finds it by name (``families.find_family``); this module names none.

Rates: FP rate = wrong answers accepted / all wrong answers; FN rate = right answers not accepted
/ all right answers. An errored check never counts in the grader's favour: it is reported in
``errors`` and counts as "not accepted" (a right answer that errored is a false negative).
"""

from __future__ import annotations

import functools
import inspect
import json
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verigym.graders.families import GraderFamily, UnknownFamilyError, find_family, grader_families

__all__ = [
    "FAMILIES",  # noqa: F822 (module __getattr__; kept until verigym 0.3)
    "BenchError",
    "BenchResult",
    "LineOutcome",
    "load_family",
    "load_suite",
    "run_bench",
]


class BenchError(ValueError):
    """Bad input: an unknown family, a family without ``bench_verdict``, a malformed suite."""


Family = GraderFamily  # the name run_bench's signature has always used


def load_family(name: str) -> Family:
    """The grader family ``name`` (a family's name, or a dotted module path that declares one)."""
    try:
        return find_family(name)
    except UnknownFamilyError as exc:
        raise BenchError(str(exc)) from None


def __getattr__(name: str) -> Any:
    if name == "FAMILIES":  # kept until verigym 0.3: families declare themselves (graders.families)
        return {family.name: family.source for family in grader_families().values()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _label(obj: dict[str, Any], where: str) -> bool:
    if "label" in obj:
        if not isinstance(obj["label"], bool):
            raise BenchError(f"{where}: field 'label' must be true or false, got {obj['label']!r}")
        return bool(obj["label"])
    if "expect" in obj:
        if obj["expect"] not in ("pass", "fail"):
            raise BenchError(f'{where}: field \'expect\' must be "pass" or "fail", got {obj["expect"]!r}')
        return bool(obj["expect"] == "pass")
    raise BenchError(f"{where}: missing field 'label' (true/false) or 'expect' (\"pass\"/\"fail\")")


def load_suite(
    path: str | Path,
    fields: tuple[str, ...] = (),
    check_line: Callable[[dict[str, Any]], None] | None = None,
) -> list[tuple[dict[str, Any], bool]]:
    """Read and validate a suite: (line, label) pairs. Raises ``BenchError`` naming file:line.

    ``check_line`` (a family's ``check_suite_line``) raises ``ValueError`` for a malformed line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BenchError(f"{p}: no such suite file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"{p}: cannot read ({exc})") from None
    out: list[tuple[dict[str, Any], bool]] = []
    seen: set[str] = set()
    for no, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"{p}:{no}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BenchError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise BenchError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        if not isinstance(obj.get("id"), str | int) or isinstance(obj.get("id"), bool):
            raise BenchError(f"{where}: missing field 'id' (a string)")
        if str(obj["id"]) in seen:
            raise BenchError(f"{where}: duplicate id {obj['id']!r}")
        seen.add(str(obj["id"]))
        for f in fields:
            if f not in obj:
                raise BenchError(f"{where}: missing field {f!r}")
        if check_line is not None:
            try:
                check_line(obj)
            except ValueError as exc:
                raise BenchError(f"{where}: {exc}") from None
        out.append((obj, _label(obj, where)))
    if not out:
        raise BenchError(f"{p}: the suite is empty")
    return out


@dataclass(frozen=True)
class LineOutcome:
    id: str
    label: bool
    accepted: bool
    error: str | None = None

    @property
    def correct(self) -> bool:
        return self.error is None and self.accepted == self.label


@dataclass
class BenchResult:
    """What one suite run measured."""

    family: str
    suite: str
    outcomes: list[LineOutcome] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def n(self) -> int:
        return len(self.outcomes)

    @property
    def positives(self) -> int:
        return sum(o.label for o in self.outcomes)

    @property
    def negatives(self) -> int:
        return self.n - self.positives

    @property
    def false_positives(self) -> list[str]:
        return [o.id for o in self.outcomes if not o.label and o.accepted and o.error is None]

    @property
    def false_negatives(self) -> list[str]:
        return [o.id for o in self.outcomes if o.label and (not o.accepted or o.error is not None)]

    @property
    def errors(self) -> list[str]:
        return [o.id for o in self.outcomes if o.error is not None]

    @property
    def fp_rate(self) -> float:
        return len(self.false_positives) / self.negatives if self.negatives else 0.0

    @property
    def fn_rate(self) -> float:
        return len(self.false_negatives) / self.positives if self.positives else 0.0

    @property
    def accuracy(self) -> float:
        return sum(o.correct for o in self.outcomes) / self.n if self.n else 0.0

    @property
    def checks_per_s(self) -> float:
        return self.n / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def misses(self) -> list[str]:
        return [o.id for o in self.outcomes if not o.correct]

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "fp_rate": round(self.fp_rate, 6),
            "fn_rate": round(self.fn_rate, 6),
            "accuracy": round(self.accuracy, 6),
            "errors": len(self.errors),
            "checks_per_s": round(self.checks_per_s, 3),
            "misses": self.misses,
            "family": self.family,
            "suite": self.suite,
            "positives": self.positives,
            "negatives": self.negatives,
            "false_positives": self.false_positives,
            "false_negatives": self.false_negatives,
            "error_ids": self.errors,
        }


def run_bench(
    family: str | Family,
    suite: str | Path,
    *,
    mode: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    jobs: int = 1,
) -> BenchResult:
    """Run ``family``'s ``bench_verdict`` over every line of ``suite``.

    ``mode`` is given to lines that do not set their own ``mode``. ``jobs`` > 1 checks that many
    lines at once (checks/s is then the parallel throughput): in that many processes when the
    family is given by name (a grader's in-process fast path holds the GIL, so threads would not
    scale), each warmed up before the clock starts (so a script that calls it with jobs > 1 needs
    the ``if __name__ == "__main__":`` guard of spawned processes); in threads for a ``Family``
    object.
    ``progress(done, total)`` is called after each line. Raises ``BenchError`` for bad input.
    """
    if jobs < 1:
        raise BenchError(f"jobs must be at least 1, got {jobs}")
    fam = family if isinstance(family, GraderFamily) else load_family(family)
    lines = load_suite(suite, fam.fields, fam.check_line)
    in_processes = jobs > 1 and isinstance(family, str)
    if not in_processes:
        _warm(fam, jobs)
    if mode is not None:
        lines = [({**line, "mode": mode} if "mode" not in line else line, label) for line, label in lines]

    result = BenchResult(fam.name, str(suite))

    def collect(outcomes: Iterable[LineOutcome]) -> None:
        for i, outcome in enumerate(outcomes, 1):
            result.outcomes.append(outcome)
            if progress is not None:
                progress(i, len(lines))

    if in_processes:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process that runs threads
        ready = ctx.Barrier(jobs + 1)
        source = fam.source or str(family)  # the module that declares it: found again in the child
        with ctx.Pool(jobs, initializer=_start_child, initargs=(source, ready)) as children:
            try:  # every child has imported and warmed its family: the clock starts now
                ready.wait(timeout=_CHILD_START_S)
            except threading.BrokenBarrierError:
                raise BenchError(f"{jobs} bench processes did not start within {_CHILD_START_S:g}s") from None
            start = time.perf_counter()
            chunk = max(1, len(lines) // (16 * jobs))  # few round trips, still balanced at the end
            collect(children.imap(_child_line, lines, chunksize=chunk))
            result.wall_s = time.perf_counter() - start
        return result
    start = time.perf_counter()
    if jobs == 1:
        collect(_line(fam, item) for item in lines)
    else:
        with ThreadPoolExecutor(jobs) as pool:
            collect(pool.map(functools.partial(_line, fam), lines))
    result.wall_s = time.perf_counter() - start
    return result


def _warm(fam: Family, jobs: int) -> None:
    if fam.warmup is not None:
        if inspect.signature(fam.warmup).parameters:
            fam.warmup(jobs)  # e.g. start one worker process per job
        else:
            fam.warmup()


def _line(fam: Family, item: tuple[dict[str, Any], bool]) -> LineOutcome:
    line, label = item
    try:
        accepted, error = bool(fam.verdict(line)), None
    except Exception as exc:  # an infrastructure error: counted, never a verdict
        accepted, error = False, f"{type(exc).__name__}: {exc}"
    return LineOutcome(str(line["id"]), label, accepted, error)


_CHILD_START_S = 300.0
_CHILD: dict[str, Any] = {}  # a bench child's family, or the error its start-up raised


def _start_child(name: str, ready: Any) -> None:
    try:
        fam = load_family(name)
        _warm(fam, 1)
        _CHILD["family"] = fam
    except Exception as exc:  # raised again on the first line, so the caller sees it as in one process
        _CHILD["error"] = exc
    finally:
        ready.wait()


def _child_line(item: tuple[dict[str, Any], bool]) -> LineOutcome:
    if "error" in _CHILD:
        raise _CHILD["error"]
    return _line(_CHILD["family"], item)
