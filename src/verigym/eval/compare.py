"""Compare two eval runs task by task: per-task deltas, the overall delta with a paired bootstrap CI.

Typical use is a harness swap (``verigym eval math --harness single`` vs ``--harness
python_tool``) or a tool variant, on the same tasks. Each task's score in a run is the mean
reward of its scored samples (errored samples are left out and counted apart); tasks scored in
both runs are *paired*, and the overall delta is the mean of their per-task differences
(B - A). Its confidence interval is a paired percentile bootstrap over tasks (Efron &
Tibshirani 1993): resample tasks with replacement and take the mean difference, which keeps
the correlation between the two runs on the same task (much tighter than comparing two
independent CIs). ``p_b_not_better`` is the share of resamples whose mean delta is ≤ 0.

A run folder is read through ``verigym.record.read_run`` first, so one written in a newer run-record
format is refused in one line instead of being compared on a guess.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from verigym._report import HtmlReport, figure
from verigym.eval.store import latest, load_records
from verigym.record import read_run
from verigym.types import Record

__all__ = [
    "Comparison",
    "TaskDelta",
    "compare_records",
    "compare_runs",
    "paired_bootstrap",
    "write_comparison",
]


@dataclass(frozen=True)
class TaskDelta:
    task_id: str
    a: float
    b: float

    @property
    def delta(self) -> float:
        return self.b - self.a


@dataclass
class Comparison:
    """The result of ``compare_records``: paired per-task deltas and the overall statistics."""

    name_a: str
    name_b: str
    tasks: list[TaskDelta]
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    ci95: tuple[float, float] | None
    p_b_not_better: float | None
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    errors_a: int = 0
    errors_b: int = 0
    grader_deltas: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "a": self.name_a,
            "b": self.name_b,
            "paired_tasks": len(self.tasks),
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "delta": self.delta,
            "ci95": list(self.ci95) if self.ci95 else None,
            "p_b_not_better": self.p_b_not_better,
            "only_a": len(self.only_a),
            "only_b": len(self.only_b),
            "errors_a": self.errors_a,
            "errors_b": self.errors_b,
            "grader_deltas": self.grader_deltas,
            "tasks": [{"task_id": t.task_id, "a": t.a, "b": t.b, "delta": t.delta} for t in self.tasks],
        }


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, tuple[float, float], float]:
    """Mean of ``b - a``, its percentile-bootstrap interval over pairs, and P(resampled mean ≤ 0)."""
    if len(a) != len(b):
        raise ValueError(f"paired samples need equal lengths, got {len(a)} and {len(b)}")
    if not a:
        return (math.nan, (math.nan, math.nan), math.nan)
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n_resamples, len(d)))].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(d.mean()), (float(lo), float(hi)), float((means <= 0).mean())


def _per_task(records: Sequence[Record]) -> tuple[dict[str, float], int, dict[str, dict[str, float]]]:
    rewards: dict[str, list[float]] = defaultdict(list)
    graders: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    errors = 0
    for r in records:
        if r.error is not None or r.score.reward is None:
            errors += 1
            continue
        rewards[r.task_id].append(float(r.score.reward))
        for name, g in r.score.grades.items():
            if g.ok:
                graders[name][r.task_id].append(g.score)
    means = {t: sum(v) / len(v) for t, v in rewards.items()}
    gmeans = {n: {t: sum(v) / len(v) for t, v in per.items()} for n, per in graders.items()}
    return means, errors, gmeans


def compare_records(
    a: Sequence[Record], b: Sequence[Record], *, name_a: str = "A", name_b: str = "B", seed: int = 0
) -> Comparison:
    """Pair the tasks of two runs and compare them (see the module docstring)."""
    ma, ea, ga = _per_task(a)
    mb, eb, gb = _per_task(b)
    common = [t for t in ma if t in mb]
    pairs = [TaskDelta(t, ma[t], mb[t]) for t in common]
    grader_deltas: dict[str, float] = {}
    for name in sorted(set(ga) & set(gb)):
        shared = [t for t in ga[name] if t in gb[name]]
        if shared:
            grader_deltas[name] = float(np.mean([gb[name][t] - ga[name][t] for t in shared]))
    if pairs:
        delta, ci, p = paired_bootstrap([x.a for x in pairs], [x.b for x in pairs], seed=seed)
        mean_a = float(np.mean([x.a for x in pairs]))
        mean_b = float(np.mean([x.b for x in pairs]))
    else:
        delta, ci, p, mean_a, mean_b = None, None, None, None, None  # type: ignore[assignment]
    return Comparison(
        name_a=name_a,
        name_b=name_b,
        tasks=pairs,
        mean_a=mean_a,
        mean_b=mean_b,
        delta=delta,
        ci95=ci,
        p_b_not_better=p,
        only_a=sorted(set(ma) - set(mb)),
        only_b=sorted(set(mb) - set(ma)),
        errors_a=ea,
        errors_b=eb,
        grader_deltas=grader_deltas,
    )


def _load(run: str | Path) -> list[Record]:
    """The latest record of each key of an eval (or select) run folder or results file; a folder
    in a run-record format this verigym does not read is a ``RunFormatError`` (one line)."""
    path = Path(run)
    if path.is_dir():
        if (path / "run.json").is_file() or (path / "summary.json").is_file():
            read_run(path)  # refuses a newer format_version before its records are read
        path = path / "results.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{run}: no results.jsonl (give an eval --out folder or a results file)")
    return list(latest(load_records(path)).values())


def compare_runs(run_a: str | Path, run_b: str | Path, *, seed: int = 0) -> Comparison:
    """``compare_records`` on two eval output folders (or ``results.jsonl`` files)."""
    return compare_records(_load(run_a), _load(run_b), name_a=str(run_a), name_b=str(run_b), seed=seed)


def _fmt(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def write_comparison(
    comparison: Comparison, path: str | Path, *, config: Mapping[str, Any] | None = None
) -> Path:
    """A self-contained HTML page: summary, a per-task delta plot, grader deltas, the task table."""
    c = comparison
    report = HtmlReport(f"verigym compare: {c.name_a} vs {c.name_b}")
    ci = f"[{_fmt(c.ci95[0])}, {_fmt(c.ci95[1])}]" if c.ci95 else "–"
    report.table(
        [
            ["paired tasks", len(c.tasks)],
            ["mean A", _fmt(c.mean_a)],
            ["mean B", _fmt(c.mean_b)],
            ["delta (B - A)", _fmt(c.delta)],
            ["95% paired bootstrap CI", ci],
            ["P(B not better)", _fmt(c.p_b_not_better)],
            ["tasks only in A / only in B", f"{len(c.only_a)} / {len(c.only_b)}"],
            ["errored samples A / B", f"{c.errors_a} / {c.errors_b}"],
        ],
        header=["", "value"],
    )
    if c.tasks:
        fig = figure(7, 3.2)
        ax = fig.add_subplot(1, 2, 1)
        ax.bar(["A", "B"], [c.mean_a or 0.0, c.mean_b or 0.0], color=["#888", "#36c"])
        ax.set_ylabel("mean reward (paired tasks)")
        ax2 = fig.add_subplot(1, 2, 2)
        deltas = sorted(t.delta for t in c.tasks)
        ax2.bar(range(len(deltas)), deltas, color=["#a33" if d < 0 else "#3a3" for d in deltas])
        ax2.axhline(0, color="#000", linewidth=0.8)
        ax2.set_xlabel("task (sorted)")
        ax2.set_ylabel("B - A")
        report.image(fig, "per-task deltas")
    if c.grader_deltas:
        report.heading("Per-grader deltas (B - A)")
        report.table([[k, _fmt(v)] for k, v in c.grader_deltas.items()], header=["grader", "delta"])
    report.heading("Per task")
    rows = [[t.task_id, _fmt(t.a), _fmt(t.b), _fmt(t.delta)] for t in sorted(c.tasks, key=lambda t: t.delta)]
    report.table(rows, header=["task", "A", "B", "delta"])
    return report.write(path)
