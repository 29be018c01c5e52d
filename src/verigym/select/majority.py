"""Majority and weighted voting over extracted answers (self-consistency).

Weighted vote: the winner is ``argmax_a Σ_i w_i · [ans_i = a]``; majority is the case
``w_i = 1``. Samples without an answer (``None``) do not vote.

Tie-breaking rule (deterministic, documented): among answers whose total weight is equal
(within a relative 1e-9), the one that appears FIRST in sample order wins. The same samples in
the same order always give the same winner, independent of hashing or the order answers are
counted in. The representative sample of the winner is its first occurrence.

Reference: Wang et al. 2023, "Self-Consistency Improves Chain of Thought Reasoning in
Language Models".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from verigym.select._common import Candidate, Selection
from verigym.select.methods import SelectContext, register_method
from verigym.types import Task

__all__ = ["Vote", "majority_vote", "select_majority", "select_weighted", "weighted_vote"]


@dataclass(frozen=True)
class Vote:
    """The result of a vote.

    ``answer``/``position``: the winner and the position (in the given sequence) of its first
    sample; both None when nobody voted. ``tally`` maps each answer to its total weight, in
    order of first appearance. ``tied`` lists the answers that tied with the winner (the
    winner included) when the rule had to break a tie.
    """

    answer: str | None
    position: int | None
    weight: float
    total: float
    tally: dict[str, float] = field(default_factory=dict)
    tied: tuple[str, ...] = ()


def weighted_vote(
    answers: Sequence[str | None],
    weights: Sequence[float] | None = None,
    *,
    equivalent: Callable[[str, str], bool] | None = None,
) -> Vote:
    """Vote with weights (``None`` weights: one vote each).

    ``equivalent(a, b)``, when given, merges answers that are written differently but mean the
    same (e.g. ``1/2`` and ``0.5`` with ``graders.math.check_equivalent``): each answer joins
    the first earlier answer it is equivalent to. Negative or non-finite weights are errors.
    """
    if weights is None:
        weights = [1.0] * len(answers)
    if len(weights) != len(answers):
        raise ValueError(f"weighted_vote: {len(answers)} answers but {len(weights)} weights")
    tally: dict[str, float] = {}
    first: dict[str, int] = {}
    for pos, (ans, w) in enumerate(zip(answers, weights, strict=True)):
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"weighted_vote: weight {w!r} at position {pos} must be finite and ≥ 0")
        if ans is None:
            continue
        key = ans
        if equivalent is not None and ans not in tally:
            key = next((k for k in tally if _safe_eq(equivalent, k, ans)), ans)
        if key not in tally:
            tally[key] = 0.0
            first[key] = pos
        tally[key] += float(w)
    total = sum(tally.values())
    if not tally:
        return Vote(answer=None, position=None, weight=0.0, total=0.0)
    best = max(tally.values())
    tied = [a for a, w in tally.items() if math.isclose(w, best, rel_tol=1e-9, abs_tol=1e-12)]
    winner = min(tied, key=lambda a: first[a])  # earliest first appearance wins a tie
    return Vote(
        answer=winner,
        position=first[winner],
        weight=tally[winner],
        total=total,
        tally=tally,
        tied=tuple(tied) if len(tied) > 1 else (),
    )


def majority_vote(
    answers: Sequence[str | None], *, equivalent: Callable[[str, str], bool] | None = None
) -> Vote:
    """One vote per sample; ties go to the answer seen first."""
    return weighted_vote(answers, None, equivalent=equivalent)


def _safe_eq(fn: Callable[[str, str], bool], a: str, b: str) -> bool:
    try:
        return bool(fn(a, b))
    except Exception:
        return a == b


def select_majority(candidates: Sequence[Candidate]) -> Selection:
    """Majority vote over candidates' answers; the chosen index is the winner's first sample."""
    vote = majority_vote([c.answer for c in candidates])
    return _to_selection(candidates, vote, "majority")


def select_weighted(candidates: Sequence[Candidate], weights: Sequence[float], method: str) -> Selection:
    """Weighted vote over candidates' answers."""
    vote = weighted_vote([c.answer for c in candidates], weights)
    return _to_selection(candidates, vote, method)


def _to_selection(candidates: Sequence[Candidate], vote: Vote, method: str) -> Selection:
    index = None if vote.position is None else candidates[vote.position].index
    return Selection(
        index=index,
        answer=vote.answer,
        method=method,
        detail={"tally": vote.tally, "tie_broken": bool(vote.tied)},
    )


async def _majority(task: Task, candidates: Sequence[Candidate], ctx: SelectContext) -> Selection:
    return select_majority(candidates)


register_method("majority", _majority)
