"""The sample table's queries over a ``ResultsIndex``: filters, sorting, paging; and two runs side by side.

Every filter is a vectorised test on the index's columns (the free text is one block scan of the file),
so a page of a 100,000-sample run costs milliseconds. The comparison pairs the tasks of two runs as
``verigym compare`` does (each task's mean reward over its scored samples, errored samples left out)
and takes its paired bootstrap CI from ``eval.compare.paired_bootstrap``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from verigym.eval.compare import paired_bootstrap
from verigym.view._index import ResultsIndex

__all__ = ["Query", "QueryError", "compare_indexes", "facets", "run_query"]

SORTS = ("row", "task_id", "sample_index", "reward", "completion_tokens", "prompt_tokens", "wall_s", "error")
PAGE_MAX = 500


class QueryError(ValueError):
    """A bad query parameter (names it and what was expected)."""


@dataclass
class Query:
    """One request of the sample table (every field optional)."""

    reward_min: float | None = None
    reward_max: float | None = None
    grader: str | None = None
    grader_min: float | None = None
    grader_max: float | None = None
    error: str | None = None  # "none", "any", or an error kind
    stop: str | None = None
    task: str | None = None  # a substring of the task id
    tokens_min: int | None = None
    tokens_max: int | None = None
    wall_min: float | None = None
    wall_max: float | None = None
    text: str | None = None
    sort: str = "row"
    desc: bool = False
    offset: int = 0
    limit: int = 50
    all_lines: bool = False  # include lines a later line of the same sample superseded

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> Query:
        """A query from URL parameters; a bad value raises ``QueryError`` naming it."""
        q = cls()
        floats = ("reward_min", "reward_max", "grader_min", "grader_max", "wall_min", "wall_max")
        ints = ("tokens_min", "tokens_max", "offset", "limit")
        for name, raw in params.items():
            if raw == "":
                continue
            if name in floats:
                try:
                    value: Any = float(raw)
                except ValueError:
                    raise QueryError(f"{name}: expected a number, got {raw!r}") from None
                if not math.isfinite(value):
                    raise QueryError(f"{name}: expected a finite number, got {raw!r}")
            elif name in ints:
                try:
                    value = int(raw)
                except ValueError:
                    raise QueryError(f"{name}: expected a whole number, got {raw!r}") from None
                if value < 0:
                    raise QueryError(f"{name}: expected a number >= 0, got {raw!r}")
            elif name in ("desc", "all_lines"):
                value = raw.lower() in ("1", "true", "yes")
            elif name in ("grader", "error", "stop", "task", "text", "sort"):
                value = raw
            else:
                raise QueryError(f"unknown query parameter {name!r}")
            setattr(q, name, value)
        if q.limit == 0 or q.limit > PAGE_MAX:
            raise QueryError(f"limit: expected 1..{PAGE_MAX}, got {q.limit}")
        if q.sort not in SORTS and not q.sort.startswith("grade:"):
            raise QueryError(f"sort: expected one of {', '.join(SORTS)} or grade:NAME, got {q.sort!r}")
        return q


def _between(values: np.ndarray, lo: float | None, hi: float | None) -> np.ndarray:
    mask = np.ones(len(values), dtype=bool)
    if lo is not None:
        mask &= values >= lo
    if hi is not None:
        mask &= values <= hi
    return mask


def _mask(index: ResultsIndex, q: Query) -> np.ndarray:
    n = len(index)
    mask = np.ones(n, dtype=bool) if q.all_lines else index.column("live").astype(bool)
    if q.reward_min is not None or q.reward_max is not None:
        mask &= _between(index.column("reward"), q.reward_min, q.reward_max)  # NaN (errored) never passes
    if q.grader:
        if q.grader not in index.grades:
            raise QueryError(
                f"grader: no grader {q.grader!r} in this run (it has {', '.join(sorted(index.grades)) or 'none'})"
            )
        mask &= _between(index.column("grade:" + q.grader), q.grader_min, q.grader_max)
    if q.error:
        codes = index.column("error")
        if q.error == "none":
            mask &= codes < 0
        elif q.error == "any":
            mask &= codes >= 0
        else:
            mask &= codes == index.errors.codes.get(q.error, -2)
    if q.stop:
        mask &= index.column("stop") == index.stops.codes.get(q.stop, -2)
    if q.task:
        needle = q.task.lower()
        wanted = np.array([needle in t.lower() for t in index.tasks.names] or [False])
        mask &= wanted[index.column("task")]
    if q.tokens_min is not None or q.tokens_max is not None:
        mask &= _between(index.column("completion_tokens"), q.tokens_min, q.tokens_max)
    if q.wall_min is not None or q.wall_max is not None:
        mask &= _between(index.column("wall"), q.wall_min, q.wall_max)
    if q.text:
        mask &= index.search(q.text)
    return mask


def _sort_key(index: ResultsIndex, sort: str) -> np.ndarray:
    if sort == "task_id":
        key: np.ndarray = index.task_rank()[index.column("task")].astype(np.int64) * 2**24 + index.column(
            "sample"
        )
        return key
    if sort.startswith("grade:"):
        if sort[6:] not in index.grades:
            raise QueryError(f"sort: no grader {sort[6:]!r} in this run")
        return index.column(sort)
    column = {"sample_index": "sample", "wall_s": "wall", "row": "offset"}.get(sort, sort)
    return index.column(column)


def run_query(index: ResultsIndex, q: Query) -> dict[str, Any]:
    """The page of rows ``q`` asks for, with the number that matched."""
    with index.lock:
        status = {"indexing": index.building, "indexed": index.done / index.size if index.size else 1.0}
        if not len(index):
            return {"total": 0, "matched": 0, "rows": [], "offset": 0, **status}
        mask = _mask(index, q)
        rows = np.flatnonzero(mask)
        if q.sort != "row":
            key = _sort_key(index, q.sort)[rows].astype(np.float64)
            key = np.where(np.isnan(key), -np.inf if q.desc else np.inf, key)  # NaN (errored) last
            order = np.argsort(-key if q.desc else key, kind="stable")
            rows = rows[order]
        elif q.desc:
            rows = rows[::-1]
        page = rows[q.offset : q.offset + q.limit]
        return {
            "total": int(index.column("live").sum()),
            "matched": len(rows),
            "offset": q.offset,
            "rows": [index.row(int(r)) for r in page],
            **status,
        }


def facets(index: ResultsIndex) -> dict[str, Any]:
    """What the filters offer: graders, error kinds, stop reasons."""
    with index.lock:
        return {
            "graders": sorted(index.grades),
            "errors": list(index.errors.names),
            "stops": list(index.stops.names),
        }


def _task_means(index: ResultsIndex, threshold: float) -> dict[str, tuple[float, float, int, int]]:
    """Per task: (mean reward, share of scored samples at the threshold, scored, errored)."""
    live = index.column("live").astype(bool)
    task = index.column("task")[live]
    reward = index.column("reward")[live]
    scored = ~np.isnan(reward)
    n = len(index.tasks.names)
    count = np.bincount(task[scored], minlength=n)
    total = np.bincount(task[scored], weights=reward[scored], minlength=n)
    passed = np.bincount(task[scored], weights=(reward[scored] >= threshold).astype(float), minlength=n)
    errored = np.bincount(task[~scored], minlength=n)
    out = {}
    for code in np.flatnonzero((count > 0) | (errored > 0)):
        c = int(count[code])
        out[index.tasks.names[code]] = (
            float(total[code] / c) if c else math.nan,
            float(passed[code] / c) if c else math.nan,
            c,
            int(errored[code]),
        )
    return out


def compare_indexes(
    a: ResultsIndex, b: ResultsIndex, *, threshold: float = 1.0, show: str = "all", seed: int = 0
) -> dict[str, Any]:
    """Two runs aligned per task: each side's mean reward, the delta and the paired bootstrap CI.

    A task *passes* in a run when at least half of its scored samples reach ``threshold`` (with one
    sample a task, when it passed); ``show`` keeps ``all`` tasks, those whose verdict ``changed``,
    ``pass_to_fail`` or ``fail_to_pass``.
    """
    if show not in ("all", "changed", "pass_to_fail", "fail_to_pass"):
        raise QueryError(f"show: expected all, changed, pass_to_fail or fail_to_pass, got {show!r}")
    with a.lock, b.lock:
        ma, mb = _task_means(a, threshold), _task_means(b, threshold)
    # in run A's order, as ``verigym compare`` pairs them (the bootstrap's resamples follow the order)
    paired = [t for t in ma if t in mb and not math.isnan(ma[t][0]) and not math.isnan(mb[t][0])]
    stats: dict[str, Any] = {"paired_tasks": len(paired), "delta": None, "ci95": None, "p_b_not_better": None}
    if paired:
        delta, ci, p = paired_bootstrap([ma[t][0] for t in paired], [mb[t][0] for t in paired], seed=seed)
        stats.update(
            delta=delta,
            ci95=list(ci),
            p_b_not_better=p,
            mean_a=float(np.mean([ma[t][0] for t in paired])),
            mean_b=float(np.mean([mb[t][0] for t in paired])),
        )
    rows = []
    counts = {"pass_to_fail": 0, "fail_to_pass": 0}
    for t in paired:
        pa, pb = ma[t][1] >= 0.5, mb[t][1] >= 0.5
        change = "pass_to_fail" if pa and not pb else "fail_to_pass" if pb and not pa else ""
        if change:
            counts[change] += 1
        if show == "all" or (show == "changed" and change) or show == change:
            rows.append(
                {
                    "task_id": t,
                    "a": ma[t][0],
                    "b": mb[t][0],
                    "delta": mb[t][0] - ma[t][0],
                    "change": change,
                    "scored_a": ma[t][2],
                    "scored_b": mb[t][2],
                }
            )
    stats.update(
        counts,
        only_a=sum(1 for t in ma if t not in mb),
        only_b=sum(1 for t in mb if t not in ma),
        errors_a=int(sum(v[3] for v in ma.values())),
        errors_b=int(sum(v[3] for v in mb.values())),
        threshold=threshold,
        tasks=rows,
    )
    return stats
