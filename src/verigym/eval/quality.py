"""Benchmark quality: hardness, separability, diversity, per-task discrimination and noise.

"When we choose a benchmark suite, we are defining what intelligence is" (seed lectures): a
benchmark is itself measured. Inputs are eval runs (``results.jsonl`` records) of several
models on one environment or suite; every function here is pure over per-task pass rates.

- Hardness: distribution of per-task pass rates; the share no model solves / all models solve.
- Separability: share of model pairs whose mean difference is significant under a paired
  bootstrap over tasks, and rank stability (Kendall's τ of the model ranking under task
  resampling), as in the benchmark-quality literature (e.g. "Signal and Noise", Heineman et al. 2025).
- Diversity: distinct-n over prompt tokens (embedding-free lexical diversity) and coverage of
  declared categories / difficulty levels.
- Discrimination: per task, the spread of pass rates across models (tasks that separate them).
- Noise: test-retest agreement between two runs of one model (per-task correlation and the
  share of tasks whose pass/fail flips).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "PassTable",
    "QualityReport",
    "discrimination",
    "distinct_n",
    "hardness",
    "kendall_tau",
    "noise",
    "pass_table",
    "quality_report",
    "separability",
]

PassTable = dict[str, dict[str, float]]  # model -> task_id -> pass rate in [0, 1]


def pass_table(
    runs: Mapping[str, Sequence[Mapping[str, Any]]], *, threshold: float = 1.0
) -> tuple[PassTable, dict[str, int]]:
    """Per-model, per-task pass rates from results records (dicts as in ``results.jsonl``).

    A sample passes when its reward is ≥ ``threshold`` (within 1e-9). Errored samples are left
    out of the rate and counted per model in the second return value.
    """
    table: PassTable = {}
    errors: dict[str, int] = {}
    for model, records in runs.items():
        hits: dict[str, list[float]] = {}
        errors[model] = 0
        for rec in records:
            reward = (rec.get("score") or {}).get("reward")
            if reward is None:
                errors[model] += 1
                continue
            hits.setdefault(str(rec["task_id"]), []).append(1.0 if reward >= threshold - 1e-9 else 0.0)
        table[model] = {t: sum(v) / len(v) for t, v in hits.items()}
    return table, errors


def _common_tasks(table: PassTable) -> list[str]:
    sets = [set(rates) for rates in table.values()]
    return sorted(set.intersection(*sets)) if sets else []


def hardness(table: PassTable) -> dict[str, Any]:
    """Mean pass rate, a 10-bin histogram of per-task rates (pooled over models), and the share
    of tasks that no model / every model solves (rate > 0 counts as solved)."""
    tasks = _common_tasks(table)
    pooled = [sum(table[m][t] for m in table) / len(table) for t in tasks]
    bins = [0] * 10
    for rate in pooled:
        bins[min(int(rate * 10), 9)] += 1
    none = sum(all(table[m][t] == 0 for m in table) for t in tasks)
    every = sum(all(table[m][t] > 0 for m in table) for t in tasks)
    n = max(len(tasks), 1)
    return {
        "n_tasks": len(tasks),
        "mean_pass_rate": sum(pooled) / n if tasks else math.nan,
        "histogram": bins,
        "share_unsolved_by_all": none / n,
        "share_solved_by_all": every / n,
        "per_model_mean": {m: sum(table[m][t] for t in tasks) / n for m in table},
    }


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's τ-a between two score vectors over the same items (1 = same order)."""
    concordant = discordant = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        s = (a[i] - a[j]) * (b[i] - b[j])
        concordant += s > 0
        discordant += s < 0
    pairs = len(a) * (len(a) - 1) / 2
    return (concordant - discordant) / pairs if pairs else 1.0


def separability(
    table: PassTable, *, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0
) -> dict[str, Any]:
    """Paired bootstrap over tasks for every model pair, and rank stability under resampling.

    A pair is separated when the (1−alpha) percentile interval of the mean per-task difference
    excludes 0.
    """
    models = sorted(table)
    tasks = _common_tasks(table)
    rng = random.Random(seed)
    if len(tasks) < 2 or len(models) < 2:
        return {"pairs": [], "share_separated": math.nan, "rank_stability_tau": math.nan}
    samples = [[rng.randrange(len(tasks)) for _ in tasks] for _ in range(n_boot)]
    pairs: list[dict[str, Any]] = []
    for a, b in itertools.combinations(models, 2):
        diffs = [table[a][t] - table[b][t] for t in tasks]
        boot = sorted(sum(diffs[i] for i in idx) / len(idx) for idx in samples)
        lo = boot[int(alpha / 2 * n_boot)]
        hi = boot[min(int((1 - alpha / 2) * n_boot), n_boot - 1)]
        mean = sum(diffs) / len(diffs)
        pairs.append({"a": a, "b": b, "diff": mean, "ci": [lo, hi], "separated": lo > 0 or hi < 0})
    full = [sum(table[m][t] for t in tasks) for m in models]
    taus = []
    for idx in samples[: min(n_boot, 200)]:
        resampled = [sum(table[m][tasks[i]] for i in idx) for m in models]
        taus.append(kendall_tau(full, resampled))
    return {
        "pairs": pairs,
        "share_separated": sum(p["separated"] for p in pairs) / len(pairs),
        "rank_stability_tau": sum(taus) / len(taus),
    }


def discrimination(table: PassTable, top: int = 10) -> list[dict[str, Any]]:
    """Tasks ranked by how much they separate models (std of pass rates across models)."""
    out: list[dict[str, Any]] = []
    for t in _common_tasks(table):
        rates = [table[m][t] for m in table]
        mean = sum(rates) / len(rates)
        std = math.sqrt(sum((r - mean) ** 2 for r in rates) / len(rates))
        out.append({"task_id": t, "std": std, "rates": {m: table[m][t] for m in table}})
    out.sort(key=lambda d: (-d["std"], d["task_id"]))
    return out[:top]


_WORD = re.compile(r"\w+|[^\w\s]")


def distinct_n(texts: Sequence[str], n: int = 2) -> float:
    """Share of distinct n-grams among all n-grams of ``texts`` (Li et al. 2016's distinct-n)."""
    grams: Counter[tuple[str, ...]] = Counter()
    for text in texts:
        tokens = _WORD.findall(text.lower())
        grams.update(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    total = sum(grams.values())
    return len(grams) / total if total else 0.0


def noise(first: Mapping[str, float], second: Mapping[str, float]) -> dict[str, float]:
    """Test-retest agreement of two runs of one model: Pearson r of per-task pass rates, the
    share of tasks whose majority verdict (rate ≥ 0.5) flips, and the mean absolute difference."""
    tasks = sorted(set(first) & set(second))
    if not tasks:
        return {"n_tasks": 0, "pearson_r": math.nan, "flip_rate": math.nan, "mean_abs_diff": math.nan}
    xs = [first[t] for t in tasks]
    ys = [second[t] for t in tasks]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    vx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    vy = math.sqrt(sum((y - my) ** 2 for y in ys))
    r = cov / (vx * vy) if vx and vy else (1.0 if xs == ys else math.nan)
    flips = sum((x >= 0.5) != (y >= 0.5) for x, y in zip(xs, ys, strict=True))
    return {
        "n_tasks": len(tasks),
        "pearson_r": r,
        "flip_rate": flips / len(tasks),
        "mean_abs_diff": sum(abs(x - y) for x, y in zip(xs, ys, strict=True)) / len(tasks),
    }


@dataclass
class QualityReport:
    models: list[str]
    errors: dict[str, int]
    hardness: dict[str, Any]
    separability: dict[str, Any]
    discriminating_tasks: list[dict[str, Any]]
    diversity: dict[str, Any]
    noise: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def quality_report(
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    threshold: float = 1.0,
    retest: tuple[str, str] | None = None,
    categories: Mapping[str, str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> QualityReport:
    """All quality measures for eval runs of several models (``runs``: name → records).

    ``retest`` names two runs of the same model for the noise measure; ``categories`` maps
    task ids to a declared category or difficulty level for coverage.
    """
    table, errors = pass_table(runs, threshold=threshold)
    prompts: dict[str, str] = {}
    for records in runs.values():
        for rec in records:
            traj = rec.get("trajectory") or {}
            prompts.setdefault(
                str(rec["task_id"]), " ".join(m.get("content", "") for m in traj.get("prompt", []))
            )
    texts = list(prompts.values())
    diversity: dict[str, Any] = {
        "n_prompts": len(texts),
        "distinct_1": distinct_n(texts, 1),
        "distinct_2": distinct_n(texts, 2),
        "distinct_3": distinct_n(texts, 3),
    }
    if categories:
        seen = Counter(categories.get(t, "?") for t in prompts)
        diversity["coverage"] = dict(sorted(seen.items()))
    report = QualityReport(
        models=sorted(table),
        errors=errors,
        hardness=hardness(table),
        separability=separability(table, n_boot=n_boot, seed=seed),
        discriminating_tasks=discrimination(table),
        diversity=diversity,
    )
    if retest is not None:
        report.noise = noise(table[retest[0]], table[retest[1]])
    return report
