"""Best-of-N: score every candidate with a verifier and keep the highest.

The verifier is either any ``Grader`` (``(task, trajectory) -> Grade``; an errored grade is
left out, never read as 0) or a reward-model ``Policy`` asked to rate each solution with a
fixed prompt and to end with ``Score: X``; a reply without a readable score is a parse
failure, counted in ``detail["parse_failures"]`` and left out — not a score of 0.

Ties go to the earliest candidate. When no candidate could be scored, the pick is drawn at
random with a seed and counted in ``Selection.fallbacks``.
Reference: Cobbe et al. 2021, "Training Verifiers to Solve Math Word Problems" (verifier
best-of-N).
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from collections.abc import Sequence

from verigym.policies.base import Policy
from verigym.rubric import Grader
from verigym.select._common import Candidate, Selection
from verigym.select.genselect import problem_text, strip_reasoning
from verigym.select.methods import SelectContext, register_method
from verigym.types import Message, Sampling, Task, Trajectory, Usage

__all__ = [
    "REWARD_PROMPT",
    "best_of_scores",
    "parse_score",
    "select_best_of_n_grader",
    "select_best_of_n_reward_model",
]

REWARD_PROMPT = """Rate how likely the following solution is to be correct, from 0 (certainly wrong) to 10 (certainly right).
Check each step and the final answer.

Problem:
{problem}

Solution:
{solution}

End your reply with exactly one line of the form
Score: X
where X is a number from 0 to 10."""

DEFAULT_SAMPLING = Sampling(temperature=0.0, max_tokens=512)
_SCORE = re.compile(r"score\s*:\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)


def parse_score(text: str, *, low: float = 0.0, high: float = 10.0) -> float | None:
    """The number after the last ``Score:`` (reasoning stripped), or None when there is none or
    it lies outside ``[low, high]``. A bare number is NOT a score: a model that answers a rating
    request with ``141`` did not rate anything, and that is counted as a parse failure."""
    body = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    found = _SCORE.findall(body)
    if not found:
        return None
    value = float(found[-1])
    return value if low <= value <= high else None


def best_of_scores(
    candidates: Sequence[Candidate],
    scores: Sequence[float | None],
    *,
    seed: int = 0,
    method: str = "best-of-n",
) -> Selection:
    """Keep the highest score (earliest on ties); a seeded random pick, counted, if none scored."""
    best: int | None = None
    top = -math.inf
    for pos, s in enumerate(scores):
        if s is not None and math.isfinite(s) and (best is None or s > top):
            best, top = pos, s
    sel = Selection(index=None, method=method, detail={"scores": list(scores)})
    if best is None:
        if candidates:
            best = random.Random(seed).randrange(len(candidates))
            sel.fallbacks = 1
            sel.detail["fallback"] = "no candidate could be scored"
        else:
            return sel
    sel.index, sel.answer = candidates[best].index, candidates[best].answer
    return sel


async def select_best_of_n_grader(
    task: Task,
    candidates: Sequence[Candidate],
    trajectories: Sequence[Trajectory],
    grader: Grader,
    *,
    seed: int = 0,
) -> Selection:
    """Best-of-N with any ``Grader``; errored grades are counted in ``detail["grader_errors"]``."""
    grades = await asyncio.gather(*(grader.grade(task, t) for t in trajectories))
    scores = [g.score if g.ok else None for g in grades]
    sel = best_of_scores(candidates, scores, seed=seed)
    sel.detail["grader_errors"] = sum(1 for g in grades if not g.ok)
    return sel


async def _rate(
    policy: Policy, problem: str, solution: str, sampling: Sampling
) -> tuple[float | None, Usage, str]:
    prompt = [Message(role="user", content=REWARD_PROMPT.format(problem=problem, solution=solution))]
    try:
        completion = await policy.complete(prompt, sampling=sampling)
    except Exception as exc:
        return None, Usage(), f"request failed: {type(exc).__name__}: {exc}"
    score = parse_score(completion.text)
    return score, completion.usage, "" if score is not None else "unparseable"


async def select_best_of_n_reward_model(
    candidates: Sequence[Candidate],
    policy: Policy,
    problem: str,
    *,
    seed: int = 0,
    sampling: Sampling | None = None,
) -> Selection:
    """Best-of-N with a reward-model policy: one rating request per complete candidate.

    Incomplete candidates are not rated. ``detail["parse_failures"]`` and
    ``detail["request_errors"]`` count the ratings that could not be used.
    """
    sampling = sampling or DEFAULT_SAMPLING
    if len(candidates) == 1:  # nothing to choose between: no rating request
        single = best_of_scores(candidates, [0.0], seed=seed)
        single.detail = {"scores": [None], "note": "one candidate: nothing rated"}
        return single
    jobs = []
    positions = []
    for pos, c in enumerate(candidates):
        body = strip_reasoning(c.text) if c.finished else None
        if body is not None:
            positions.append(pos)
            jobs.append(_rate(policy, problem, body, sampling))
    rated = await asyncio.gather(*jobs)
    scores: list[float | None] = [None] * len(candidates)
    usage = Usage()
    failures = errors = 0
    for pos, (score, used, why) in zip(positions, rated, strict=True):
        scores[pos] = score
        usage = usage + used
        failures += why == "unparseable"
        errors += why.startswith("request failed")
    sel = best_of_scores(candidates, scores, seed=seed)
    sel.calls, sel.usage = len(jobs), usage
    sel.detail.update(parse_failures=failures, request_errors=errors)
    return sel


async def _best_of_n(task: Task, candidates: Sequence[Candidate], ctx: SelectContext) -> Selection:
    cfg = ctx.config
    if cfg.grader is not None:
        trajectories = [c.meta["trajectory"] for c in candidates]
        return await select_best_of_n_grader(task, candidates, trajectories, cfg.grader, seed=ctx.seed)
    judge = ctx.need_judge("best-of-n")
    return await select_best_of_n_reward_model(
        candidates, judge, problem_text(task), seed=ctx.seed, sampling=cfg.judge_sampling
    )


register_method("best-of-n", _best_of_n, needs_judge=True)
