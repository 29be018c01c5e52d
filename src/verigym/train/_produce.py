"""The producer side of the RL loop: pick tasks from a weighted mix of environments, sample and
score groups, drop errored samples, apply dynamic sampling and difficulty filtering. Dynamic
sampling keeps a group whose rewards are all equal when a teacher term still teaches on it
(``rl.distill``, ``distill.teaches``).

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

import torch

from verigym.envs.base import Environment
from verigym.policies.base import Policy
from verigym.runner import Scored, record_error, rollout_group
from verigym.train import exploration as X
from verigym.train.config import ConfigError, TrainConfig, schedule_value
from verigym.train.distill import teaches
from verigym.train.group_filters import DifficultyTracker, has_signal
from verigym.train.rewards import Group, Sample, StepBatch
from verigym.train.samples import NotTrainable, trajectory_sequences
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
        self.samples_total = 0  # every sample this producer scored, and how many errored
        self.samples_errored = 0
        self.first_error: str | None = None  # the first errored sample's reason
        gv = cfg.rl.group_variants
        if gv is not None and gv.tool_variant:
            from verigym.envs.tool import ToolEnv

            plain = [s.name for s in self.slots if not isinstance(s.env, ToolEnv)]
            if plain:
                raise ConfigError(
                    f"rl.group_variants.tool_variant: environment {plain[0]!r} has no tools to vary"
                )
        if cfg.rl.param_noise and getattr(policy, "model", None) is None:
            raise ConfigError("rl.param_noise: needs the in-process policy (not remote servers)")
        if cfg.rl.ranking_priority:
            names = {n for s in self.slots for n in s.env.rubric.names}
            unknown = [n for n in cfg.rl.ranking_priority if n not in names]
            if unknown:
                raise ConfigError(
                    f"rl.ranking_priority: unknown grader(s) {unknown}; the rubrics have {sorted(names)}"
                )

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
        sigma = schedule_value(self.cfg.rl.param_noise, step)
        if sigma <= 0:
            return await self._produce(step)
        gen = torch.Generator().manual_seed(derive_seed(self.cfg.seed, "noise", step))
        model = getattr(self.policy, "model", None)
        assert model is not None  # checked in __init__
        with X.parameter_noise(model, sigma, gen):
            batch = await self._produce(step)
        for group in batch.groups:  # π_old is the clean policy: recompute the logprobs under it
            for sample in group.samples:
                for row in sample.rows:
                    row.logprobs = None
        batch.stats["param_noise"] = sigma
        return batch

    async def _group(
        self, slot: EnvSlot, task: Task, sampling: Sampling, step: int, round_: int
    ) -> list[Scored]:
        """One group of ``task``: plain, or filled from its variants (``rl.group_variants``)."""
        rl = self.cfg.rl
        gv = rl.group_variants
        if gv is None:
            return await rollout_group(slot.env, self.policy, task, samples=rl.group_size, sampling=sampling)
        rng = random.Random(derive_seed(self.cfg.seed, "variants", step, round_, slot.name, task.id))
        parts: list[tuple[str, Environment, Task, int]] = []
        for _ in range(gv.rewrite):
            if gv.rewriter == "policy":
                seed = derive_seed(self.cfg.seed, "rewrite", step, round_, task.id, len(parts))
                ask = sampling.model_copy(update={"seed": seed, "max_tokens": 256, "logprobs": False})
                variant = await X.policy_rewrite(task, self.policy, ask)
            else:
                variant = X.rule_rewrite(task, rng)
            parts.append(
                ("plain", slot.env, task, 1) if variant is None else ("rewrite", slot.env, variant, 1)
            )
        for _ in range(gv.guide):
            parts.append(("guide", slot.env, X.guided(task, rng.choice(gv.guides)), 1))
        if gv.tool_variant:
            from verigym.envs.tool import ToolEnv, with_tool_variant

            seed = rng.choice(gv.tool_seeds) if gv.tool_seeds else rng.randrange(2**31)
            assert isinstance(slot.env, ToolEnv)
            parts.append(("tool_variant", with_tool_variant(slot.env, seed), task, gv.tool_variant))
        parts.append(("plain", slot.env, task, rl.group_size - gv.total))
        out: list[Scored] = []
        first = 0
        for name, env, t, count in parts:
            if count <= 0:
                continue
            scored = await rollout_group(
                env, self.policy, t, samples=count, sampling=sampling, first_index=first
            )
            for sc in scored:
                sc.trajectory.state["group_variant"] = name
                sc.trajectory.task_id = task.id
            out.extend(scored)
            first += count
        return out

    async def _produce(self, step: int) -> StepBatch:
        rl = self.cfg.rl
        t0 = time.perf_counter()
        kept: list[Group] = []
        pass_rates: dict[str, float] = {}
        taken: set[tuple[str, str]] = set()
        sampled = dropped_flat = dropped_small = errored = not_trainable = flat = 0
        step_error: str | None = None  # this step's first errored sample
        rounds = 0
        keep_rate = 1.0
        results_all: list[list[Scored]] = []
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
            results = await asyncio.gather(*(self._group(s, t, sampling, step, round_) for s, t in picks))
            results_all.extend(results)
            new = 0
            for (slot, task), scored in zip(picks, results, strict=True):
                sampled += 1
                samples: list[Sample] = []
                for sc in scored:
                    self.samples_total += 1
                    if (
                        sc.trajectory.error is not None
                        or sc.score.error is not None
                        or sc.score.reward is None
                    ):
                        errored += 1
                        self.samples_errored += 1
                        if step_error is None:
                            err = record_error(sc.trajectory, sc.score)
                            step_error = f"{err.kind}: {err.message}" if err else "no reward"
                            self.first_error = self.first_error or step_error
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
                flat += not has_signal(rewards)
                if rl.dynamic_sampling and not has_signal(rewards) and not teaches(self.cfg, step, rewards):
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
            "frac_groups_flat": flat / max(sampled, 1),  # all rewards equal, dropped or not
            "samples_errored": float(errored),
            "samples_total": float(sum(len(r) for r in results_all)),
            "samples_not_trainable": float(not_trainable),
            "sampling_rounds": float(rounds),
            "gen_time_s": time.perf_counter() - t0,
        }
        if step_error is not None:
            stats["first_error"] = step_error  # type: ignore[assignment]  # logged with the step, not a number
        return StepBatch(step=step, groups=kept, stats=stats, task_pass_rates=pass_rates)
