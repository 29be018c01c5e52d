"""The arithmetic of DeepConf (Fu et al. 2025, "Deep Think with Confidence"): token
confidences, sliding-window group confidences, trace scores and keep-top-η filtering.

Shared by the offline selector (``select.deepconf``) and the online early-stop hook
(``select._online``); both use the same prefix sums so they agree to the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

__all__ = [
    "DEFAULT_FRACTION",
    "DEFAULT_K",
    "DEFAULT_WINDOW",
    "TraceScore",
    "choose_window",
    "group_confidences",
    "keep_top",
    "prefix_sums",
    "token_confidences",
    "trace_score",
]


def prefix_sums(values: Sequence[float]) -> list[float]:
    """``p[0] = 0``, ``p[i] = p[i-1] + values[i-1]`` (left to right, as the online hook adds)."""
    out = [0.0]
    for v in values:
        out.append(out[-1] + v)
    return out


TraceScore = Literal["lowest", "bottom10", "tail", "mean"]
DEFAULT_K = 20
DEFAULT_WINDOW = 2048
DEFAULT_FRACTION = 0.25


def token_confidences(top_logprobs: Sequence[Sequence[float]], k: int = DEFAULT_K) -> list[float]:
    """``C_t = −mean(top-k logprobs at t)`` for each token (the first ``k`` entries are used).

    A position with no logprobs is an error (``ValueError``), not a zero confidence.
    """
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k}")
    out: list[float] = []
    for t, row in enumerate(top_logprobs):
        top = list(row[:k])
        if not top:
            raise ValueError(f"token {t} has no top logprobs; sample with Sampling(top_logprobs=k)")
        out.append(-math.fsum(top) / len(top))
    return out


def choose_window(
    lengths: Sequence[int], window: int = DEFAULT_WINDOW, fraction: float = DEFAULT_FRACTION
) -> int:
    """The group window for one task's traces: ``min(window, max(1, ⌊fraction·median⌋))``.

    ``fraction <= 0`` disables scaling (the window is used as given).
    """
    if window < 1:
        raise ValueError(f"window must be ≥ 1, got {window}")
    if fraction <= 0 or not lengths:
        return window
    ordered = sorted(lengths)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return min(window, max(1, int(fraction * median)))


def group_confidences(confidences: Sequence[float], window: int) -> list[float]:
    """Sliding-window means ``mean(C[i-w:i])`` for ``i = w..L``; one group if ``L < w``; [] if L = 0.

    Computed from the same prefix sums as the online hook, so both agree to the last bit.
    """
    n = len(confidences)
    if n == 0:
        return []
    if n < window:
        return [math.fsum(confidences) / n]
    p = prefix_sums(confidences)
    return [(p[i] - p[i - window]) / window for i in range(window, n + 1)]


def trace_score(
    confidences: Sequence[float], window: int, method: TraceScore = "lowest", bottom: float = 0.1
) -> float | None:
    """One number per trace (None for an empty trace). See the module docstring."""
    if not confidences:
        return None
    if method == "mean":
        return math.fsum(confidences) / len(confidences)
    if method == "tail":
        tail = confidences[-window:]
        return math.fsum(tail) / len(tail)
    groups = group_confidences(confidences, window)
    if method == "lowest":
        return min(groups)
    if method == "bottom10":
        ordered = sorted(groups)
        m = max(1, math.ceil(bottom * len(ordered)))
        return math.fsum(ordered[:m]) / m
    raise ValueError(f"unknown trace score {method!r}; expected lowest, bottom10, tail or mean")


def keep_top(scores: Sequence[float | None], eta: float) -> list[bool]:
    """Mark the traces whose score is among the top ``eta`` fraction.

    Keeps every score ≥ the ⌈η·n⌉-th highest score (n = traces with a score; ties at the cut
    are kept, so slightly more than η·n may survive). None scores are never kept.
    """
    if not 0 < eta <= 1:
        raise ValueError(f"eta must be in (0, 1], got {eta}")
    valid = sorted((s for s in scores if s is not None), reverse=True)
    if not valid:
        return [False] * len(scores)
    cut = valid[max(1, math.ceil(eta * len(valid))) - 1]
    return [s is not None and s >= cut for s in scores]
