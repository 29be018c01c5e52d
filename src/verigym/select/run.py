"""The experiment behind ``verigym select``: sample once, then measure each selection method's
accuracy against the number of samples N and against the tokens it spent.

Sampling happens ONCE, at the largest N, through ``verigym.runner`` (with top-k logprobs when a
DeepConf method is asked for). Every smaller N is measured on sub-samples of that pool: up to
``draws`` disjoint subsets of a seeded permutation of the task's samples (kept in sample order),
averaged. All methods see the same subsets, so they are compared on the same work.

Token cost per task (``tokens``): the completion tokens of every trace a method generated
(DeepConf-online: warm-up traces in full, the others up to where they were cut) plus all that a
selector or reward model read and wrote (GenSelect, best-of-N). DeepConf-online here is REPLAYED
on the traces sampled in full: the cut of a trace depends only on its prefix, so the tokens
counted are exactly those a generation loop with ``OnlineDeepConf`` would produce for the same
seeds (``benchmarks/test_time.py`` also runs it live inside ``LocalPolicy``).

This module and ``experiment`` are the layer-5 part of ``select`` (they stand on environments
and the runner, like ``eval``); the selectors themselves only need types and policies. Which
methods exist, what they need and how their tokens count is the registry in ``select.methods``.

Correctness of a pick is the environment's own verdict on the picked sample (reward ≥
``success_threshold``); selectors never see it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verigym.policies.base import Policy
from verigym.select._common import Candidate, Selection, answer_key
from verigym.select.methods import METHODS as _REGISTRY
from verigym.select.methods import SelectConfig, SelectContext, default_warmup, get_method
from verigym.types import Record, Task

if TYPE_CHECKING:
    from verigym.envs.base import Environment

__all__ = ["MethodPoint", "SelectConfig", "TaskPool", "build_pools", "default_warmup", "measure"]

Progress = Callable[[str, int, int], None]


def __getattr__(name: str) -> object:
    # The method lists of earlier versions, read live from the registry (``verigym.select.methods``).
    if name == "METHODS":
        return tuple(_REGISTRY)
    if name == "NEEDS_LOGPROBS":
        return tuple(n for n, m in _REGISTRY.items() if m.needs_logprobs)
    if name == "NEEDS_JUDGE":
        return tuple(n for n, m in _REGISTRY.items() if m.needs_judge)
    raise AttributeError(f"module 'verigym.select.run' has no attribute {name!r}")


@dataclass
class TaskPool:
    """All samples of one task, in sample order (errored samples included: they cannot vote)."""

    task: Task
    candidates: list[Candidate]
    errors: int = 0


@dataclass
class MethodPoint:
    """One method at one N, averaged over tasks and draws."""

    method: str
    n: int
    accuracy: float
    tokens: float
    draws: int
    picks: int
    no_answer: int = 0
    fallbacks: int = 0
    selector_calls: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "accuracy": self.accuracy,
            "tokens_per_task": self.tokens,
            "draws": self.draws,
            "picks": self.picks,
            "no_answer": self.no_answer,
            "fallbacks": self.fallbacks,
            "selector_calls": self.selector_calls,
        }
        out.update(self.extra)
        return out


def build_pools(
    env: Environment, tasks: Sequence[Task], records: Sequence[Record], success_threshold: float = 1.0
) -> list[TaskPool]:
    """Group records by task (sample order) into candidates with answers and verdicts."""
    by_task: dict[str, list[Record]] = {}
    for r in records:
        by_task.setdefault(r.task_id, []).append(r)
    pools = []
    for task in tasks:
        recs = sorted(by_task.get(task.id, []), key=lambda r: r.sample_index)
        cands = []
        errors = 0
        for pos, r in enumerate(recs):
            reward = r.score.reward
            errored = r.error is not None or reward is None
            errors += errored
            verdict = None if reward is None or r.error is not None else reward >= success_threshold
            c = Candidate.from_trajectory(pos, r.trajectory, correct=verdict)
            answer = None if errored else answer_key(env, c.text)
            cands.append(
                Candidate(
                    index=pos,
                    text=c.text,
                    answer=answer,
                    tokens=r.usage.completion_tokens,
                    top_logprobs=c.top_logprobs,
                    finished=c.finished and not errored,
                    correct=c.correct,
                    meta={"sample_index": r.sample_index, "error": errored, "trajectory": r.trajectory},
                )
            )
        pools.append(TaskPool(task=task, candidates=cands, errors=errors))
    return pools


def subsets(pool_size: int, n: int, draws: int, seed: int, task_id: str) -> list[list[int]]:
    """Up to ``draws`` disjoint subsets of size ``n`` (each in ascending sample order)."""
    if n >= pool_size:
        return [list(range(pool_size))]
    perm = list(range(pool_size))
    random.Random(f"{seed}:{task_id}").shuffle(perm)
    count = max(1, min(draws, pool_size // n))
    return [sorted(perm[d * n : (d + 1) * n]) for d in range(count)]


async def _select(
    method: str, pool: TaskPool, cands: list[Candidate], cfg: SelectConfig, judge: Policy | None, seed: int
) -> tuple[Selection, float]:
    """One method on one subset: the selection and the tokens it spent."""
    entry = get_method(method)
    sel = await entry.select(pool.task, cands, SelectContext(config=cfg, judge=judge, seed=seed))
    return sel, entry.tokens(cands, sel)


async def measure(
    pools: Sequence[TaskPool],
    cfg: SelectConfig,
    *,
    judge: Policy | None = None,
    progress: Progress | None = None,
) -> dict[str, list[MethodPoint]]:
    """Every method at every N: accuracy, tokens per task, fallbacks, and method extras."""
    out: dict[str, list[MethodPoint]] = {}
    pool_size = max((len(p.candidates) for p in pools), default=0)
    ns = sorted({n for n in cfg.ns if n <= pool_size})
    total = len(cfg.methods) * len(ns) * len(pools)
    done = 0
    for method in cfg.methods:
        points = []
        for n in ns:
            acc = tokens = 0.0
            picks = no_answer = fallbacks = calls = 0
            extras: dict[str, float] = {}
            weight_sum = 0.0
            # all tasks and draws of one (method, N) at once, so a local selector batches its calls
            jobs = [
                (pool, [pool.candidates[i] for i in idx], d, len(draws))
                for pool in pools
                for draws in [subsets(len(pool.candidates), n, cfg.draws, cfg.seed, pool.task.id)]
                for d, idx in enumerate(draws)
            ]
            results = await asyncio.gather(
                *(_select(method, pool, cands, cfg, judge, cfg.seed * 1000 + d) for pool, cands, d, _ in jobs)
            )
            for (_, cands, _, n_draws), (sel, spent) in zip(jobs, results, strict=True):
                w = 1.0 / n_draws  # each task weighs the same, whatever its number of draws
                weight_sum += w
                chosen = next((c for c in cands if c.index == sel.index), None)
                acc += w * float(bool(chosen is not None and chosen.correct))
                tokens += w * spent
                picks += 1
                no_answer += sel.index is None
                fallbacks += sel.fallbacks
                calls += sel.calls
                for key in ("tokens_saved", "stopped", "parse_failures", "dropped"):
                    if key in sel.detail:
                        extras[key] = extras.get(key, 0.0) + w * float(sel.detail[key])
            done += len(pools)
            if progress is not None:
                progress(f"{method}@{n}", done, total)
            norm = max(weight_sum, 1e-12)
            points.append(
                MethodPoint(
                    method=method,
                    n=n,
                    accuracy=acc / norm,
                    tokens=tokens / norm,
                    draws=max(len(subsets(pool_size, n, cfg.draws, cfg.seed, "x")), 1),
                    picks=picks,
                    no_answer=no_answer,
                    fallbacks=fallbacks,
                    selector_calls=calls,
                    extra={f"{k}_per_task": v / norm for k, v in extras.items()},
                )
            )
        out[method] = points
    return out


def oracle_points(
    pools: Sequence[TaskPool], ns: Sequence[int], draws: int, seed: int
) -> list[dict[str, float]]:
    """pass@N on the same subsets (some sample is correct): the ceiling of any selector."""
    pool_size = max((len(p.candidates) for p in pools), default=0)
    rows = []
    for n in sorted({n for n in ns if n <= pool_size}):
        acc = weight = 0.0
        for pool in pools:
            subs = subsets(len(pool.candidates), n, draws, seed, pool.task.id)
            for idx in subs:
                acc += any(pool.candidates[i].correct for i in idx) / len(subs)
                weight += 1 / len(subs)
        rows.append({"n": n, "pass_at_n": acc / max(weight, 1e-12)})
    return rows
