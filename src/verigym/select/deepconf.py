"""DeepConf: confidence-filtered, confidence-weighted voting (offline) and early stopping of
low-confidence traces during generation (online).

Reference: Fu, Wang, Tian, Zhao, "Deep Think with Confidence" (DeepConf), 2025.

* Token confidence: ``C_t = −(1/k) Σ_{j≤k} log P_t(j)`` over the top-k logprobs at position t
  (k = 20 by default; fewer when the policy returned fewer). High = confident.
* Group confidence: the mean of C over a sliding window of ``w`` tokens ending at each position
  ``i ≥ w``. The paper uses w = 2048 on traces of ~10k+ tokens. Short outputs get a smaller
  window (``choose_window``): w = min(2048, max(1, ⌊fraction · median trace length⌋)),
  fraction = 1/4, chosen once per task so that every trace of the task is scored with the
  same window (scores are only comparable under one window). A trace shorter than w is one
  group (its mean confidence).
* Trace scores: ``lowest`` (the minimum group confidence), ``bottom10`` (mean of the lowest
  10% of groups), ``tail`` (mean token confidence of the last w tokens), ``mean`` (the whole
  trace, a self-certainty baseline).
* Offline: keep the traces whose score is among the top η (η = 0.1 "DeepConf-low" or 0.9
  "DeepConf-high"; ties at the cut are kept), then vote with the scores as weights.
* Online (``OnlineDeepConf``, in ``verigym.select._online``): warm-up traces set the threshold;
  each later trace stops as soon as its window confidence falls below it.
"""

from __future__ import annotations

from collections.abc import Sequence

from verigym.select._common import Candidate, Selection
from verigym.select._confidence import (
    DEFAULT_FRACTION,
    DEFAULT_K,
    DEFAULT_WINDOW,
    TraceScore,
    choose_window,
    group_confidences,
    keep_top,
    token_confidences,
    trace_score,
)
from verigym.select._online import OnlineDeepConf, select_online
from verigym.select.majority import select_majority, weighted_vote
from verigym.select.methods import SelectContext, default_warmup, register_method
from verigym.types import Task

__all__ = [
    "DEFAULT_FRACTION",
    "DEFAULT_K",
    "DEFAULT_WINDOW",
    "OnlineDeepConf",
    "TraceScore",
    "choose_window",
    "group_confidences",
    "keep_top",
    "select_deepconf",
    "select_online",
    "token_confidences",
    "trace_score",
]


def select_deepconf(
    candidates: Sequence[Candidate],
    *,
    eta: float = 0.1,
    score: TraceScore = "lowest",
    window: int = DEFAULT_WINDOW,
    fraction: float = DEFAULT_FRACTION,
    k: int = DEFAULT_K,
) -> Selection:
    """DeepConf offline: score every trace that has an answer, keep the top η, vote with the
    scores as weights. Traces without an answer cannot vote and are not ranked.

    Raises ``ValueError`` when no candidate carries top-k logprobs (sample with
    ``Sampling(logprobs=True, top_logprobs=k)``). A task whose answered candidates all lack
    logprobs falls back to a plain majority vote, reported in ``fallbacks``.
    """
    if candidates and all(c.top_logprobs is None for c in candidates):
        raise ValueError("DeepConf needs top-k logprobs: sample with Sampling(logprobs=True, top_logprobs=k)")
    voters = [c for c in candidates if c.answer is not None and c.top_logprobs]
    if not voters:
        sel = select_majority(candidates)
        sel.method = "deepconf"
        sel.fallbacks = 1 if any(c.answer is not None for c in candidates) else 0
        return sel
    confs = [token_confidences(c.top_logprobs or (), k) for c in voters]
    w = choose_window([len(c) for c in confs], window, fraction)
    scores = [trace_score(c, w, score) for c in confs]
    kept = keep_top(scores, eta)
    answers = [c.answer if keep else None for c, keep in zip(voters, kept, strict=True)]
    weights = [s if (keep and s is not None) else 0.0 for s, keep in zip(scores, kept, strict=True)]
    vote = weighted_vote(answers, weights)
    index = None if vote.position is None else voters[vote.position].index
    return Selection(
        index=index,
        answer=vote.answer,
        method="deepconf",
        detail={"window": w, "kept": sum(kept), "voters": len(voters), "tally": vote.tally},
    )


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


register_method("deepconf", _deepconf, needs_logprobs=True)
register_method("deepconf-online", _deepconf_online, needs_logprobs=True, tokens=_replayed_tokens)
