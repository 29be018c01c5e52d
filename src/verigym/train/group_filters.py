"""Which groups an RL batch keeps and which tasks it samples: the filters on scored groups.

- Dynamic sampling (DAPO, Yu et al. 2025, arXiv:2503.14476): ``has_signal`` drops groups whose rewards
  are all equal (they carry no gradient under a group baseline); the producer keeps sampling until the
  batch is full.
- Difficulty filtering: ``DifficultyTracker`` keeps tasks whose recent pass rate lies in a band (the
  lectures' "train on meaningfully difficult tasks"; Polaris / Skywork-OR1 offline filtering, here
  online).

The reward shaping that used to sit beside them (soft overlong punishment, token cost, GRPO-LEAD's
length reward) is in ``shaping``; the old module ``sampling`` re-exports both until verigym 0.3.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["DifficultyTracker", "has_signal"]


def has_signal(rewards: Sequence[float], tol: float = 1e-9) -> bool:
    """True when a group's rewards are not all equal (0 < #correct < G for a binary reward)."""
    return len(rewards) > 1 and (max(rewards) - min(rewards)) > tol


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
