"""pass@k, defined once: a sample is correct when its reward is ≥ the success threshold (1.0 unless
a run says otherwise), and pass@k is the unbiased estimator averaged over tasks.

``eval.metrics`` (the eval summary's ``pass_at_k`` table) and ``train`` (held-out ``pass_at_1``)
both use it; it imports nothing of verigym, so both can stand on it (``train`` never imports ``eval``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SUCCESS_THRESHOLD", "pass_at_k", "pass_table"]

SUCCESS_THRESHOLD = 1.0


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` samples drawn from ``n`` (``c`` correct) is correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def _mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def pass_table(correct: np.ndarray, tasks: np.ndarray, k_max: int) -> dict[str, float | None]:
    """Unbiased pass@k for k = 1..k_max, averaged over the tasks with at least k scored samples
    (tasks in order of their first scored sample; ``correct`` and ``tasks`` per scored sample)."""
    if len(tasks):
        _, first, inverse = np.unique(tasks, return_index=True, return_inverse=True)
        n = np.bincount(inverse)
        c = np.bincount(inverse, weights=correct).astype(int)
        by_first = np.argsort(first, kind="stable")
        per_task = list(zip(n[by_first].tolist(), c[by_first].tolist(), strict=True))
    else:
        per_task = []
    seen: dict[tuple[int, int, int], float] = {}
    table: dict[str, float | None] = {}
    for k in range(1, k_max + 1):
        vals = []
        for n_t, c_t in per_task:
            if n_t >= k:
                if (n_t, c_t, k) not in seen:
                    seen[n_t, c_t, k] = pass_at_k(n_t, c_t, k)
                vals.append(seen[n_t, c_t, k])
        table[str(k)] = _mean(vals)
    return table
