"""The producer side of the RL loop: pick tasks from a weighted mix of environments, sample and
score groups, drop errored samples, apply dynamic sampling and difficulty filtering.

Everything random is derived from ``(seed, step, round)``, never from global state, so a resumed
run samples exactly what an uninterrupted one would.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from verigym.envs.base import Environment
from verigym.policies.base import Policy
from verigym.runner import rollout_group
from verigym.train._rewards import Group, Sample, StepBatch
from verigym.train.config import TrainConfig, schedule_value
from verigym.train.samples import NotTrainable, trajectory_sequences
from verigym.train.sampling import DifficultyTracker, has_signal
from verigym.types import Sampling, Task

__all__ = ["EnvSlot", "Producer", "derive_seed"]


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from any parts."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


@dataclass
class EnvSlot:
    name: str
    env: Environment
    weight: float | list[tuple[int, float]]
    tasks: list[Task]


class Producer:
    """Makes one ``StepBatch`` of scored groups per step."""

    def __init__(
        self, slots: Sequence[EnvSlot], policy: Policy, cfg: TrainConfig, tracker: DifficultyTracker
    ) -> None:
        if not slots:
            raise ValueError("training needs at least one environment")
        for s in slots:
            if not s.tasks:
                raise ValueError(f"environment {s.name!r} has no training tasks")
        self.slots = list(slots)
        self.policy = policy
        self.cfg = cfg
        self.tracker = tracker

    def _pick(
        self, step: int, round_: int, k: int, taken: set[tuple[str, str]]
    ) -> list[tuple[EnvSlot, Task]]:
        rng = random.Random(derive_seed(self.cfg.seed, "pick", step, round_))
        weights = [max(schedule_value(s.weight, step), 0.0) for s in self.slots]
        if sum(weights) <= 0:
            raise ValueError(f"every environment weight is 0 at step {step}")
        out: list[tuple[EnvSlot, Task]] = []
        for _ in range(k):
            for attempt in range(32):
                slot = rng.choices(self.slots, weights)[0]
                task = slot.tasks[rng.randrange(len(slot.tasks))]
                key = (slot.name, task.id)
                if key in taken:
                    continue
                if attempt < 16 and not self.tracker.keep(f"{slot.name}/{task.id}"):
                    continue
                taken.add(key)
                out.append((slot, task))
                break
        return out

    async def produce(self, step: int) -> StepBatch:
        rl = self.cfg.rl
        t0 = time.perf_counter()
        kept: list[Group] = []
        pass_rates: dict[str, float] = {}
        taken: set[tuple[str, str]] = set()
        sampled = dropped_flat = dropped_small = errored = not_trainable = 0
        rounds = 0
        keep_rate = 1.0
        for round_ in range(rl.max_rounds if rl.dynamic_sampling else 1):
            missing = rl.groups_per_step - len(kept)
            if missing <= 0:
                break
            rounds += 1
            ask = (
                missing
                if round_ == 0
                else min(math.ceil(missing / max(keep_rate, 0.25)), 2 * rl.groups_per_step)
            )
            picks = self._pick(step, round_, ask, taken)
            sampling = Sampling(
                temperature=self.cfg.sampling.temperature,
                top_p=self.cfg.sampling.top_p,
                max_tokens=self.cfg.sampling.max_tokens,
                seed=derive_seed(self.cfg.seed, "sample", step, round_),
                logprobs=True,
            )
            results = await asyncio.gather(
                *(
                    rollout_group(s.env, self.policy, t, samples=rl.group_size, sampling=sampling)
                    for s, t in picks
                )
            )
            new = 0
            for (slot, task), scored in zip(picks, results, strict=True):
                sampled += 1
                samples: list[Sample] = []
                for sc in scored:
                    if (
                        sc.trajectory.error is not None
                        or sc.score.error is not None
                        or sc.score.reward is None
                    ):
                        errored += 1
                        continue
                    try:
                        samples.append(Sample(sc, trajectory_sequences(sc.trajectory)))
                    except NotTrainable:
                        not_trainable += 1
                if len(samples) < 2:
                    dropped_small += 1
                    continue
                rewards = [s.reward for s in samples]
                rate = sum(r >= 1.0 for r in rewards) / len(rewards)
                self.tracker.record(f"{slot.name}/{task.id}", rate)
                pass_rates[f"{slot.name}/{task.id}"] = rate
                if rl.dynamic_sampling and not has_signal(rewards):
                    dropped_flat += 1
                    continue
                weights = {g.name: g.weight for g in slot.env.rubric.graders}
                if len(kept) < rl.groups_per_step:
                    kept.append(Group(slot.name, task, samples, weights))
                    new += 1
            keep_rate = new / max(len(picks), 1)
        stats = {
            "groups": float(len(kept)),
            "groups_sampled": float(sampled),
            "frac_groups_dropped": (dropped_flat + dropped_small) / max(sampled, 1),
            "frac_groups_zero_var": dropped_flat / max(sampled, 1),
            "samples_errored": float(errored),
            "samples_not_trainable": float(not_trainable),
            "sampling_rounds": float(rounds),
            "gen_time_s": time.perf_counter() - t0,
        }
        return StepBatch(step=step, groups=kept, stats=stats, task_pass_rates=pass_rates)
