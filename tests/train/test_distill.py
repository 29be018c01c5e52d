"""On-policy distillation numerics (``verigym.train.distill``): the reverse-KL advantage and its
gradient, the generalised JSD and its gradient on a 3-token vocabulary against hand-computed values,
the schedule, ``exclude_passed``/``reward_coef``, the tokenizer check, and the teacher's logprobs at
the student's temperature and positions. Fast: no training loop."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from verigym.policies import tiny
from verigym.policies.local import LocalPolicy
from verigym.train import losses as L
from verigym.train._forward import forward_rows
from verigym.train.config import ConfigError, DistillConfig, build_config, load_config
from verigym.train.distill import (
    Distiller,
    InProcessTeacher,
    check_tokenizers,
    distill_coef,
    generalized_jsd,
    reverse_kl_advantages,
    teaches,
)
from verigym.train.samples import Row
from verigym.types import Sampling

torch.set_num_threads(1)

# student p = (1/6, 1/3, 1/2), teacher q = (1/2, 1/4, 1/4) over a vocabulary of 3 tokens
P = (1 / 6, 1 / 3, 1 / 2)
Q = (1 / 2, 1 / 4, 1 / 4)


def _logits(probs: Sequence[float], scale: float = 1.0) -> torch.Tensor:
    return torch.tensor([[[scale * math.log(x) for x in probs]]], dtype=torch.float64)


def test_reverse_kl_advantage_and_its_policy_gradient_by_hand() -> None:
    z = _logits(P).requires_grad_(True)  # one sequence, one position
    y = torch.tensor([[1]])
    logp = torch.log_softmax(z, -1).gather(-1, y.unsqueeze(-1)).squeeze(-1)
    teacher = torch.tensor([[math.log(Q[1])]], dtype=torch.float64)
    mask = torch.ones(1, 1, dtype=torch.float64)
    a_kd = reverse_kl_advantages(logp.detach(), teacher, mask)
    assert float(a_kd) == pytest.approx(math.log(3 / 4), abs=1e-12)  # ln(1/4) − ln(1/3)
    # A_t = A^R + c·A^KD through PPO-clip at ratio 1, token-mean: ∂l/∂z = −A (onehot(y) − p)
    adv = 0.2 + 0.5 * a_kd
    loss = L.aggregate(L.ppo_clip_loss(logp, logp.detach(), adv).per_token, mask, "token-mean")
    loss.backward()  # type: ignore[no-untyped-call]
    a = 0.2 + 0.5 * math.log(3 / 4)
    want = [-a * (0 - P[0]), -a * (1 - P[1]), -a * (0 - P[2])]
    assert z.grad is not None
    assert z.grad.flatten().tolist() == pytest.approx(want, abs=1e-12)
    # E_{y~p}[−A^KD] is the reverse KL at the position, as JSD with β = 1 computes it
    kl = sum(p * math.log(p / q) for p, q in zip(P, Q, strict=True))
    assert kl == pytest.approx(P[0] * math.log(1 / 3) + P[1] * math.log(4 / 3) + P[2] * math.log(2))
    assert float(generalized_jsd(_logits(P), _logits(Q), 1.0)) == pytest.approx(kl, abs=1e-12)


def test_generalized_jsd_values_and_gradients_by_hand() -> None:
    m = [(p + q) / 2 for p, q in zip(P, Q, strict=True)]  # (1/3, 7/24, 3/8)
    assert m == pytest.approx([1 / 3, 7 / 24, 3 / 8])
    jsd = 0.5 * sum(q * math.log(q / x) for q, x in zip(Q, m, strict=True)) + 0.5 * sum(
        p * math.log(p / x) for p, x in zip(P, m, strict=True)
    )
    assert float(generalized_jsd(_logits(P), _logits(Q), 0.5)) == pytest.approx(jsd, abs=1e-12)
    forward = sum(q * math.log(q / p) for p, q in zip(P, Q, strict=True))
    reverse = sum(p * math.log(p / q) for p, q in zip(P, Q, strict=True))
    # the same distributions at temperature 2 from logits twice as large
    for beta, value in ((0.0, forward), (1.0, reverse)):
        z = _logits(P, 2.0).requires_grad_(True)
        out = generalized_jsd(z, _logits(Q, 2.0), beta, temperature=2.0)
        assert float(out.detach()) == pytest.approx(value, abs=1e-12)
        out.sum().backward()  # type: ignore[no-untyped-call]
        assert z.grad is not None
        if beta == 0.0:  # ∂KL(q‖p)/∂u_k = p_k − q_k with u = z/T
            want = [(p - q) / 2 for p, q in zip(P, Q, strict=True)]
        else:  # ∂KL(p‖q)/∂u_k = p_k (ln p_k − ln q_k − KL)
            want = [p * (math.log(p / q) - reverse) / 2 for p, q in zip(P, Q, strict=True)]
        assert z.grad.flatten().tolist() == pytest.approx(want, abs=1e-12)
    # β in (0, 1): the gradient against central differences of the hand formula
    z = _logits(P).requires_grad_(True)
    generalized_jsd(z, _logits(Q), 0.3).sum().backward()  # type: ignore[no-untyped-call]
    assert z.grad is not None

    def hand(u: list[float]) -> float:
        e = [math.exp(x) for x in u]
        p = [x / sum(e) for x in e]
        mix = [0.3 * q + 0.7 * s for s, q in zip(p, Q, strict=True)]
        return 0.3 * sum(q * math.log(q / x) for q, x in zip(Q, mix, strict=True)) + 0.7 * sum(
            s * math.log(s / x) for s, x in zip(p, mix, strict=True)
        )

    u0 = [math.log(x) for x in P]
    for k in range(3):
        up, dn = list(u0), list(u0)
        up[k] += 1e-6
        dn[k] -= 1e-6
        assert float(z.grad.flatten()[k]) == pytest.approx((hand(up) - hand(dn)) / 2e-6, abs=1e-7)


def test_schedules() -> None:
    const = DistillConfig(coef=0.3)
    assert [distill_coef(const, s, 5) for s in (0, 4, 99)] == [0.3, 0.3, 0.3]
    lin = DistillConfig(coef=1.0, schedule="linear", final_coef=0.0)
    assert [distill_coef(lin, s, 5) for s in (0, 1, 2, 3, 4, 10)] == pytest.approx([1, 0.75, 0.5, 0.25, 0, 0])
    cos = DistillConfig(coef=1.0, schedule="cosine", final_coef=0.2, decay_steps=3)
    assert [distill_coef(cos, s, 100) for s in (0, 1, 2, 50)] == pytest.approx([1.0, 0.6, 0.2, 0.2])


class _FixedTeacher:
    """A teacher that gives every token the logprob −1."""

    name = "fixed"

    def check(self, tokenizer: Any) -> None:
        pass

    def logprobs(self, rows: Sequence[Row], temperature: float) -> list[list[float]]:
        return [[0.0] + [-1.0] * (len(r.ids) - 1) for r in rows]


def _row(passed: bool) -> Row:
    return Row(
        ids=[1, 2, 3, 4],
        mask=[0, 0, 1, 1],
        logprobs=[0, 0, -0.5, -2.0],
        advantage=0.8,
        meta={"passed": passed},
    )


def test_prepare_reward_coef_exclude_passed_and_dynamic_sampling() -> None:
    cfg = build_config(
        {"rl": {"steps": 4, "distill": {"coef": 0.5, "reward_coef": 0.0, "exclude_passed": True}}}
    )
    d = Distiller(cfg, _FixedTeacher())  # type: ignore[arg-type]
    rows = [_row(False), _row(True)]
    m = d.prepare(rows, 0, None, pad_id=0)
    assert [r.advantage for r in rows] == [0.0, 0.0]  # reward_coef 0: pure distillation
    assert rows[0].meta["distill_adv"] == pytest.approx([0, 0, 0.5 * (-1 + 0.5), 0.5 * (-1 + 2.0)])
    assert rows[1].meta["distill_adv"] == [0.0] * 4  # passed: excluded
    assert m["distill/reverse_kl"] == pytest.approx((-0.5 + 1 - 2 + 1) * 2 / 4)  # every row counts
    assert m["distill/excluded_frac"] == 0.5 and m["distill/coef"] == 0.5
    assert teaches(cfg, 0, [0.0, 0.0]) and teaches(cfg, 0, [1.0, 0.0]) and not teaches(cfg, 0, [1.0, 1.0])
    assert not teaches(build_config({}), 0, [0.0, 0.0])
    decayed = build_config({"rl": {"steps": 4, "distill": {"schedule": "linear", "final_coef": 0.0}}})
    assert teaches(decayed, 2, [1.0, 1.0]) and not teaches(decayed, 3, [0.0, 0.0])


def test_config_preset_teacher_shorthand_and_errors() -> None:
    cfg = build_config({"rl": {"preset": "opd", "distill": {"teacher": "runs/t", "exclude_passed": True}}})
    d = cfg.rl.distill
    assert d is not None and d.teacher is not None and d.teacher.model == "runs/t" and d.exclude_passed
    assert cfg.rl.dynamic_sampling and d.coef > 0  # the preset's keys survive the file's sub-table
    served = {"base_url": "http://127.0.0.1:1/v1"}
    with pytest.raises(ConfigError, match=r"rl\.distill: divergence jsd needs"):
        build_config({"rl": {"distill": {"teacher": served, "divergence": "jsd"}}})
    with pytest.raises(ConfigError, match=r"rl: distill.divergence jsd does not run with packing"):
        build_config({"rl": {"packing": True, "distill": {"divergence": "jsd"}}})
    with pytest.raises(ConfigError, match=r"rl\.distill\.beta"):
        build_config({"rl": {"distill": {"beta": 2}}})
    shipped = load_config(Path(__file__).resolve().parents[2] / "configs" / "distill.toml")
    sd = shipped.rl.distill
    assert shipped.rl.preset == "opd" and sd is not None and sd.schedule == "cosine" and sd.teacher_recipe


def test_a_teacher_with_another_tokenizer_is_a_one_line_config_error(tmp_path: Any) -> None:
    tok = tiny.build_tokenizer()
    other = tiny.build_tokenizer()
    other.add_tokens(["zz"])  # one more token, the probe encodes alike: the vocabularies still differ
    check_tokenizers(tok, tiny.build_tokenizer(), "same")
    with pytest.raises(ConfigError) as err:
        check_tokenizers(tok, other, "runs/other")
    assert "\n" not in str(err.value) and "different tokenizer" in str(err.value)
    model = tiny.build_model("tiny", other, seed=0)
    model.save_pretrained(tmp_path / "t")
    other.save_pretrained(tmp_path / "t")
    cfg = build_config({"rl": {"distill": {"teacher": str(tmp_path / "t")}}})
    with pytest.raises(ConfigError, match=r"rl\.distill\.teacher: .*different tokenizer"):
        Distiller.build(cfg, tok, "cpu", pad_id=0)
    with pytest.raises(ConfigError, match=r"rl\.distill\.teacher: name the teacher"):
        Distiller.build(build_config({"rl": {"preset": "opd"}}), tok, "cpu", pad_id=0)


def _sampled_rows(policy: LocalPolicy, temperature: float) -> list[Row]:
    prompts = [policy.encode([{"role": "user", "content": q}]) for q in ("12+34=", "7+8=", "40+2=")]
    out = []
    for i, ids in enumerate(prompts):
        spec = policy.spec(ids, Sampling(temperature=temperature, max_tokens=5), seed=i)
        (res,) = policy.run([spec])
        comp = list(res.token_ids)
        out.append(Row(ids + comp, [0] * len(ids) + [1] * len(comp), [0.0] * len(ids) + list(res.logprobs)))
    return out


def test_teacher_logprobs_at_the_students_temperature_and_positions() -> None:
    tok = tiny.build_tokenizer()
    model = tiny.build_model("tiny", tok, seed=3)
    policy = LocalPolicy(model, tok)
    rows = _sampled_rows(policy, 0.7)
    teacher = InProcessTeacher(copy.deepcopy(model), tok, "copy", pad_id=0)
    got = teacher.logprobs(rows, 0.7)
    for r, t in zip(rows, got, strict=True):
        assert r.logprobs is not None
        on = [(a, b) for a, b, m in zip(r.logprobs, t, r.mask, strict=True) if m]
        assert [b for _, b in on] == pytest.approx([a for a, _ in on], abs=1e-5)  # KL to itself: 0
    other_t = teacher.logprobs(rows, 1.0)
    assert any(abs(a - b) > 1e-3 for a, b in zip(got[0], other_t[0], strict=True))
    # the JSD's teacher logits in the shared-prefix forward's layout: the same positions as the student's
    fwd = forward_rows(model, rows, 0, 0.7, share_prefix=True, keep_logits=True)
    assert fwd.logits is not None
    aligned = teacher.aligned_logits(rows, fwd.starts, fwd.logits.shape[1])
    torch.testing.assert_close(
        aligned * fwd.mask[..., None], fwd.logits.detach() * fwd.mask[..., None], atol=1e-5, rtol=0
    )
    jsd = generalized_jsd(fwd.logits, aligned, 0.5, 0.7) * fwd.mask
    assert float(jsd.detach().abs().max()) < 1e-6
