"""From scored groups to rows with advantages: grader weights, shaping, advantages, metrics.

Errored samples never get here (the producer drops them and counts them). The rubric's reward
defines correctness (reward ≥ 1, the eval's success threshold); shaping terms are added on top.
With ``rl.ranking``, the rank score of each sample on the grader vector (``train.ranking``)
replaces the weighted reward before shaping; the advantage estimator then sees rank scores.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from verigym.runner import Scored
from verigym.train import advantages as A
from verigym.train import ranking as R
from verigym.train.config import TrainConfig, schedule_value
from verigym.train.samples import Row
from verigym.train.shaping import lead_length_rewards, soft_overlong, token_cost
from verigym.types import Task

__all__ = ["Group", "Sample", "StepBatch", "assign_advantages"]

SUCCESS = 1.0


@dataclass
class Sample:
    scored: Scored
    rows: list[Row]

    @property
    def length(self) -> int:
        return sum(len(c.completion_token_ids or ()) for c in self.scored.trajectory.completions)

    @property
    def truncated(self) -> bool:
        t = self.scored.trajectory
        return t.stop_reason in ("length", "max_tokens") or any(
            c.finish_reason == "length" for c in t.completions
        )

    @property
    def reward(self) -> float:
        r = self.scored.score.reward
        return math.nan if r is None else float(r)

    @property
    def variant(self) -> str | None:
        """The task variant this sample saw (``rl.group_variants``), None for a plain group."""
        v = self.scored.trajectory.state.get("group_variant")
        return None if v is None else str(v)


@dataclass
class Group:
    """The valid samples of one task (errored ones already dropped)."""

    env: str
    task: Task
    samples: list[Sample]
    grader_weights: dict[str, float]


@dataclass
class StepBatch:
    step: int
    groups: list[Group]
    stats: dict[str, float] = field(default_factory=dict)
    # pass rate of every group sampled this step, kept or dropped ("env/task_id" -> rate)
    task_pass_rates: dict[str, float] = field(default_factory=dict)


def assign_advantages(
    batch: StepBatch, cfg: TrainConfig, *, generator: torch.Generator
) -> tuple[list[Row], dict[str, float]]:
    """Set ``row.advantage`` on every row of the batch; returns the rows and reward metrics."""
    rl = cfg.rl
    samples: list[Sample] = []
    gids: list[int] = []
    envs: list[str] = []
    for g_index, group in enumerate(batch.groups):
        for s in group.samples:
            samples.append(s)
            gids.append(g_index)
            envs.append(group.env)
    if not samples:
        return [], {}
    groups = torch.tensor(gids)
    rubric_r = torch.tensor([s.reward for s in samples], dtype=torch.float64)
    lengths = torch.tensor([s.length for s in samples], dtype=torch.float64)
    correct = rubric_r >= SUCCESS
    truncated = torch.tensor([s.truncated for s in samples])
    names = sorted({n for s in samples for n in s.scored.score.grades if not n.startswith("penalty:")})
    grades = A.grade_matrix([{n: g.score for n, g in s.scored.score.grades.items()} for s in samples], names)

    reward = rubric_r.clone()
    penalty = torch.tensor([s.scored.score.penalty for s in samples], dtype=torch.float64)
    if rl.grader_weights or rl.grader_aggregation == "normalize_then_sum" or rl.ranking != "none":
        base_w = {n: w for g in batch.groups for n, w in g.grader_weights.items()}
        w = torch.tensor(
            [
                schedule_value(rl.grader_weights[n], batch.step)
                if n in rl.grader_weights
                else base_w.get(n, 1.0)
                for n in names
            ],
            dtype=torch.float64,
        )
        if rl.ranking != "none":
            order = R.priority_order(names, w.tolist(), rl.ranking_priority)
            reward = R.rank_scores(rl.ranking, grades[:, order], groups, penalty=penalty)
        else:
            reward = A.combine_graders(grades, w, groups, mode=rl.grader_aggregation) - penalty
    if rl.lead_length_reward:
        reward = lead_length_rewards(lengths, correct, groups, alpha=rl.lead_alpha)
    max_tokens = cfg.sampling.max_tokens
    if rl.overlong_buffer > 0:
        cache = (
            int(rl.overlong_buffer)
            if rl.overlong_buffer >= 1
            else max(1, round(rl.overlong_buffer * max_tokens))
        )
        reward = reward + torch.tensor(
            soft_overlong([int(n) for n in lengths], max_tokens, min(cache, max_tokens))
        )
    if rl.token_cost:
        reward = reward + torch.tensor(
            token_cost([int(n) for n in lengths], rl.token_cost), dtype=torch.float64
        )
    if rl.truncation == "penalty":
        reward = torch.where(truncated, torch.full_like(reward, rl.truncation_penalty), reward)
    if rl.shuffle_rewards:
        reward = reward[torch.randperm(len(reward), generator=generator)]

    if rl.grader_aggregation == "normalize_then_sum":
        adv = A.batch_whiten(reward, eps=1e-4)
    else:
        adv = A.compute_advantages(
            rl.advantage, reward, groups, lengths=lengths, scale=rl.scale_rewards, eps=rl.adv_eps
        )
    if rl.lead_difficulty:
        adv = A.lead_difficulty_weights(adv, groups, correct)

    rows: list[Row] = []
    adv_values = adv.tolist()  # one conversion, not a tensor index per sample; the same floats
    masked = truncated.tolist() if rl.truncation == "mask" else [False] * len(samples)
    for s, a, cut, ok in zip(samples, adv_values, masked, correct.tolist(), strict=True):
        variant = s.variant
        for r in s.rows:
            r.advantage = float(a)
            r.meta["passed"] = ok  # the verifier passed it (rl.distill.exclude_passed)
            if cut:
                r.mask = [0] * len(r.mask)
            if variant is not None:
                r.meta["variant"] = variant
            rows.append(r)
    return rows, _metrics(samples, envs, reward, rubric_r, grades, names, lengths, truncated, adv)


def _metrics(
    samples: Sequence[Sample],
    envs: Sequence[str],
    reward: torch.Tensor,
    rubric_r: torch.Tensor,
    grades: torch.Tensor,
    names: Sequence[str],
    lengths: torch.Tensor,
    truncated: torch.Tensor,
    adv: torch.Tensor,
) -> dict[str, float]:
    out: dict[str, float] = {
        "reward": float(reward.mean()),
        "reward_rubric": float(rubric_r.mean()),
        "pass_rate": float((rubric_r >= SUCCESS).double().mean()),
        "length_mean": float(lengths.mean()),
        "length_max": float(lengths.max()),
        "truncation_rate": float(truncated.double().mean()),
        "adv_abs_mean": float(adv.abs().mean()),
        "samples": float(len(samples)),
    }
    for j, n in enumerate(names):
        out[f"grader/{n}"] = float(grades[:, j].mean())
    detectors = sorted({n for s in samples for n in s.scored.score.grades if n.startswith("penalty:")})
    for n in detectors:  # how often each cheating detector fired (its errors left out)
        found = [s.scored.score.grades[n] for s in samples if n in s.scored.score.grades]
        judged = [g.score > 0.5 for g in found if g.ok]
        out[f"penalty/{n.removeprefix('penalty:')}"] = sum(judged) / len(judged) if judged else float("nan")
    if detectors:
        out["penalty"] = sum(s.scored.score.penalty for s in samples) / len(samples)
    by_env: dict[str, list[int]] = defaultdict(list)
    for i, e in enumerate(envs):
        by_env[e].append(i)
    for e, idx in by_env.items():
        t = torch.tensor(idx)
        out[f"env/{e}/reward"] = float(reward[t].mean())
        out[f"env/{e}/pass_rate"] = float((rubric_r[t] >= SUCCESS).double().mean())
        out[f"env/{e}/length_mean"] = float(lengths[t].mean())
    by_variant: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(samples):
        if s.variant is not None:
            by_variant[s.variant].append(i)
    for v, idx in by_variant.items():
        t = torch.tensor(idx)
        out[f"variant/{v}/pass_rate"] = float((rubric_r[t] >= SUCCESS).double().mean())
        out[f"variant/{v}/samples"] = float(len(idx))
    return out
