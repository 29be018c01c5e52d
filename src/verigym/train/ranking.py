"""Relative ranking across graders: advantages from each sample's place in its group.

With several graders (format, correctness, behaviour...), an early policy rarely passes them
all, and a weighted sum mixes scales that are hard to balance. Ranking instead compares the
samples of one task on their grader *vector* and rewards each by its place in the group, so a
sample that beats its siblings on the graders that matter most is pushed up even when none
passes everything ("relative ranking — it is hard for an early policy to pass all graders",
seed lecture 003, "How to balance multiple graders").

Two orders, both within a group (``groups`` ids as in ``advantages``):

- **lexicographic**: compare vectors grader by grader in priority order (the first grader
  decides; ties fall to the next). The rank score is the normalised mid-rank,
  q_i = (#{j: v_j < v_i} + ½·#{j ≠ i: v_j = v_i}) / (n − 1) ∈ [0, 1]; equal vectors share it.
- **pareto**: non-dominated sorting (Deb et al. 2002, "NSGA-II", IEEE TEC 6(2)): front 0 holds
  the samples no sibling dominates (≥ on every grader, > on one), front 1 those dominated only
  by front 0, and so on; q_i = 1 − f_i / (F − 1) with F fronts in the group (1 when F = 1).
  Priority plays no part: no grader outranks another.

The rank score then goes through the configured advantage estimator like a reward (GRPO:
(q − mean)/(std + ε), centred and scaled per group; Dr. GRPO: centred only), so the ranking is
one knob beside the estimator, not a second estimator. A group of one has q = ½ (advantage 0).
A cheating penalty ranks first: ``penalty`` (N,) is prepended as −penalty, the top priority
(lexicographic) or one more objective (Pareto).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

__all__ = ["Ranking", "lexicographic_scores", "pareto_scores", "priority_order", "rank_scores"]

Ranking = Literal["none", "lexicographic", "pareto"]


def _members(groups: Tensor) -> list[Tensor]:
    """Indices of each group's samples, in group-id order."""
    return [torch.nonzero(groups == g, as_tuple=True)[0] for g in torch.unique(groups)]


def _lex_less(v: Tensor) -> tuple[Tensor, Tensor]:
    """For vectors ``v`` (n, K): ``less[i, j]`` = v_i <_lex v_j and ``equal[i, j]`` = (v_i == v_j)."""
    n = v.shape[0]
    less = torch.zeros(n, n, dtype=torch.bool)
    equal = torch.ones(n, n, dtype=torch.bool)
    for k in range(v.shape[1]):
        a, b = v[:, k].unsqueeze(1), v[:, k].unsqueeze(0)
        less |= equal & (a < b)
        equal &= a == b
    return less, equal


def lexicographic_scores(grades: Tensor, groups: Tensor) -> Tensor:
    """Normalised mid-rank of each sample (N,) under the lexicographic order of ``grades`` (N, K),
    whose columns are already in priority order (most important first)."""
    out = torch.full((grades.shape[0],), 0.5, dtype=torch.float64)
    for idx in _members(groups):
        n = idx.numel()
        if n < 2:
            continue
        less, equal = _lex_less(grades[idx].to(torch.float64))
        below = less.sum(dim=0).to(torch.float64)  # column j: how many i are lexicographically below j
        ties = equal.sum(dim=1).to(torch.float64) - 1
        out[idx] = (below + 0.5 * ties) / (n - 1)
    return out


def _fronts(v: Tensor) -> Tensor:
    """Pareto front index (0 = best) of each row of ``v`` (n, K), maximising every column."""
    a, b = v.unsqueeze(1), v.unsqueeze(0)
    dominates = (a >= b).all(dim=2) & (a > b).any(dim=2)  # [i, j]: i dominates j
    front = torch.full((v.shape[0],), -1, dtype=torch.long)
    left = torch.ones(v.shape[0], dtype=torch.bool)
    f = 0
    while bool(left.any()):
        dominated = (dominates & left.unsqueeze(1)).any(dim=0)
        now = left & ~dominated
        front[now] = f
        left &= ~now
        f += 1
    return front


def pareto_scores(grades: Tensor, groups: Tensor) -> Tensor:
    """q_i = 1 − f_i / (F − 1) per group (N,), from the Pareto fronts of ``grades`` (N, K)."""
    out = torch.full((grades.shape[0],), 0.5, dtype=torch.float64)
    for idx in _members(groups):
        if idx.numel() < 2:
            continue
        front = _fronts(grades[idx].to(torch.float64)).to(torch.float64)
        fronts = float(front.max()) + 1
        out[idx] = 1 - front / (fronts - 1) if fronts > 1 else torch.ones_like(front)
    return out


def priority_order(names: Sequence[str], weights: Sequence[float], priority: Sequence[str]) -> list[int]:
    """Column order for the lexicographic ranking: the graders named in ``priority`` first, in
    that order; the rest by descending weight, then by name. Unknown names raise ``ValueError``."""
    unknown = [p for p in priority if p not in names]
    if unknown:
        raise ValueError(f"rl.ranking_priority names unknown grader(s) {unknown}; graders are {list(names)}")
    first = [names.index(p) for p in priority]
    rest = sorted((i for i in range(len(names)) if i not in first), key=lambda i: (-weights[i], names[i]))
    return first + rest


def rank_scores(mode: Ranking, grades: Tensor, groups: Tensor, *, penalty: Tensor | None = None) -> Tensor:
    """The rank score (N,) in [0, 1] of every sample; ``grades`` columns in priority order."""
    if penalty is not None and bool((penalty != 0).any()):
        grades = torch.cat([-penalty.to(grades.dtype).unsqueeze(1), grades], dim=1)
    if mode == "lexicographic":
        return lexicographic_scores(grades, groups)
    if mode == "pareto":
        return pareto_scores(grades, groups)
    raise ValueError(f"unknown ranking {mode!r}; expected lexicographic or pareto")
