"""Task difficulty: pass-rate profiles, band filters, online updates and variance ranking.

Training data must be meaningfully difficult: a task with pass rate 0 gives no positive
signal and one with pass rate 1 no negative signal (seed lectures; DAPO's dynamic sampling).
A ``Profile`` maps task ids to an estimated pass rate from k samples each; the RL loop can
read one to choose tasks in a band and update it from its own groups.

1-shot RLVR (Wang et al. 2025, "Reinforcement Learning for Reasoning in Large Language
Models with One Training Example") ranks training examples by the variance of their
historical training accuracy; ``rank_by_variance`` does that from a run's history.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verigym._files import open_atomic
from verigym.types import Record

__all__ = ["Profile", "TaskStats", "rank_by_variance"]


@dataclass
class TaskStats:
    passes: float = 0.0
    samples: int = 0

    @property
    def pass_rate(self) -> float:
        return self.passes / self.samples if self.samples else float("nan")


@dataclass
class Profile:
    """Per-task pass-rate estimates. ``decay`` < 1 weights recent observations more (online use)."""

    tasks: dict[str, TaskStats] = field(default_factory=dict)
    decay: float = 1.0

    @classmethod
    def from_records(
        cls, records: Iterable[Record | Mapping[str, Any]], *, threshold: float = 1.0
    ) -> Profile:
        """Estimate from results records (typed ``Record``s or their JSON form: ``task_id``,
        ``score.reward``); errored samples (no reward) are skipped."""
        profile = cls()
        for rec in records:
            if isinstance(rec, Record):
                task_id, reward = rec.task_id, rec.score.reward
            else:
                task_id, reward = rec["task_id"], (rec.get("score") or {}).get("reward")
            if reward is not None:
                profile.observe(str(task_id), [reward >= threshold - 1e-9])
        return profile

    def observe(self, task_id: str, passed: Sequence[bool]) -> None:
        """Fold one group of verdicts for ``task_id`` into the estimate."""
        stats = self.tasks.setdefault(task_id, TaskStats())
        stats.passes = stats.passes * self.decay + sum(passed)
        stats.samples = round(stats.samples * self.decay) + len(passed)

    def pass_rate(self, task_id: str) -> float | None:
        stats = self.tasks.get(task_id)
        return stats.pass_rate if stats and stats.samples else None

    def in_band(self, low: float = 0.0, high: float = 1.0, *, inclusive: bool = False) -> list[str]:
        """Task ids whose pass rate lies in the band: open (low, high) by default — the
        "meaningfully difficult" tasks — or closed [low, high] with ``inclusive``."""
        out = []
        for task_id, stats in self.tasks.items():
            rate = stats.pass_rate
            if stats.samples and ((low <= rate <= high) if inclusive else (low < rate < high)):
                out.append(task_id)
        return sorted(out)

    def save(self, path: str | Path) -> None:
        """One JSON line per task: ``{"task_id", "pass_rate", "samples"}`` (written atomically)."""
        with open_atomic(path) as f:
            for task_id in sorted(self.tasks):
                s = self.tasks[task_id]
                f.write(
                    json.dumps({"task_id": task_id, "pass_rate": s.pass_rate, "samples": s.samples}) + "\n"
                )

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        """Read a profile written by ``save``; a bad line raises ``ValueError`` naming file:line."""
        profile = cls()
        for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                samples = int(row["samples"])
                profile.tasks[str(row["task_id"])] = TaskStats(
                    passes=float(row["pass_rate"]) * samples, samples=samples
                )
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"{path}:{lineno}: expected a JSON object with task_id, pass_rate, samples ({exc})"
                ) from None
        return profile


def rank_by_variance(
    history: Mapping[str, Sequence[float]], *, top: int | None = None, use_std: bool = False
) -> list[tuple[str, float]]:
    """Tasks ranked by the (population) variance of their accuracy over training, highest first.

    ``history`` maps task id → accuracy at each step the task was sampled. Ties break by task id.
    """
    scored = []
    for task_id, accs in history.items():
        if len(accs) < 2:
            continue
        value = statistics.pstdev(accs) if use_std else statistics.pvariance(accs)
        scored.append((task_id, value))
    scored.sort(key=lambda kv: (-kv[1], kv[0]))
    return scored[:top] if top is not None else scored
