"""Sampling-side recipes: which groups to keep, which tasks to sample, and reward shaping.

- Dynamic sampling (DAPO, Yu et al. 2025, arXiv:2503.14476): drop groups whose rewards are all
  equal — they carry no gradient under a group baseline — and keep sampling until the batch is full.
- Difficulty filtering: keep tasks whose recent pass rate lies in a band (the lectures' "train on
  meaningfully difficult tasks"; Polaris / Skywork-OR1 offline filtering, here online).
- Soft overlong punishment (DAPO) — the formula lives in ``verigym.graders.length``.
- Truncation: mask truncated samples out of the loss (DAPO overlong filtering) or penalise them
  (Skywork-OR1, arXiv:2505.22312, prefers the penalty).
- GRPO-LEAD length-dependent accuracy reward (Zhang & Zuo 2025, arXiv:2504.09696, authors' code).
- Token cost: a per-token penalty that prices length directly.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from verigym.train.advantages import _dense, _group_sum

__all__ = [
    "DifficultyTracker",
    "has_signal",
    "lead_length_rewards",
    "soft_overlong",
    "token_cost",
]


def has_signal(rewards: Sequence[float], tol: float = 1e-9) -> bool:
    """True when a group's rewards are not all equal (0 < #correct < G for a binary reward)."""
    return len(rewards) > 1 and (max(rewards) - min(rewards)) > tol


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


@dataclass
class DifficultyTracker:
    """Pass rates of tasks over their most recent ``window`` groups.

    ``keep(task_id)`` is True for tasks never seen and for tasks whose estimated pass rate lies in
    ``[low, high]``; set ``low`` just above 0 and ``high`` just below 1 to skip tasks that are
    always failed or always solved.
    """

    low: float = 0.0
    high: float = 1.0
    window: int = 4
    _history: dict[str, deque[float]] = field(default_factory=lambda: defaultdict(deque))

    def record(self, task_id: str, pass_rate: float) -> None:
        h = self._history[task_id]
        h.append(pass_rate)
        while len(h) > self.window:
            h.popleft()

    def pass_rate(self, task_id: str) -> float | None:
        h = self._history.get(task_id)
        return sum(h) / len(h) if h else None

    def keep(self, task_id: str) -> bool:
        rate = self.pass_rate(task_id)
        return rate is None or self.low <= rate <= self.high

    def state_dict(self) -> dict[str, list[float]]:
        return {k: list(v) for k, v in self._history.items()}

    def load_state_dict(self, state: dict[str, list[float]]) -> None:
        self._history = defaultdict(deque, {k: deque(v) for k, v in state.items()})
