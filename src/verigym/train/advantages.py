"""Advantage estimators of the GRPO family, as small pure functions of tensors.

Every function takes ``rewards`` of shape (N,) (one scalar per sample) and ``groups`` of shape
(N,) (an integer group id per sample: the samples of one task share an id; ids need not be
contiguous) and returns advantages of shape (N,) to broadcast over each sample's tokens.
Groups may have different sizes (errored samples are dropped before, never scored 0).

References (formulas in ``reference/rl-algorithms.md``):
- GRPO: Shao et al. 2024, "DeepSeekMath" (arXiv:2402.03300). std is Bessel-corrected (TRL, verl).
- Dr. GRPO: Liu et al. 2025, "Understanding R1-Zero-Like Training" (arXiv:2503.20783).
- RLOO: Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE..." (arXiv:2402.14740).
- OPO: Hao et al. 2025, "On-Policy RL with Optimal Reward Baseline" (arXiv:2505.23585).
- REINFORCE++-baseline: Hu 2025, "REINFORCE++" (arXiv:2501.03262); verl ``compute_reinforce_plus_plus_baseline``.
- Batch scaling / multi-objective aggregation: TRL ``GRPOConfig.scale_rewards`` and
  ``multi_objective_aggregation`` (trl/trainer/grpo_trainer.py, ``_generate_and_score_completions``).
- GRPO-LEAD difficulty weights: Zhang & Zuo 2025, "GRPO-LEAD" (arXiv:2504.09696), authors' code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import torch
from torch import Tensor

__all__ = [
    "AdvantageEstimator",
    "GraderAggregation",
    "Scale",
    "batch_whiten",
    "combine_graders",
    "compute_advantages",
    "dr_grpo",
    "grade_matrix",
    "group_mean",
    "group_std",
    "grpo",
    "lead_difficulty_weights",
    "opo",
    "reinforce_pp_baseline",
    "rloo",
]

AdvantageEstimator = Literal["grpo", "dr_grpo", "rloo", "opo", "reinforce_pp_baseline"]
Scale = Literal["group", "batch", "none"]
GraderAggregation = Literal["sum_then_normalize", "normalize_then_sum"]


def _dense(groups: Tensor) -> tuple[Tensor, int]:
    """Map arbitrary group ids (N,) to 0..K-1 (N,), and K."""
    uniq, inverse = torch.unique(groups, return_inverse=True)
    return inverse, int(uniq.numel())


def _group_sum(values: Tensor, idx: Tensor, k: int) -> Tensor:
    # values (N,) -> (K,)
    return torch.zeros(k, dtype=values.dtype, device=values.device).index_add_(0, idx, values)


def group_mean(values: Tensor, groups: Tensor, weights: Tensor | None = None) -> Tensor:
    """Each sample's group mean, (N,). With ``weights`` (N,): the weighted mean Σ w v / Σ w."""
    idx, k = _dense(groups)
    w = torch.ones_like(values) if weights is None else weights.to(values.dtype)
    total = _group_sum(values * w, idx, k)
    norm = _group_sum(w, idx, k).clamp(min=torch.finfo(values.dtype).tiny)
    return (total / norm)[idx]


def group_std(values: Tensor, groups: Tensor) -> Tensor:
    """Each sample's Bessel-corrected group std, (N,); 0 for a group of one."""
    idx, k = _dense(groups)
    count = _group_sum(torch.ones_like(values), idx, k)
    mean = _group_sum(values, idx, k) / count
    sq = _group_sum((values - mean[idx]) ** 2, idx, k)
    var = torch.where(count > 1, sq / (count - 1).clamp(min=1), torch.zeros_like(sq))
    return var.sqrt()[idx]


def _batch_std(values: Tensor) -> Tensor:
    if values.numel() < 2:
        return torch.zeros((), dtype=values.dtype, device=values.device)
    return values.std(unbiased=True)


def grpo(rewards: Tensor, groups: Tensor, *, scale: Scale = "group", eps: float = 1e-6) -> Tensor:
    """GRPO: A_i = (r_i − mean_g(r)) / (std + ε), std of the group, of the batch, or none (→ Dr. GRPO)."""
    centered = rewards - group_mean(rewards, groups)
    if scale == "none":
        return centered
    std = group_std(rewards, groups) if scale == "group" else _batch_std(rewards).expand_as(rewards)
    return centered / (std + eps)


def dr_grpo(rewards: Tensor, groups: Tensor) -> Tensor:
    """Dr. GRPO: A_i = r_i − mean_g(r) (no division by the std, which biases toward easy/hard groups)."""
    return grpo(rewards, groups, scale="none")


def rloo(rewards: Tensor, groups: Tensor) -> Tensor:
    """RLOO: A_i = r_i − mean of the other samples of the group; 0 for a group of one."""
    idx, k = _dense(groups)
    count = _group_sum(torch.ones_like(rewards), idx, k)[idx]
    total = _group_sum(rewards, idx, k)[idx]
    loo = (total - rewards) / (count - 1).clamp(min=1)
    return torch.where(count > 1, rewards - loo, torch.zeros_like(rewards))


def opo(rewards: Tensor, groups: Tensor, lengths: Tensor) -> Tensor:
    """OPO optimal baseline: b = Σ|o_i| r_i / Σ|o_i| over the group; A_i = r_i − b.

    ``lengths`` (N,) are the response lengths in tokens. Pair with exact on-policy training.
    """
    return rewards - group_mean(rewards, groups, weights=lengths.to(rewards.dtype).clamp(min=1))


def batch_whiten(values: Tensor, *, eps: float = 1e-6, weights: Tensor | None = None) -> Tensor:
    """(v − mean) / (std + ε) over the whole batch; token-weighted when ``weights`` (N,) are lengths."""
    if weights is None:
        return (values - values.mean()) / (_batch_std(values) + eps)
    w = weights.to(values.dtype)
    mean = (values * w).sum() / w.sum()
    var = (w * (values - mean) ** 2).sum() / (w.sum() - 1).clamp(min=1)
    return (values - mean) / (var.sqrt() + eps)


def reinforce_pp_baseline(
    rewards: Tensor, groups: Tensor, *, eps: float = 1e-6, lengths: Tensor | None = None
) -> Tensor:
    """REINFORCE++-baseline: subtract the group mean, then whiten over the whole batch.

    verl whitens over tokens; pass ``lengths`` for that (each sample counts once per token).
    """
    return batch_whiten(rewards - group_mean(rewards, groups), eps=eps, weights=lengths)


def compute_advantages(
    estimator: AdvantageEstimator,
    rewards: Tensor,
    groups: Tensor,
    *,
    lengths: Tensor | None = None,
    scale: Scale = "group",
    eps: float = 1e-6,
) -> Tensor:
    """Dispatch by name. ``scale`` applies to ``grpo`` only (``dr_grpo`` is ``grpo`` with ``none``)."""
    if estimator == "grpo":
        return grpo(rewards, groups, scale=scale, eps=eps)
    if estimator == "dr_grpo":
        return dr_grpo(rewards, groups)
    if estimator == "rloo":
        return rloo(rewards, groups)
    if estimator == "opo":
        if lengths is None:
            raise ValueError("opo needs the response lengths")
        return opo(rewards, groups, lengths)
    if estimator == "reinforce_pp_baseline":
        return reinforce_pp_baseline(rewards, groups, eps=eps, lengths=lengths)
    raise ValueError(f"unknown advantage estimator {estimator!r}")


def lead_difficulty_weights(
    advantages: Tensor,
    groups: Tensor,
    correct: Tensor,
    *,
    low: float = 0.4,
    high: float = 1.5,
    x0: float = 0.75,
    k: float = 10.0,
) -> Tensor:
    """GRPO-LEAD: reweight advantages by problem difficulty.

    ρ_q = group accuracy (mean of ``correct`` (N,) in the group);
    w(x) = low + (high − low) / (1 + exp(k (x − x0)));
    Â = A·w(ρ_q) where A > 0 (rare successes on hard problems count more),
    Â = A·w(1 − ρ_q) otherwise (failures on easy problems count more).
    """
    rho = group_mean(correct.to(advantages.dtype), groups)

    def w(x: Tensor) -> Tensor:
        return low + (high - low) / (1 + torch.exp(k * (x - x0)))

    return torch.where(advantages > 0, advantages * w(rho), advantages * w(1 - rho))


def combine_graders(
    grades: Tensor,
    weights: Tensor,
    groups: Tensor,
    *,
    mode: GraderAggregation = "sum_then_normalize",
    eps: float = 1e-4,
) -> Tensor:
    """Combine a grader matrix ``grades`` (N, K) with ``weights`` (K,) into one reward per sample (N,).

    ``sum_then_normalize``: r = Σ_k w_k g_k (the advantage estimator normalises afterwards).
    ``normalize_then_sum``: each grader is normalised within its group, (g_k − mean)/(std + ε),
    then weighted and summed (TRL ``multi_objective_aggregation``), so that a grader with a large
    scale cannot drown the others; TRL then whitens the result over the batch (``batch_whiten``).
    """
    if mode == "sum_then_normalize":
        return (grades * weights.to(grades.dtype)).sum(dim=1)
    if mode == "normalize_then_sum":
        cols = [
            (grades[:, j] - group_mean(grades[:, j], groups)) / (group_std(grades[:, j], groups) + eps)
            for j in range(grades.shape[1])
        ]
        return (torch.stack(cols, dim=1) * weights.to(grades.dtype)).sum(dim=1)
    raise ValueError(f"unknown grader aggregation {mode!r}")


def grade_matrix(rows: Sequence[Mapping[str, float]], names: Sequence[str]) -> Tensor:
    """(N, K) float64 tensor of per-grader scores; a grader absent from a row counts 0."""
    return torch.tensor([[float(r.get(n, 0.0)) for n in names] for r in rows], dtype=torch.float64)
