"""Sequence packing for the RL update (``train.packing``): the packed forward gives the padded forward's
per-token logprobs, entropies, loss and gradients within float tolerance, on the tiny model (sdpa and
eager attention, with and without a shared prompt) and on SmolLM2-135M-Instruct; a packed update
equals a padded one; micro-batches respect the token budget."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from verigym.train._update import Forward, UpdateState, forward_rows, policy_update
from verigym.train.config import build_config
from verigym.train.optim import make_scheduler
from verigym.train.packing import forward_packed, plan_micro_batches, row_starts
from verigym.train.samples import Row

torch.set_num_threads(1)


def _tiny(attn: str = "sdpa") -> Any:
    from verigym.policies.tiny import build_model, build_tokenizer

    model = build_model("tiny", build_tokenizer(), seed=0)
    model.set_attn_implementation(attn)
    return model


def _rows(prompts: list[list[int]], seed: int = 0, vocab: int = 100, per: int = 3) -> list[Row]:
    """``per`` rows per prompt, completions of different lengths; the last of each group is multi-turn
    (environment tokens, mask 0, then more model tokens)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for prompt in prompts:
        for k in range(per):
            comp = torch.randint(10, vocab, (2 + 3 * k,), generator=g).tolist()
            env = [30, 31] if k == per - 1 else []
            more = torch.randint(10, vocab, (2,), generator=g).tolist() if env else []
            ids = prompt + comp + env + more
            mask = [0] * len(prompt) + [1] * len(comp) + [0] * len(env) + [1] * len(more)
            lps = [-0.05 * (i % 7) for i in range(len(ids))]
            rows.append(Row(ids=ids, mask=mask, logprobs=lps, advantage=k - 1.0))
    return rows


def _per_token(f: Forward, rows: list[Row], values: torch.Tensor) -> list[float]:
    """The values at every model token, in row order: independent of each layout's ``starts``."""
    out = []
    for i, r in enumerate(rows):
        for t, m in enumerate(r.mask):
            if m:
                out.append(float(values[i, t - f.starts[i]].detach()))
    return out


def _run(model: Any, f: Forward) -> tuple[float, list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    total = (f.logp * f.mask * f.adv[:, None]).sum() + 0.1 * (f.ent * f.mask).sum()
    total.backward()
    return float(total.detach()), [p.grad.clone() for p in model.parameters()]


def _compare(model: Any, rows: list[Row], share: bool, *, atol: float, grad_tol: float) -> None:
    padded = forward_rows(model, rows, 0, 0.8, share_prefix=False)
    packed = forward_packed(model, rows, 0.8, share_prefix=share)
    for name in ("logp", "ent", "mask", "old"):
        a = _per_token(padded, rows, getattr(padded, name))
        b = _per_token(packed, rows, getattr(packed, name))
        assert a == pytest.approx(b, abs=atol), name
    assert float(packed.mask.sum()) == sum(r.model_tokens for r in rows)
    t0, g0 = _run(model, padded)
    t1, g1 = _run(model, packed)
    assert t0 == pytest.approx(t1, rel=1e-5, abs=atol)
    for a, b in zip(g0, g1, strict=True):
        scale = max(float(a.abs().max()), 1e-12)
        assert float((a - b).abs().max()) <= grad_tol * scale


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("share", [False, True])
def test_packed_forward_equals_padded_on_the_tiny_model(attn: str, share: bool) -> None:
    model = _tiny(attn)
    rows = _rows([[5, 17, 11, 82, 90, 2, 6], [5, 12, 82, 19, 19, 90, 2, 6, 7, 8, 9]])
    _compare(model, rows, share, atol=1e-5, grad_tol=1e-5)  # measured: 5e-7, 1.2e-6


def test_micro_batches_hold_every_row_once_within_the_token_budget() -> None:
    rows = _rows([[5, 17, 11, 82], [5, 12, 82, 19, 19, 90], [7, 7, 7]], per=4)
    starts = row_starts(rows)
    for share in (False, True):
        for budget in (8, 20, 40, 10_000):
            plan = plan_micro_batches(rows, starts, share_prefix=share, budget=budget)
            assert sorted(i for mb in plan for i in mb) == list(range(len(rows)))
            for mb in plan:
                prompts = {tuple(rows[i].ids[: starts[i]]) for i in mb}
                size = sum(len(rows[i].ids) - starts[i] for i in mb)
                size += sum(len(p) for p in prompts) if share else sum(starts[i] for i in mb)
                assert size <= budget or len(mb) == 1  # only a row longer than the budget goes over it
        assert len(plan_micro_batches(rows, starts, share_prefix=share, budget=10_000)) == 1
    # grad_accum: at least that many micro-batches
    assert len(plan_micro_batches(rows, starts, share_prefix=True, budget=10_000, at_least=3)) >= 3
    # a group larger than the budget is split across micro-batches, each repeating its prompt
    split = plan_micro_batches(rows, starts, share_prefix=True, budget=20)
    first = [
        j for j, mb in enumerate(split) for i in mb if rows[i].ids[: starts[i]] == rows[0].ids[: starts[0]]
    ]
    assert len(set(first)) > 1


def _sgd_state(model: Any) -> UpdateState:
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
    return UpdateState(
        optimizer=opt,
        scheduler=make_scheduler(opt, "constant", 0, 10),
        generator=torch.Generator().manual_seed(0),
    )


@pytest.mark.parametrize(
    "rl",
    [
        {"preset": "dapo", "grad_accum": 2},
        {"preset": "grpo", "minibatches": 2, "num_iterations": 2, "entropy_coef": 0.01},
        {"preset": "gspo", "pack_tokens": 24},
    ],
)
def test_a_packed_update_equals_a_padded_one(rl: dict[str, Any]) -> None:
    base = _tiny()
    rows = _rows([[5, 17, 11, 82, 90, 2, 6], [5, 12, 82, 19, 19, 90, 2, 6]], seed=1)
    results = []
    for packing in (False, True):
        model = copy.deepcopy(base)
        ref = copy.deepcopy(base).eval().requires_grad_(False)
        cfg = build_config({"rl": {**rl, "packing": packing}}).rl
        metrics = policy_update(
            model, copy.deepcopy(rows), cfg, _sgd_state(model), pad_id=0, temperature=1.0, max_len=16,
            ref_model=ref,
        )  # fmt: skip
        results.append((metrics, [p.detach().clone() for p in model.parameters()]))
    (m0, p0), (m1, p1) = results
    for k in ("loss", "nll", "entropy", "ratio_mean", "grad_norm", "clip_frac_high", "kl"):
        if k in m0:
            assert m0[k] == pytest.approx(m1[k], rel=1e-4, abs=1e-6), k
    for a, b in zip(p0, p1, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


@pytest.mark.slow
def test_packed_forward_equals_padded_on_smollm2() -> None:
    """The shared-prompt packed layout against the padded forward on a real model (fp32, 30 layers)."""
    from verigym.policies.catalogue import pull
    from verigym.train._model import load_model
    from verigym.train.config import ModelConfig

    pull("smollm2-135m-instruct")
    model, tok = load_model(ModelConfig(path="smollm2-135m-instruct", tiny=None, dtype="float32"))
    prompts = [
        tok.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        for q in ("Compute 12 + 34.", "What is 7 times 8? Answer briefly.")
    ]
    rows = _rows([list(p) for p in prompts], vocab=49_000, per=3)
    model.train()
    _compare(model, rows, True, atol=1e-4, grad_tol=1e-3)  # measured: 2.7e-5, 9.3e-5


def test_an_update_drops_the_decode_copies_it_makes_stale() -> None:
    """The local decode path's weight copies (another copy of the weights on a real model) are not held
    through the update's peak: the step makes them stale, and the next generation rebuilds them."""
    from verigym.policies.local import _fast_llama

    model = _tiny()
    before = _fast_llama._weights(model)
    assert model in _fast_llama._CACHE
    rows = _rows([[5, 17, 11, 82, 90, 2, 6]], seed=1)
    cfg = build_config({"rl": {"preset": "dapo"}}).rl
    policy_update(model, rows, cfg, _sgd_state(model), pad_id=0, temperature=1.0, max_len=16)
    assert model not in _fast_llama._CACHE
    after = _fast_llama._weights(model)  # rebuilt from the updated weights
    assert after is not before
    old_t, new_t = before.layers[0][0].t, after.layers[0][0].t  # the tiny model's q/k/v: [in, out] copies
    assert old_t is not None and new_t is not None
    assert not torch.equal(old_t, new_t)
