"""Advantages, losses, aggregations and shaping against hand-computed values and TRL's formulas.

TRL formulas are transcribed from trl 1.16.0, ``trl/trainer/grpo_trainer.py``:
``GRPOTrainer._generate_and_score_completions`` (advantages, multi-objective aggregation) and
``GRPOTrainer._compute_loss`` (per-token loss, two-sided clip, sequence-level ratio, loss types).
"""

from __future__ import annotations

import math

import pytest
import torch

from verigym.train import advantages as adv
from verigym.train import losses as L
from verigym.train.group_filters import DifficultyTracker, has_signal
from verigym.train.shaping import lead_length_rewards, token_cost

torch.set_num_threads(1)


def t(x: list[float] | list[list[float]]) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


# ----------------------------------------------------------------------------- advantages


def test_grpo_hand_values_bessel_and_group_of_one() -> None:
    r = t([1, 0, 0, 1, 5])
    g = torch.tensor([7, 7, 7, 7, 3])
    a = adv.grpo(r, g, eps=0.0 + 1e-12)
    s = 0.5 / math.sqrt(1 / 3)  # Bessel: var = 4·0.25/3
    assert torch.allclose(a, t([s, -s, -s, s, 0.0]), atol=1e-9)
    assert torch.allclose(adv.dr_grpo(r, g), t([0.5, -0.5, -0.5, 0.5, 0.0]))


def test_grpo_matches_trl_sum_then_normalize_group_and_batch() -> None:
    torch.manual_seed(0)
    rewards_per_func = torch.rand(12, 2, dtype=torch.float64)
    weights = t([1.0, 0.5])
    g = torch.arange(12) // 4
    rewards = (rewards_per_func * weights).sum(1)
    ours_r = adv.combine_graders(rewards_per_func, weights, g)
    assert torch.allclose(ours_r, rewards)
    # TRL: mean/std per group of num_generations (std unbiased), A = (r − mean)/(std + 1e-4)
    grouped = rewards.view(-1, 4)
    mean = grouped.mean(1).repeat_interleave(4)
    std_g = grouped.std(1).repeat_interleave(4)
    assert torch.allclose(adv.grpo(ours_r, g, scale="group", eps=1e-4), (rewards - mean) / (std_g + 1e-4))
    std_b = rewards.std().expand_as(rewards)
    assert torch.allclose(adv.grpo(ours_r, g, scale="batch", eps=1e-4), (rewards - mean) / (std_b + 1e-4))
    assert torch.allclose(adv.grpo(ours_r, g, scale="none"), rewards - mean)


def test_normalize_then_sum_matches_trl() -> None:
    torch.manual_seed(1)
    rpf = torch.rand(8, 3, dtype=torch.float64)
    w = t([1.0, 2.0, 0.5])
    g = torch.arange(8) // 4
    grouped = rpf.view(-1, 4, 3)
    reward_k = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).view(-1, 3)
    rewards = (reward_k * w).sum(1)
    trl_adv = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    ours = adv.combine_graders(rpf, w, g, mode="normalize_then_sum", eps=1e-4)
    assert torch.allclose(ours, rewards)
    assert torch.allclose(adv.batch_whiten(ours, eps=1e-4), trl_adv)


def test_rloo_opo_reinforce_pp() -> None:
    r = t([1, 0, 0, 2])
    g = torch.tensor([0, 0, 0, 1])
    assert torch.allclose(adv.rloo(r, g), t([1.0, -0.5, -0.5, 0.0]))
    # OPO: b = Σ|o| r / Σ|o| = (1·1)/(1+3) = 0.25 for the group {r=1,|o|=1; r=0,|o|=3}
    a = adv.opo(t([1, 0]), torch.tensor([0, 0]), torch.tensor([1, 3]))
    assert torch.allclose(a, t([0.75, -0.25]))
    centered = t([2 / 3, -1 / 3, -1 / 3, 0.0])
    expect = (centered - centered.mean()) / (centered.std() + 1e-6)
    assert torch.allclose(adv.reinforce_pp_baseline(r, g), expect)
    assert torch.allclose(adv.compute_advantages("rloo", r, g), adv.rloo(r, g))
    with pytest.raises(ValueError, match="lengths"):
        adv.compute_advantages("opo", r, g)


def test_lead_difficulty_weights_hand_values() -> None:
    a = t([1.5, -0.5, -0.5, -0.5])
    g = torch.tensor([0, 0, 0, 0])
    correct = torch.tensor([1, 0, 0, 0])
    out = adv.lead_difficulty_weights(a, g, correct)
    w_hard = 0.4 + 1.1 / (1 + math.exp(10 * (0.25 - 0.75)))  # ρ = 0.25 for the positive sample
    w_neg = 0.4 + 1.1 / (1 + math.exp(10 * (0.75 - 0.75)))  # 1 − ρ = 0.75 for the negatives
    assert torch.allclose(out, t([1.5 * w_hard, -0.5 * w_neg, -0.5 * w_neg, -0.5 * w_neg]))


# ----------------------------------------------------------------------------- losses


def test_ppo_clip_higher_dual_clip_and_delta() -> None:
    logp = torch.log(t([[1.5, 0.5, 5.0]]))
    old = torch.zeros(1, 3, dtype=torch.float64)
    a = t([[1.0, -1.0, -1.0]])
    out = L.ppo_clip_loss(logp, old, a, eps_low=0.2, eps_high=0.28)
    assert torch.allclose(out.per_token, t([[-1.28, 0.8, 5.0]]))
    assert out.clipped_high.tolist() == [[True, False, False]]
    assert out.clipped_low.tolist() == [[False, True, False]]
    dual = L.ppo_clip_loss(logp, old, a, eps_low=0.2, eps_high=0.28, dual_clip=3.0)
    assert torch.allclose(dual.per_token, t([[-1.28, 0.8, 3.0]]))
    two_sided = L.ppo_clip_loss(logp, old, a, eps_low=0.2, eps_high=0.28, delta=2.0)
    assert torch.allclose(two_sided.per_token, t([[-1.28, 0.8, 2.0]]))


def _trl_token_loss(logp, old, a, eps_low, eps_high, delta=None):  # type: ignore[no-untyped-def]
    coef_1 = torch.exp(logp - old)
    coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
    if delta is not None:
        coef_1 = torch.clamp(coef_1, max=delta)
    return -torch.min(coef_1 * a, coef_2 * a)


def test_losses_and_aggregations_match_trl_loss_types() -> None:
    torch.manual_seed(2)
    logp = -torch.rand(4, 6, dtype=torch.float64)
    old = logp + 0.3 * torch.randn(4, 6, dtype=torch.float64)
    a = torch.randn(4, dtype=torch.float64)
    mask = t([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [0, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]])
    for delta in (None, 1.5):
        trl = _trl_token_loss(logp, old, a.unsqueeze(1), 0.2, 0.28, delta)
        ours = L.ppo_clip_loss(logp, old, a, eps_low=0.2, eps_high=0.28, delta=delta).per_token
        assert torch.allclose(ours * mask, trl * mask)
    pt = _trl_token_loss(logp, old, a.unsqueeze(1), 0.2, 0.2)
    grpo_trl = ((pt * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    bnpo_trl = (pt * mask).sum() / mask.sum()
    dr_trl = (pt * mask).sum() / (pt.size(0) * 8)
    assert torch.allclose(L.aggregate(pt, mask, "seq-mean-token-mean"), grpo_trl)
    assert torch.allclose(L.aggregate(pt, mask, "token-mean"), bnpo_trl)
    assert torch.allclose(L.aggregate(pt, mask, "seq-mean-token-sum-norm", max_len=8), dr_trl)
    # TRL importance_sampling_level="sequence" (GSPO): log w = Σ m·log ρ / Σ m, then the same min
    lw = ((logp - old) * mask).sum(-1) / mask.sum(-1)
    c1 = torch.exp(lw).unsqueeze(-1)
    trl_seq = -torch.min(c1 * a.unsqueeze(1), torch.clamp(c1, 1 - 3e-4, 1 + 4e-4) * a.unsqueeze(1))
    ours_seq = L.gspo_loss(logp, old, a, mask)
    assert torch.allclose(ours_seq.per_token, trl_seq.expand(4, 6))


def test_aggregation_hand_values_and_accumulation() -> None:
    pt = t([[1, 2, 3], [4, 9, 9]])
    m = t([[1, 1, 1], [1, 0, 0]])
    assert float(L.aggregate(pt, m, "token-mean")) == pytest.approx(2.5)
    assert float(L.aggregate(pt, m, "seq-mean-token-mean")) == pytest.approx(3.0)
    assert float(L.aggregate(pt, m, "seq-mean-token-sum")) == pytest.approx(5.0)
    assert float(L.aggregate(pt, m, "seq-mean-token-sum-norm", max_len=3)) == pytest.approx(10 / 6)
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
        whole = L.aggregate(pt, m, mode, max_len=3)  # type: ignore[arg-type]
        parts = sum(
            L.aggregate(pt[i : i + 1], m[i : i + 1], mode, total_tokens=4, total_seqs=2, max_len=3)  # type: ignore[arg-type]
            for i in range(2)
        )
        assert float(parts) == pytest.approx(float(whole))


def test_kl_k3_entropy_logprobs_temperature() -> None:
    kl = L.kl_k3(torch.log(t([0.5])), torch.log(t([0.25])))
    assert float(kl[0]) == pytest.approx(0.5 + math.log(0.5) * -1 - 1)
    assert float(L.kl_k3(t([-1.0]), t([-1.0]))[0]) == 0.0
    logits = t([[[0.0, math.log(3.0)]]])
    assert float(L.token_logprobs(logits, torch.tensor([[1]]))[0, 0]) == pytest.approx(math.log(0.75))
    # temperature 2: softmax([0, ln3 / 2]) = [1, √3] / (1 + √3)
    expect = math.log(math.sqrt(3) / (1 + math.sqrt(3)))
    assert float(L.token_logprobs(logits, torch.tensor([[1]]), 2.0)[0, 0]) == pytest.approx(expect)
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert float(L.token_entropy(logits)[0, 0]) == pytest.approx(h)


def test_clip_cov_zeroes_gradient_of_chosen_tokens_only() -> None:
    logp = torch.log(t([[0.9, 0.05, 0.5, 0.5], [0.05, 0.9, 0.5, 0.5]])).requires_grad_(True)
    old = logp.detach().clone()
    a = t([3.0, -3.0])
    mask = torch.ones(2, 4, dtype=torch.float64)
    out = L.clip_cov_loss(logp, old, a, mask, clip_ratio=0.25, cov_lb=0.5, cov_ub=100.0)
    zeroed = out.per_token.detach() == 0
    assert int(zeroed.sum()) == 2  # max(int(0.25·8), 1) of the eligible tokens
    out.per_token.sum().backward()
    assert logp.grad is not None
    assert torch.all(logp.grad[zeroed] == 0) and torch.all(logp.grad[~zeroed] != 0)


def test_kl_cov_penalises_top_covariance_token() -> None:
    logp = torch.log(t([[0.9, 0.2], [0.2, 0.9]]))
    old = logp - 0.1
    a = t([2.0, -2.0])
    mask = torch.ones(2, 2, dtype=torch.float64)
    out = L.kl_cov_loss(logp, old, a, mask, k_ratio=0.25, beta=1.0)
    ratio = math.exp(0.1)
    # cov is largest where A and log π are both above their means: (0, 0) (A=2, p=0.9)
    assert out.clipped_high.tolist() == [[True, False], [False, False]]
    assert float(out.per_token[0, 0]) == pytest.approx(-2 * ratio + 0.1)
    assert float(out.per_token[1, 1]) == pytest.approx(2 * ratio)


def test_cov_proxy_and_adaptive_entropy() -> None:
    logp = torch.log(t([[0.9, 0.1]]))
    a = t([[1.0, -1.0]])
    m = torch.ones(1, 2)
    lp = torch.log(t([0.9, 0.1]))
    pa = t([0.9, -0.1])
    expect = float(((lp - lp.mean()) * (pa - pa.mean())).mean())
    assert L.cov_proxy(logp, a, m) == pytest.approx(expect)
    ae = L.AdaptiveEntropy(target=0.2, delta=1e-3, c_max=2.5e-3)
    assert ae.coef(0.1) == 0.0
    assert [ae.update(0.1) for _ in range(3)] == pytest.approx([1e-3, 2e-3, 2.5e-3])
    assert ae.coef(0.1) == pytest.approx(2.5e-3) and ae.coef(0.3) == 0.0
    assert ae.update(0.3) == pytest.approx(1.5e-3)


# ----------------------------------------------------------------------------- shaping


def test_lead_length_reward_token_cost_and_filters() -> None:
    out = lead_length_rewards(
        torch.tensor([2, 4, 3, 7]), torch.tensor([1, 1, 0, 1]), torch.tensor([0, 0, 0, 1])
    )
    # group 0 correct lengths {2, 4}: μ = 3, σ = 1 → z = ∓1; the single correct in group 1 has z = 0
    assert torch.allclose(out, t([math.exp(0.05), math.exp(-0.05), -1.0, 1.0]), atol=1e-5)
    assert token_cost([10, 0], 0.01) == [-0.1, 0.0]
    assert has_signal([0, 1, 1]) and not has_signal([1, 1, 1]) and not has_signal([1])
    d = DifficultyTracker(low=0.1, high=0.9, window=2)
    assert d.keep("x")
    d.record("x", 1.0)
    assert not d.keep("x")
    d.record("x", 0.5)
    assert d.pass_rate("x") == 0.75 and d.keep("x")
    d2 = DifficultyTracker()
    d2.load_state_dict(d.state_dict())
    assert d2.pass_rate("x") == 0.75
