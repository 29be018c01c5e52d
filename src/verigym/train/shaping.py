"""Reward shaping on sample lengths, added to the verified reward before advantages (``rewards``).

- Soft overlong punishment (DAPO, Yu et al. 2025, arXiv:2503.14476): ``soft_overlong``; the formula
  lives in ``verigym.graders.length``.
- GRPO-LEAD length-dependent accuracy reward (Zhang & Zuo 2025, arXiv:2504.09696, authors' code):
  ``lead_length_rewards``.
- Token cost: ``token_cost``, a per-token penalty that prices length directly.

Truncated samples (masked out of the loss, DAPO's overlong filtering, or penalised, Skywork-OR1's
choice, arXiv:2505.22312) are handled in ``rewards``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from verigym.train.advantages import _dense, _group_sum

__all__ = ["lead_length_rewards", "soft_overlong", "token_cost"]


def soft_overlong(lengths: Sequence[int], max_len: int, cache_len: int) -> list[float]:
    """DAPO soft overlong punishment per sample (≤ 0), added to the correctness reward."""
    from verigym.graders.length import soft_overlong_penalty

    return [float(soft_overlong_penalty(n, max_len, cache_len)) for n in lengths]


def token_cost(lengths: Sequence[int], cost: float) -> list[float]:
    """−cost · length per sample."""
    return [-cost * n for n in lengths]


def lead_length_rewards(lengths: Tensor, correct: Tensor, groups: Tensor, *, alpha: float = 0.05) -> Tensor:
    """GRPO-LEAD length-dependent accuracy reward, (N,) from lengths, correct (bool) and groups (N,).

    For a correct output, z = (|y| − μ) / (σ + 1e-6) with μ, σ the mean and (population) std of
    the lengths of the group's correct outputs, and the reward is exp(−α z): shorter correct
    answers earn more. Incorrect or malformed outputs get −1 (an explicit penalty).
    """
    idx, k = _dense(groups)
    c = correct.to(torch.float64)
    n = lengths.to(torch.float64)
    count = _group_sum(c, idx, k).clamp(min=1)
    mu = _group_sum(n * c, idx, k) / count
    var = _group_sum(((n - mu[idx]) ** 2) * c, idx, k) / count
    z = (n - mu[idx]) / (var.sqrt()[idx] + 1e-6)
    return torch.where(correct.bool(), torch.exp(-alpha * z), torch.full_like(n, -1.0))
