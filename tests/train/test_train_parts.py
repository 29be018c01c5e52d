"""Training samples, masks, gradients, LoRA, config and presets — fast, no learning."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from verigym.train._update import UpdateState, policy_update
from verigym.train.config import PRESETS, ConfigError, build_config, load_config, schedule_value
from verigym.train.optim import make_scheduler
from verigym.train.samples import NotTrainable, Row, trajectory_sequences
from verigym.types import Completion, Message, Trajectory, Turn

torch.set_num_threads(1)


def _completion(prompt: list[int], comp: list[int], lps: list[float] | None = None) -> Completion:
    return Completion(
        text="x",
        prompt_token_ids=tuple(prompt),
        completion_token_ids=tuple(comp),
        logprobs=tuple(lps if lps is not None else [-0.5] * len(comp)),
        token_ids_exact=True,
    )


def _traj(*completions: Completion, env_between: bool = True) -> Trajectory:
    t = Trajectory(task_id="t", prompt=[Message(role="user", content="q")])
    for i, c in enumerate(completions):
        t.turns.append(Turn(source="model", messages=[c.as_message()], completion=c))
        if env_between and i < len(completions) - 1:
            t.turns.append(Turn(source="env", messages=[Message(role="user", content="obs")]))
    return t


def test_multi_turn_sequence_masks_env_tokens_and_keeps_logprobs() -> None:
    c1 = _completion([1, 2, 3], [10, 11], [-0.1, -0.2])
    c2 = _completion([1, 2, 3, 10, 11, 7, 8], [12], [-0.3])  # env tokens 7, 8 between the turns
    (row,) = trajectory_sequences(_traj(c1, c2))
    assert row.ids == [1, 2, 3, 10, 11, 7, 8, 12]
    assert row.mask == [0, 0, 0, 1, 1, 0, 0, 1]
    assert row.logprobs == [0.0, 0.0, 0.0, -0.1, -0.2, 0.0, 0.0, -0.3]
    # a template that re-renders history differently: one row per model turn
    c3 = _completion([1, 9, 9, 7], [13])
    rows = trajectory_sequences(_traj(c1, c3))
    assert [r.ids for r in rows] == [[1, 2, 3, 10, 11], [1, 9, 9, 7, 13]]
    with pytest.raises(NotTrainable):
        trajectory_sequences(_traj(Completion(text="no ids")))


def _tiny() -> tuple[object, object]:
    from verigym.policies.tiny import build_model, build_tokenizer

    tok = build_tokenizer()
    return build_model("tiny", tok, seed=0), tok


def _state(model: torch.nn.Module, lr: float = 1e-2) -> UpdateState:
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    return UpdateState(
        optimizer=opt, scheduler=make_scheduler(opt, "constant", 0, 10), generator=torch.Generator()
    )


def test_masked_environment_tokens_never_receive_gradient() -> None:
    model, _tok = _tiny()
    assert isinstance(model, torch.nn.Module)
    ids = [5, 17, 11, 82, 10, 11, 30, 31, 32, 12, 2]
    mask = [0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1]  # 30 31 32 are environment tokens
    cfg = build_config({"rl": {"preset": "dapo"}}).rl
    for share in (False, True):
        captured: list[torch.Tensor] = []

        def keep(
            _module: object, _inp: object, out: torch.Tensor, store: list[torch.Tensor] = captured
        ) -> None:
            if out.requires_grad:  # skip the no-grad forward that fills in old logprobs
                out.retain_grad()
                store.append(out)

        handle = model.lm_head.register_forward_hook(keep)  # type: ignore[union-attr]
        row = Row(ids=ids, mask=mask, logprobs=None, advantage=1.0)
        policy_update(
            model, [row], cfg, _state(model), pad_id=0, temperature=1.0, max_len=16, share_prefix=share
        )
        handle.remove()
        # (logits, index of the first token they score): one plain forward, or prompt + continuation
        parts = (
            [(captured[-1], 1)]
            if not share
            else [(captured[-2], 3 - captured[-2].shape[1] + 1), (captured[-1], 4)]
        )
        for logits, first in parts:
            grad = logits.grad
            assert grad is not None
            for t in range(grad.shape[1]):
                target = first + t  # logits at this position score ids[target]
                got = float(grad[0, t].abs().sum())
                if target < 0 or target >= len(ids) or mask[target] == 0:
                    assert got == 0.0, (
                        f"token {target} is masked but its logits got gradient {got} ({share=})"
                    )
                else:
                    assert got > 0.0, (target, share)


def test_on_policy_ratio_is_one_with_sampling_logprobs_at_temperature() -> None:
    from verigym.policies.local import LocalPolicy
    from verigym.types import Sampling

    model, tok = _tiny()
    policy = LocalPolicy(model, tok)
    (c,) = policy.generate(
        [[Message(role="user", content="12+34=")]], Sampling(temperature=0.7, max_tokens=6), seeds=[3]
    )
    (row,) = trajectory_sequences(_traj(c))
    row.advantage = 1.0
    cfg = build_config({"rl": {"preset": "dapo", "lr": 1e-9}}).rl
    out = policy_update(model, [row], cfg, _state(model, 1e-9), pad_id=0, temperature=0.7, max_len=6)
    assert out["logprob_diff"] < 1e-4
    assert out["clip_frac_low"] == 0.0 and out["clip_frac_high"] == 0.0


def test_lora_trains_only_adapter_weights() -> None:
    from verigym.train._model import load_model

    cfg = build_config({"model": {"lora": {"r": 4, "alpha": 8}}, "rl": {"preset": "dapo"}})
    model, _tok = load_model(cfg.model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    row = Row(ids=[5, 17, 11, 82, 10, 11, 12, 2], mask=[0, 0, 0, 0, 1, 1, 1, 1], logprobs=None, advantage=1.0)
    policy_update(model, [row], cfg.rl, _state(model, 1e-2), pad_id=0, temperature=1.0, max_len=8)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])}
    assert changed, "nothing was trained"
    assert all("lora_" in n for n in changed), sorted(changed)
    assert any("lora_" in n for n in changed)
    # the last step's gradients are dropped, not held through the next generation (issue 43 item 2)
    assert all(p.grad is None for p in model.parameters())


def test_every_preset_validates_and_config_errors_name_the_key(tmp_path: Path) -> None:
    for name in PRESETS:
        cfg = build_config({"rl": {"preset": name}})
        assert cfg.rl.preset == name
    dapo = build_config({"rl": {"preset": "dapo", "eps_high": 0.3}}).rl
    assert (
        dapo.eps_low == 0.2
        and dapo.eps_high == 0.3
        and dapo.dynamic_sampling
        and dapo.aggregation == "token-mean"
    )
    assert build_config({"rl": {"preset": "gspo"}}).rl.loss == "gspo"
    path = tmp_path / "c.toml"
    path.write_text('[rl]\npreset = "grpo"\nlearning_rate = 1e-4\n')
    with pytest.raises(ConfigError, match=r"c\.toml: rl\.learning_rate: unknown key"):
        load_config(path)
    path.write_text('[rl]\npreset = "dapo"\n[sampling]\nmax_tokens = 8\n')
    cfg = load_config(path, {"rl.lr": 1e-4, "rl.steps": 3})
    assert cfg.rl.lr == 1e-4 and cfg.rl.steps == 3 and cfg.sampling.max_tokens == 8
    with pytest.raises(ConfigError, match=r"rl\.preset: unknown preset 'nope'"):
        build_config({"rl": {"preset": "nope"}})
    with pytest.raises(ConfigError, match=r"sampling\.max_tokens"):
        build_config({"sampling": {"max_tokens": 0}})
    assert schedule_value([(0, 1.0), (10, 0.0)], 5) == pytest.approx(0.5)
    assert schedule_value([(0, 1.0), (10, 0.0)], 50) == 0.0 and schedule_value(2.0, 7) == 2.0


def test_scheduler_warmup_and_cosine() -> None:
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    sched = make_scheduler(opt, "cosine", 2, 10)
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(0.5) and lrs[1] == pytest.approx(1.0)
    assert lrs[6] == pytest.approx(0.5 * (1 + math.cos(math.pi * 4 / 8)))


def test_packed_sft_forward_equals_unpacked() -> None:
    from verigym.train._update import forward_logprobs
    from verigym.train.samples import collate
    from verigym.train.sft import pack, packed_logprobs

    model, _tok = _tiny()
    rows = [
        Row(ids=[5, 17, 11, 82, 17, 11, 90, 2, 6, 11, 14, 2], mask=[0] * 9 + [1] * 3, logprobs=None),
        Row(ids=[5, 12, 82, 13, 90, 2, 6, 15, 2], mask=[0] * 7 + [1] * 2, logprobs=None),
        Row(ids=[5, 19, 82, 19, 90, 2, 6, 11, 18, 2], mask=[0] * 7 + [1] * 3, logprobs=None),
    ]
    assert [len(b) for b in pack(rows, 24)] == [2, 1]
    with torch.no_grad():
        logp, mask = packed_logprobs(model, rows, 0, 24, "cpu")
        packed = float((logp * mask).sum())
        batch = collate(rows, 0)
        ref, _ = forward_logprobs(model, batch, 1.0)
        unpacked = float((ref * batch.mask).sum())
    assert float(mask.sum()) == 8.0
    assert packed == pytest.approx(unpacked, abs=1e-4)


def test_sft_on_a_real_model_takes_the_updates_kernels_with_the_same_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model above ``MIN_WEIGHT`` (here the tiny one, with the threshold lowered) trains SFT through
    the RL update's forward (one packed sequence, oneDNN products, lean layers, the chunked head): the
    same loss and the same SGD step as the plain forward, within float round-off."""
    import copy

    from verigym.train import _cpu_kernels as K
    from verigym.train.config import SFTConfig
    from verigym.train.sft import _sft_step

    base, _tok = _tiny()
    rows = [
        Row(ids=[5, 17, 11, 82, 17, 11, 90, 2, 6, 11, 14, 2], mask=[0] * 9 + [1] * 3, logprobs=None),
        Row(ids=[5, 12, 82, 13, 90, 2, 6, 15, 2], mask=[0] * 7 + [1] * 2, logprobs=None),
        Row(ids=[5, 19, 82, 19, 90, 2, 6, 11, 18, 2], mask=[0] * 7 + [1] * 3, logprobs=None),
    ]
    results = []
    for lean in (False, True):
        model = copy.deepcopy(base)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        with monkeypatch.context() as mp:
            if lean:
                mp.setattr(K, "MIN_WEIGHT", 1)
            assert K.lean_training(model) == lean
            loss = _sft_step(model, rows, SFTConfig(grad_accum=2), 0, "cpu", opt)
        assert all(p.grad is None for p in model.parameters())  # dropped after the step
        results.append((loss, [p.detach().clone() for p in model.parameters()]))
    (plain, p0), (lean_loss, p1) = results
    assert lean_loss == pytest.approx(plain, rel=1e-5)
    for a, b in zip(p0, p1, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert any(
        not torch.equal(a, b) for a, b in zip(p0, [p.detach() for p in base.parameters()], strict=True)
    )


def test_env_mix_follows_weight_schedule_and_difficulty_filter() -> None:
    from verigym.envs.builtin.arithmetic import ArithmeticEnv
    from verigym.policies.scripted import ScriptedPolicy
    from verigym.train._produce import EnvSlot, Producer
    from verigym.train.group_filters import DifficultyTracker

    a, b = ArithmeticEnv(level=1, size=50), ArithmeticEnv(level=2, size=50)
    cfg = build_config({"rl": {"groups_per_step": 8}})
    tracker = DifficultyTracker(low=0.1, high=0.9)
    slots = [
        EnvSlot("a", a, 1.0, a.tasks(None, split="train")),
        EnvSlot("b", b, [(0, 1.0), (10, 0.0)], b.tasks(None, split="train")),  # phased out by step 10
    ]
    producer = Producer(slots, ScriptedPolicy(lambda m: "0"), cfg, tracker)
    early = [s.name for s, _ in producer._pick(0, 0, 8, set())]
    late = [s.name for s, _ in producer._pick(20, 0, 8, set())]
    assert "b" in early and set(late) == {"a"}
    assert producer._pick(3, 0, 8, set()) == producer._pick(3, 0, 8, set())  # seeded by (seed, step, round)
    solved = slots[0].tasks[0].id
    tracker.record(f"a/{solved}", 1.0)
    picks = [t.id for s, t in producer._pick(1, 0, 40, set()) if s.name == "a"]
    assert solved not in picks  # always-solved tasks are filtered out


def test_errored_samples_are_dropped_not_zeroed_and_flat_groups_are_dropped() -> None:
    import asyncio

    from verigym.envs.builtin.arithmetic import ArithmeticEnv
    from verigym.policies.local import LocalPolicy
    from verigym.rubric import Grader, Rubric
    from verigym.train._produce import EnvSlot, Producer
    from verigym.train.group_filters import DifficultyTracker

    def flaky(task: object, traj: Trajectory) -> float:
        if len(traj.completions[0].completion_token_ids or ()) % 2:
            raise RuntimeError("grader crashed")
        return float(len(traj.final_text) > 1)

    env = ArithmeticEnv(level=1, size=20)
    env.rubric = Rubric([Grader(flaky, name="flaky")])
    model, tok = _tiny()
    cfg = build_config({"rl": {"groups_per_step": 4, "group_size": 6}, "sampling": {"max_tokens": 5}})
    producer = Producer(
        [EnvSlot("e", env, 1.0, env.tasks(None, split="train"))],
        LocalPolicy(model, tok),
        cfg,
        DifficultyTracker(),
    )
    batch = asyncio.run(producer.produce(0))
    kept = [s for g in batch.groups for s in g.samples]
    assert batch.stats["samples_errored"] > 0
    assert all(s.scored.score.error is None and s.scored.score.reward is not None for s in kept)
    assert len(kept) + batch.stats["samples_errored"] <= batch.stats["groups_sampled"] * 6

    env.rubric = Rubric([Grader(lambda t, tr: 1.0, name="const")])
    flat = build_config({"rl": {"preset": "dapo", "groups_per_step": 3, "group_size": 4, "max_rounds": 2}})
    producer = Producer(
        [EnvSlot("e", env, 1.0, env.tasks(None, split="train"))],
        LocalPolicy(model, tok),
        flat,
        DifficultyTracker(),
    )
    batch = asyncio.run(producer.produce(0))
    assert (
        batch.groups == []
        and batch.stats["frac_groups_zero_var"] == 1.0
        and batch.stats["sampling_rounds"] == 2
    )


def test_sft_rows_from_results_jsonl_and_messages_jsonl(tmp_path: Path) -> None:
    import json

    from verigym.train.sft import SFTDataError, load_sft_rows, messages_row
    from verigym.types import Record, Sampling, Score

    _model, tok = _tiny()
    good = _traj(_completion([5, 17, 90, 2, 6], [11, 2], [-0.1, -0.2]))
    bad = _traj(_completion([5, 17, 90, 2, 6], [12, 2]))

    def record(traj: Trajectory, reward: float) -> str:
        return Record(
            env="e", model="m", task_id="t", sample_index=0, sampling=Sampling(), trajectory=traj,
            score=Score(reward=reward), usage=traj.usage, wall_s=0.0,
        ).model_dump_json()  # fmt: skip

    results = tmp_path / "results.jsonl"
    results.write_text(record(good, 1.0) + "\n" + record(bad, 0.0) + "\n")
    (row,) = load_sft_rows(results, tok)  # the failed sample is skipped; exact token ids are kept
    assert row.ids == [5, 17, 90, 2, 6, 11, 2] and row.mask == [0, 0, 0, 0, 0, 1, 1] and row.logprobs is None

    msgs = [Message(role="user", content="7+1="), Message(role="assistant", content="8")]
    data = tmp_path / "sft.jsonl"
    data.write_text(json.dumps({"messages": [m.model_dump() for m in msgs]}) + "\n")
    (row,) = load_sft_rows(data, tok)
    assert row == messages_row(tok, msgs)
    assert tok.decode([i for i, m in zip(row.ids, row.mask, strict=True) if m]) == "8<|end|>"
    data.write_text('{"text": "no"}\n')
    with pytest.raises(SFTDataError, match=r"sft\.jsonl:1: expected a results record"):
        load_sft_rows(data, tok)


def test_shared_prefix_forward_equals_plain_forward_values_and_gradients() -> None:
    from verigym.train._update import forward_rows

    model, _tok = _tiny()
    assert isinstance(model, torch.nn.Module)
    g = torch.Generator().manual_seed(0)
    rows = []
    for prompt in ([5, 17, 11, 82, 90, 2, 6], [5, 12, 82, 19, 19, 90, 2, 6]):
        for k in range(3):
            comp = torch.randint(10, 100, (2 + k,), generator=g).tolist()
            env = [30, 31] if k == 2 else []  # a multi-turn row: env tokens (mask 0) then more model tokens
            ids = prompt + comp + env + ([44, 2] if env else [])
            mask = [0] * len(prompt) + [1] * len(comp) + [0] * len(env) + ([1, 1] if env else [])
            rows.append(
                Row(ids=ids, mask=mask, logprobs=[-0.1 * i for i in range(len(ids))], advantage=k - 1.0)
            )
    grads = []
    for share in (False, True):
        model.zero_grad()
        f = forward_rows(model, rows, 0, 0.8, share_prefix=share)
        total = (f.logp * f.mask * f.adv[:, None]).sum() + (f.ent * f.mask).sum()
        total.backward()
        vals = sorted(round(float(x), 4) for x in f.logp[f.mask > 0])
        olds = sorted(round(float(x), 4) for x in f.old[f.mask > 0])
        grads.append(
            ([p.grad.clone() for p in model.parameters()], float(total), vals, olds, float(f.mask.sum()))
        )
    (g0, t0, v0, o0, n0), (g1, t1, v1, o1, n1) = grads
    assert n0 == n1 == sum(sum(r.mask) for r in rows)
    assert t0 == pytest.approx(t1, abs=1e-4) and v0 == v1 and o0 == o1
    for a, b in zip(g0, g1, strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_rewards_glue_grader_schedule_shaping_and_truncation() -> None:
    from verigym.runner import Scored
    from verigym.train.rewards import Group, Sample, StepBatch, assign_advantages
    from verigym.types import Grade, Score, Task

    def sample(correct: float, fmt: float, n_tokens: int, finish: str = "stop") -> Sample:
        comp = Completion(
            text="x", finish_reason=finish, prompt_token_ids=(1, 2), completion_token_ids=tuple(range(10, 10 + n_tokens)),
            logprobs=(-0.1,) * n_tokens, token_ids_exact=True,
        )  # fmt: skip
        traj = _traj(comp)
        score = Score(
            grades={"correct": Grade(score=correct), "format": Grade(score=fmt)}, reward=correct + fmt
        )
        return Sample(Scored(traj, score), trajectory_sequences(traj))

    task = Task(id="t", prompt=(Message(role="user", content="q"),))

    def batch(step: int) -> StepBatch:
        samples = [sample(1, 0, 2), sample(0, 1, 2), sample(0, 0, 8, "length"), sample(1, 1, 7)]
        return StepBatch(step, [Group("e", task, samples, {"correct": 1.0, "format": 1.0})])

    gen = torch.Generator()
    raw = {
        "sampling": {"max_tokens": 8},
        "rl": {"grader_weights": {"format": [[0, 1.0], [10, 0.0]]}, "truncation": "mask"},
    }
    cfg = build_config(raw)
    _, m0 = assign_advantages(batch(0), cfg, generator=gen)
    rows, m10 = assign_advantages(batch(10), cfg, generator=gen)
    assert m0["reward"] == pytest.approx((1 + 1 + 0 + 2) / 4)  # format counts at step 0 ...
    assert m10["reward"] == pytest.approx((1 + 0 + 0 + 1) / 4)  # ... and is scheduled out by step 10
    assert m10["truncation_rate"] == 0.25 and sum(rows[2].mask) == 0  # the truncated sample is masked out
    assert m10["grader/format"] == 0.5 and m10["env/e/pass_rate"] == 0.75  # pass = rubric reward ≥ 1

    shaped = build_config(
        {
            "sampling": {"max_tokens": 8},
            "rl": {"overlong_buffer": 2, "truncation": "penalty", "token_cost": 0.01},
        }
    )
    _, m = assign_advantages(batch(0), shaped, generator=gen)
    # rewards: 1 − .02 | 1 − .02 | truncated → −1 | 2 + soft overlong (6 − 7)/2 − .07
    assert m["reward"] == pytest.approx((0.98 + 0.98 - 1.0 + (2 - 0.5 - 0.07)) / 4)
