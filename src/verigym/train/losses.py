"""Policy losses, regularisers and loss aggregation, as small pure functions of tensors.

Shapes: B sequences, T token positions, V vocabulary. ``logp``/``old_logp``/``ref_logp`` are
(B, T) log-probabilities of the sampled tokens, ``mask`` (B, T) is 1 on model tokens (0 on
prompt, environment and padding tokens), ``adv`` is (B,) or (B, T). Per-token losses are (B, T)
and are reduced by ``aggregate``; nothing here reads global state.

References:
- PPO-clip: Schulman et al. 2017 (arXiv:1707.06347). Clip-higher (ε_low ≠ ε_high), token-mean:
  Yu et al. 2025, "DAPO" (arXiv:2503.14476).
- Dual clip: Ye et al. 2020, "Mastering Complex Control in MOBA Games" (arXiv:1912.09729); verl
  ``compute_policy_loss`` (``clip_ratio_c``).
- GSPO: Zheng et al. 2025, "Group Sequence Policy Optimization" (arXiv:2507.18071).
- Two-sided clip δ: TRL ``GRPOConfig.delta`` (INTELLECT-2, arXiv:2505.07291).
- k3 KL estimator: Schulman 2020, "Approximating KL divergence"; GRPO (arXiv:2402.03300).
- Seq-mean-token-sum-norm: Dr. GRPO (arXiv:2503.20783).
- Adaptive entropy: He et al. 2025, "Skywork Open Reasoner 1" (arXiv:2505.22312), authors' code.
- Clip-Cov / KL-Cov and the covariance proxy: Cui et al. 2025, "The Entropy Mechanism of RL for
  Reasoning LMs" (arXiv:2505.22617), verl ``compute_policy_loss_clip_cov`` / ``_kl_cov``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

__all__ = [
    "AdaptiveEntropy",
    "Aggregation",
    "PolicyLoss",
    "aggregate",
    "clip_cov_loss",
    "cov_proxy",
    "gspo_loss",
    "kl_cov_loss",
    "kl_k3",
    "masked_mean",
    "ppo_clip_loss",
    "token_entropy",
    "token_logprobs",
]

Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]


@dataclass(frozen=True)
class PolicyLoss:
    """Per-token loss (B, T), the importance ratio (B, T) and where clipping acted (B, T) bool."""

    per_token: Tensor
    ratio: Tensor
    clipped_low: Tensor
    clipped_high: Tensor


def _col(adv: Tensor) -> Tensor:
    return adv.unsqueeze(-1) if adv.dim() == 1 else adv  # (B,) -> (B, 1)


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Σ v·m / Σ m (0 when the mask is empty)."""
    return (values * mask).sum() / mask.sum().clamp(min=1)


def token_logprobs(logits: Tensor, targets: Tensor, temperature: float = 1.0) -> Tensor:
    """log π(targets) under softmax(logits / temperature): (B, T, V), (B, T) -> (B, T).

    Training must divide by the sampling temperature so that, on policy, the ratio is exactly 1.
    """
    if temperature != 1.0:
        logits = logits / temperature
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def token_entropy(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Entropy of each position's distribution: (B, T, V) -> (B, T)."""
    if temperature != 1.0:
        logits = logits / temperature
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def ppo_clip_loss(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    dual_clip: float | None = None,
    delta: float | None = None,
) -> PolicyLoss:
    """PPO-clip per token: l = −min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A).

    ``dual_clip`` c (> 1): for A < 0 the loss is also capped at −A·c (verl).
    ``delta`` δ (> 1+ε_high): the unclipped ratio is capped at δ too, so a huge ratio with A < 0
    cannot blow up the loss (TRL two-sided clipping).
    """
    a = _col(adv)
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high)
    unclipped = ratio if delta is None else torch.clamp(ratio, max=delta)
    loss = torch.maximum(-a * unclipped, -a * clipped)
    if dual_clip is not None:
        loss = torch.where(a < 0, torch.minimum(loss, -a * dual_clip), loss)
    low = (ratio < 1 - eps_low) & (a < 0)
    high = (ratio > 1 + eps_high) & (a > 0)
    return PolicyLoss(loss, ratio, low, high)


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor,
    mask: Tensor,
    *,
    eps_low: float = 3e-4,
    eps_high: float = 4e-4,
) -> PolicyLoss:
    """GSPO: sequence ratio s_i = exp(mean_t log ρ_{i,t}) over model tokens; l_i = −min(s A, clip(s) A).

    The sequence loss is broadcast to every token of the sequence (B, T); aggregate it with
    ``seq-mean-token-mean`` to get the paper's objective.
    """
    a = _col(adv)
    seq_log_ratio = ((logp - old_logp) * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)
    s = torch.exp(seq_log_ratio)  # (B, 1)
    loss = torch.maximum(-a * s, -a * torch.clamp(s, 1 - eps_low, 1 + eps_high)).expand_as(logp)
    ratio = s.expand_as(logp)
    return PolicyLoss(loss, ratio, ((ratio < 1 - eps_low) & (a < 0)), ((ratio > 1 + eps_high) & (a > 0)))


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 estimator of KL(π_θ‖π_ref) per token: π_ref/π_θ − log(π_ref/π_θ) − 1 (≥ 0)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def _valid_cov(logp: Tensor, adv: Tensor, mask: Tensor) -> Tensor:
    """(A − mean A)(log π − mean log π) per token, means over valid tokens (detached)."""
    a = _col(adv).expand_as(logp).detach()
    lp = logp.detach()
    m = mask.to(lp.dtype)
    return (a - masked_mean(a, m)) * (lp - masked_mean(lp, m))


def clip_cov_loss(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor,
    mask: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    clip_ratio: float = 2e-4,
    cov_lb: float = 1.0,
    cov_ub: float = 5.0,
    generator: torch.Generator | None = None,
) -> PolicyLoss:
    """Clip-Cov: PPO-clip, but the gradient of a random ``clip_ratio`` fraction (at least one) of the
    tokens with ``cov_lb < cov < cov_ub`` that PPO did not already clip is zeroed.
    """
    base = ppo_clip_loss(logp, old_logp, adv, eps_low=eps_low, eps_high=eps_high)
    a = _col(adv).expand_as(logp)
    clipped_by_ppo = (-a * torch.clamp(base.ratio, 1 - eps_low, 1 + eps_high)) > (-a * base.ratio)
    cov = _valid_cov(logp, adv, mask)
    eligible = (cov > cov_lb) & (cov < cov_ub) & (mask > 0) & ~clipped_by_ppo
    idx = torch.nonzero(eligible)
    keep = torch.ones_like(logp)
    if len(idx) > 0:
        n = max(int(clip_ratio * float(mask.sum())), 1)
        perm = torch.randperm(len(idx), generator=generator, device="cpu")[:n]
        chosen = idx[perm.to(idx.device)]
        keep[chosen[:, 0], chosen[:, 1]] = 0
    return PolicyLoss(base.per_token * keep, base.ratio, base.clipped_low | (keep == 0), base.clipped_high)


def kl_cov_loss(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, *, k_ratio: float = 2e-3, beta: float = 1.0
) -> PolicyLoss:
    """KL-Cov: unclipped −Aρ, plus β|log ρ| on the top ``k_ratio`` fraction (at least one) of valid
    tokens ranked by covariance.
    """
    a = _col(adv)
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    loss = -a * ratio
    cov = _valid_cov(logp, adv, mask).masked_fill(mask <= 0, float("-inf"))
    n_valid = int((mask > 0).sum())
    penalised = torch.zeros_like(logp, dtype=torch.bool)
    if n_valid > 0 and k_ratio > 0:
        k = max(1, int(n_valid * k_ratio))
        top = torch.topk(cov.flatten(), k).indices
        penalised.view(-1)[top] = True
    loss = torch.where(penalised, loss + beta * log_ratio.abs(), loss)
    return PolicyLoss(loss, ratio, torch.zeros_like(penalised), penalised)


def cov_proxy(logp: Tensor, adv: Tensor, mask: Tensor) -> float:
    """Cov(log π(y|x), π(y|x)·A) over model tokens: the entropy-change proxy of the Entropy Mechanism
    paper (positive: the update is lowering entropy)."""
    m = mask > 0
    if int(m.sum()) < 2:
        return 0.0
    lp = logp.detach()[m]
    pa = (lp.exp() * _col(adv).expand_as(logp).detach()[m]).to(lp.dtype)
    return float(((lp - lp.mean()) * (pa - pa.mean())).mean())


def aggregate(
    per_token: Tensor,
    mask: Tensor,
    mode: Aggregation,
    *,
    total_tokens: float | None = None,
    total_seqs: float | None = None,
    max_len: int | None = None,
) -> Tensor:
    """Reduce a (B, T) per-token loss to a scalar.

    - ``token-mean``: Σ l·m / Σ m (DAPO's token-level loss; long answers weigh per token).
    - ``seq-mean-token-mean``: mean over sequences of each sequence's token mean (original GRPO).
    - ``seq-mean-token-sum``: mean over sequences of each sequence's token sum.
    - ``seq-mean-token-sum-norm``: Σ l·m / (B · L_max), a constant normaliser (Dr. GRPO).

    Under gradient accumulation pass the whole batch's ``total_tokens`` (Σ m) and ``total_seqs``
    (number of sequences with ≥ 1 model token; B for ``seq-mean-token-sum-norm``): the micro-batch
    values then sum to the full-batch value exactly.
    """
    m = mask.to(per_token.dtype)
    masked = per_token * m
    if mode == "token-mean":
        denom = float(m.sum()) if total_tokens is None else total_tokens
        return masked.sum() / max(denom, 1.0)
    tok = m.sum(-1)
    if mode == "seq-mean-token-mean":
        per_seq = masked.sum(-1) / tok.clamp(min=1)
    elif mode == "seq-mean-token-sum":
        per_seq = masked.sum(-1)
    elif mode == "seq-mean-token-sum-norm":
        length = max_len if max_len is not None else per_token.shape[-1]
        seqs = float(per_token.shape[0]) if total_seqs is None else total_seqs
        return masked.sum() / max(seqs * length, 1.0)
    else:
        raise ValueError(f"unknown loss aggregation {mode!r}")
    seqs = float((tok > 0).sum()) if total_seqs is None else total_seqs
    return per_seq.sum() / max(seqs, 1.0)


@dataclass
class AdaptiveEntropy:
    """Skywork-OR1 adaptive entropy coefficient.

    The controlled quantity is the mean sampled-token NLL of the last step (the authors' code).
    ``update(h)`` moves c by ±Δ (up when h < target), clipped to [c_min, c_max]; ``coef(h)`` is the
    coefficient to apply: c while h < target, else 0 (the bonus acts only when entropy is low).
    """

    target: float = 0.2
    delta: float = 1e-4
    c_min: float = 0.0
    c_max: float = 0.005
    c: float = 0.0

    def coef(self, h: float) -> float:
        return self.c if h < self.target else 0.0

    def update(self, h: float) -> float:
        step = self.delta if h < self.target else -self.delta
        self.c = min(max(self.c + step, self.c_min), self.c_max)
        return self.c
