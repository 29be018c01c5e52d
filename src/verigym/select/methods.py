"""Selection methods as registered parts: the ``Selector`` protocol and the one registry of methods.

A selector is ``async (task, candidates, ctx) -> Selection``: it picks among one task's
``candidates`` (in sample order) with the knobs and the judge in ``ctx`` (a ``SelectContext``). A
``Method`` is a selector under a name, with what it needs (top-k logprobs, a judge policy) and how
the tokens it spent are counted. ``verigym select`` (its ``--method`` list, help and errors) and
``verigym.select.run.measure`` both read ``METHODS``; adding a method is one
``register_method(...)`` call::

    async def select_first(task, candidates, ctx):  # the first sample that has an answer
        first = next((c for c in candidates if c.answer is not None), None)
        if first is None:
            return Selection(index=None, method="first")
        return Selection(index=first.index, answer=first.answer, method="first")

    register_method("first", select_first)

Built in: ``majority``, ``deepconf``, ``deepconf-online`` (replayed on full traces: its tokens are the
ones an online run would have generated), ``genselect`` and ``best-of-n`` (a ``Grader`` when the
config has one, else the judge as a reward model).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from verigym.policies.base import Policy
from verigym.rubric import Grader
from verigym.select._common import Candidate, Selection
from verigym.select._confidence import TraceScore
from verigym.select.best_of_n import select_best_of_n_grader, select_best_of_n_reward_model
from verigym.select.deepconf import select_deepconf, select_online
from verigym.select.genselect import problem_text, select_genselect
from verigym.select.majority import select_majority
from verigym.types import Sampling, Task

__all__ = [
    "METHODS",
    "Method",
    "SelectConfig",
    "SelectContext",
    "Selector",
    "default_warmup",
    "get_method",
    "method_names",
    "needs_judge",
    "needs_logprobs",
    "register_method",
    "spent_tokens",
]


@dataclass
class SelectConfig:
    """Knobs of the selection methods (defaults: the papers')."""

    methods: list[str] = field(default_factory=lambda: ["majority"])
    ns: list[int] = field(default_factory=lambda: [1, 4, 16, 64])
    draws: int = 4
    seed: int = 0
    eta: float = 0.1
    score: TraceScore = "lowest"
    window: int = 2048
    fraction: float = 0.25
    k: int = 20
    warmup: int | None = None
    genselect_window: int = 8
    judge_sampling: Sampling = field(default_factory=lambda: Sampling(temperature=0.0, max_tokens=256))
    success_threshold: float = 1.0
    grader: Grader | None = None  # best-of-n scores with this instead of a reward-model policy


@dataclass(frozen=True)
class SelectContext:
    """What a selector may use besides the candidates: the knobs, the judge policy, the draw's seed."""

    config: SelectConfig
    judge: Policy | None = None
    seed: int = 0

    def need_judge(self, method: str) -> Policy:
        """The judge, or ``ValueError`` for a method that cannot run without one."""
        if self.judge is None:
            raise ValueError(f"method {method!r} needs a selector policy")
        return self.judge


class Selector(Protocol):
    """``async (task, candidates, ctx) -> Selection``: pick one of ``candidates`` (or none)."""

    def __call__(
        self, task: Task, candidates: Sequence[Candidate], ctx: SelectContext
    ) -> Awaitable[Selection]: ...


def spent_tokens(candidates: Sequence[Candidate], selection: Selection) -> float:
    """The default token cost: every candidate's tokens plus what the selector itself read and wrote."""
    return float(sum(c.tokens for c in candidates)) + selection.usage.total_tokens


@dataclass(frozen=True)
class Method:
    """A registered selection method (see the module doc)."""

    name: str
    select: Selector
    needs_logprobs: bool = False  # sampling asks for top-k logprobs
    needs_judge: bool = False  # a judge policy (the sampled model unless another is named)
    tokens: Callable[[Sequence[Candidate], Selection], float] = spent_tokens


METHODS: dict[str, Method] = {}
"""The registry, in the order methods were registered (the order ``verigym select`` lists them)."""


def register_method(
    name: str,
    select: Selector,
    *,
    needs_logprobs: bool = False,
    needs_judge: bool = False,
    tokens: Callable[[Sequence[Candidate], Selection], float] = spent_tokens,
) -> Method:
    """Add (or replace) the method ``name``; returns its ``Method``."""
    method = Method(name, select, needs_logprobs=needs_logprobs, needs_judge=needs_judge, tokens=tokens)
    METHODS[name] = method
    return method


def method_names() -> tuple[str, ...]:
    """The registered methods' names, in registration order."""
    return tuple(METHODS)


def get_method(name: str) -> Method:
    """The method ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; expected one of {', '.join(METHODS)}") from None


def needs_logprobs(methods: Sequence[str]) -> bool:
    """Whether any of ``methods`` needs top-k logprobs (unknown names need nothing)."""
    return any(m in METHODS and METHODS[m].needs_logprobs for m in methods)


def needs_judge(methods: Sequence[str]) -> bool:
    """Whether any of ``methods`` needs a judge policy (unknown names need nothing)."""
    return any(m in METHODS and METHODS[m].needs_judge for m in methods)


def default_warmup(n: int) -> int:
    """DeepConf-online warm-up traces at budget N: the paper's 16, at most a quarter of N."""
    return min(16, max(1, n // 4))


# ---- the built-in methods ------------------------------------------------------------------------


async def _majority(task: Task, candidates: Sequence[Candidate], ctx: SelectContext) -> Selection:
    return select_majority(candidates)


async def _deepconf(task: Task, candidates: Sequence[Candidate], ctx: SelectContext) -> Selection:
    cfg = ctx.config
    return select_deepconf(
        candidates, eta=cfg.eta, score=cfg.score, window=cfg.window, fraction=cfg.fraction, k=cfg.k
    )


async def _deepconf_online(task: Task, candidates: Sequence[Candidate], ctx: SelectContext) -> Selection:
    cfg = ctx.config
    warm = cfg.warmup if cfg.warmup is not None else default_warmup(len(candidates))
    return select_online(
        candidates, warmup=warm, eta=cfg.eta, window=cfg.window, fraction=cfg.fraction, k=cfg.k
    )


def _replayed_tokens(candidates: Sequence[Candidate], selection: Selection) -> float:
    return float(selection.detail["tokens_used"])  # warm-up traces in full, the others up to their cut


async def _genselect(task: Task, candidates: Sequence[Candidate], ctx: SelectContext) -> Selection:
    judge = ctx.need_judge("genselect")
    cfg = ctx.config
    return await select_genselect(
        candidates,
        judge,
        problem_text(task),
        window=cfg.genselect_window,
        seed=ctx.seed,
        sampling=cfg.judge_sampling,
    )


async def _best_of_n(task: Task, candidates: Sequence[Candidate], ctx: SelectContext) -> Selection:
    cfg = ctx.config
    if cfg.grader is not None:
        trajectories = [c.meta["trajectory"] for c in candidates]
        return await select_best_of_n_grader(task, candidates, trajectories, cfg.grader, seed=ctx.seed)
    judge = ctx.need_judge("best-of-n")
    return await select_best_of_n_reward_model(
        candidates, judge, problem_text(task), seed=ctx.seed, sampling=cfg.judge_sampling
    )


register_method("majority", _majority)
register_method("deepconf", _deepconf, needs_logprobs=True)
register_method("deepconf-online", _deepconf_online, needs_logprobs=True, tokens=_replayed_tokens)
register_method("genselect", _genselect, needs_judge=True)
register_method("best-of-n", _best_of_n, needs_judge=True)
