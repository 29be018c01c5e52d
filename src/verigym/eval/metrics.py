"""Metrics over results records: unbiased pass@k, bootstrap confidence intervals, the summary.

- ``pass_at_k(n, c, k)``: the unbiased estimator of Chen et al. 2021, "Evaluating Large
  Language Models Trained on Code" (arXiv:2107.03374), ``1 - C(n-c, k) / C(n, k)``, computed as a
  stable product.
- ``bootstrap_ci``: a percentile bootstrap (Efron & Tibshirani 1993). With ``groups`` it is a
  cluster bootstrap that resamples whole tasks, since samples of one task are correlated.
- ``summarize``: the dict written to ``summary.json``. Errored samples are counted by kind and
  kept out of every reward statistic.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from verigym.types import Record

__all__ = ["bootstrap_ci", "pass_at_k", "summarize"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` samples drawn from ``n`` (``c`` correct) is correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def bootstrap_ci(
    values: Sequence[float],
    *,
    groups: Sequence[str] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """A percentile bootstrap interval of the mean of ``values`` (NaN, NaN if empty).

    With ``groups`` (one label per value) whole groups are resampled and the mean is taken over
    all values of the drawn groups.
    """
    if not values:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    x = np.asarray(values, dtype=float)
    if groups is None:
        means = x[rng.integers(0, len(x), size=(n_resamples, len(x)))].mean(axis=1)
    else:
        labels = {g: i for i, g in enumerate(dict.fromkeys(groups))}
        idx = np.fromiter((labels[g] for g in groups), dtype=int, count=len(groups))
        sums = np.bincount(idx, weights=x, minlength=len(labels))
        counts = np.bincount(idx, minlength=len(labels)).astype(float)
        draw = rng.integers(0, len(labels), size=(n_resamples, len(labels)))
        means = sums[draw].sum(axis=1) / counts[draw].sum(axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))


def _mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def _empty_answer(record: Record) -> bool:
    """The model's last completion said nothing: no text (empty or null content) and no tool call,
    finished by stop or length. Still a valid (wrong) answer, counted apart so that a server that
    answers nothing is visible at a glance."""
    done = record.trajectory.completions
    if not done:
        return False
    last = done[-1]
    return not last.text.strip() and not last.tool_calls and last.finish_reason in ("stop", "length")


def summarize(
    records: Sequence[Record],
    *,
    samples_per_task: int | None = None,
    success_threshold: float = 1.0,
    wall_s: float | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The summary of an eval: counts, errors by kind, empty answers, reward mean and 95% CI, pass@k, per-grader
    means, completion token stats, truncation rate, tokens used and wall time.

    A sample is correct for pass@k when its reward is ≥ ``success_threshold``. pass@k for
    k = 1..K (K = ``samples_per_task``, default the most samples of any task) is averaged over the
    tasks with at least k scored samples; errored samples are left out of n.
    """
    ok = [r for r in records if r.error is None and r.score.reward is not None]
    errors = Counter(
        r.error.kind if r.error else "grader"
        for r in records
        if r.error is not None or r.score.reward is None
    )
    rewards = [float(r.score.reward) for r in ok if r.score.reward is not None]
    lo, hi = bootstrap_ci(rewards, groups=[r.task_id for r in ok], seed=seed)
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in ok:
        per_task[r.task_id].append(r.score.reward is not None and r.score.reward >= success_threshold)
    k_max = samples_per_task or max((Counter(r.task_id for r in records).values()), default=0)
    pass_k: dict[str, float | None] = {}
    for k in range(1, k_max + 1):
        vals = [pass_at_k(len(v), sum(v), k) for v in per_task.values() if len(v) >= k]
        pass_k[str(k)] = _mean(vals)
    graders: dict[str, list[float]] = defaultdict(list)
    for r in ok:
        for name, grade in r.score.grades.items():
            if grade.ok:
                graders[name].append(grade.score)
    penalties: dict[str, dict[str, Any]] = {}
    for r in records:  # each cheating detector: how often it fired among the samples it judged
        for name, grade in r.score.grades.items():
            if name.startswith("penalty:"):
                seen = penalties.setdefault(
                    name.removeprefix("penalty:"), {"judged": 0, "fired": 0, "errors": 0}
                )
                seen["judged" if grade.ok else "errors"] += 1
                seen["fired"] += int(grade.ok and grade.score > 0.5)
    for seen in penalties.values():
        seen["rate"] = seen["fired"] / seen["judged"] if seen["judged"] else None
    completion = [r.usage.completion_tokens for r in ok]
    truncated = [r for r in ok if r.trajectory.stop_reason == "length"]
    empty = sum(_empty_answer(r) for r in ok)
    return {
        "n_tasks": len({r.task_id for r in records}),
        "n_samples": len(records),
        "n_scored": len(ok),
        "n_errors": len(records) - len(ok),
        "empty_answers": empty,
        "errors_by_kind": dict(sorted(errors.items())),
        "reward_mean": _mean(rewards),
        "reward_ci95": [lo, hi] if rewards else None,
        "success_threshold": success_threshold,
        "pass_at_k": pass_k,
        "grader_means": {name: _mean(v) for name, v in sorted(graders.items())},
        "penalties": dict(sorted(penalties.items())),
        "penalty_mean": _mean([r.score.penalty for r in ok]),
        "stop_reasons": dict(sorted(Counter(r.trajectory.stop_reason for r in records).items())),
        "completion_tokens_mean": _mean([float(c) for c in completion]),
        "completion_tokens_max": max(completion) if completion else None,
        "truncation_rate": len(truncated) / len(ok) if ok else None,
        "prompt_tokens": sum(r.usage.prompt_tokens for r in records),
        "completion_tokens": sum(r.usage.completion_tokens for r in records),
        "total_tokens": sum(r.usage.total_tokens for r in records),
        "wall_s": wall_s,
    }
