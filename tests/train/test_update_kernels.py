"""The RL update's CPU kernels (``train._cpu_kernels``, issue 43 item 2) against plain references.

``OneDnnLinear`` (oneDNN products, forward and backward) against ``F.linear`` in float64, on a
hand-checkable 2 × 3 · 3 × 4 case and on random shapes; SDPA run block by block over a packed sequence
against dense SDPA under the block-diagonal mask (outputs and gradients); and the whole new path
(``packing.forward_packed`` inside ``training_kernels()``, every layer routed through oneDNN) against
a plain full-logits reference: each row alone through the model with ``F.linear`` and dense attention,
a log-softmax over the whole vocabulary at every position, the target's entry gathered. Per-token
log-probabilities and every parameter's gradient agree within float32 tolerance, and a packed
``policy_update`` with the kernels equals one without them. The tiny models' layers (below
``MIN_WEIGHT``) keep ``F.linear`` bit for bit, and ``make_optimizer(foreach=True)`` keeps foreach
AdamW for them (so training fingerprints of the tiny models are unchanged).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from verigym.train import _cpu_kernels as K
from verigym.train._update import UpdateState, policy_update
from verigym.train.config import build_config
from verigym.train.optim import FUSED_MIN, make_optimizer, make_scheduler
from verigym.train.packing import forward_packed, pack_rows, row_starts
from verigym.train.samples import Row

torch.set_num_threads(1)


def _tiny(attn: str = "sdpa") -> Any:
    from verigym.policies.tiny import build_model, build_tokenizer

    model = build_model("tiny", build_tokenizer(), seed=0)
    model.set_attn_implementation(attn)
    return model


def _rows(seed: int = 0, vocab: int = 100) -> list[Row]:
    """Two groups of three rows sharing a prompt; completions of different lengths, the last row of
    each group multi-turn (environment tokens, mask 0, then more model tokens)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for prompt in ([5, 17, 11, 82, 90, 2, 6], [5, 12, 82, 19, 19, 90, 2, 6]):
        for k in range(3):
            comp = torch.randint(10, vocab, (2 + 3 * k,), generator=g).tolist()
            env = [30, 31] if k == 2 else []
            more = torch.randint(10, vocab, (2,), generator=g).tolist() if env else []
            ids = prompt + comp + env + more
            mask = [0] * len(prompt) + [1] * len(comp) + [0] * len(env) + [1] * len(more)
            lps = [-0.05 * (i % 7) for i in range(len(ids))]
            rows.append(Row(ids=ids, mask=mask, logprobs=lps, advantage=k - 1.0))
    return rows


def test_onednn_linear_on_a_hand_checked_case() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0], [0.0, -1.0, 0.5]], requires_grad=True)
    w = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]], requires_grad=True)
    b = torch.tensor([0.0, 0.0, 0.0, 10.0], requires_grad=True)
    y = K.OneDnnLinear.apply(x, w, b)
    assert y.tolist() == [[1.0, 2.0, 3.0, 16.0], [0.0, -1.0, 0.5, 9.5]]
    y.backward(torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 2.0]]))
    assert x.grad is not None and w.grad is not None and b.grad is not None
    assert x.grad.tolist() == [[2.0, 1.0, 1.0], [2.0, 2.0, 2.0]]  # g @ w
    assert w.grad.tolist() == [[1.0, 2.0, 3.0], [0.0] * 3, [0.0] * 3, [1.0, 0.0, 4.0]]  # g.T @ x
    assert b.grad.tolist() == [1.0, 0.0, 0.0, 3.0]


@pytest.mark.parametrize("shape", [(7, 64, 256), (3, 5, 96, 1024), (1, 576, 1536)])
@pytest.mark.parametrize("bias", [False, True])
def test_onednn_linear_equals_f_linear_in_float64(shape: tuple[int, ...], bias: bool) -> None:
    g = torch.Generator().manual_seed(sum(shape))
    *lead, k, n = shape
    x = torch.randn(*lead, k, generator=g).requires_grad_()
    w = (torch.randn(n, k, generator=g) / k**0.5).requires_grad_()
    b = torch.randn(n, generator=g).requires_grad_() if bias else None
    up = torch.randn(*lead, n, generator=g)
    y = K.OneDnnLinear.apply(x, w, b)
    y.backward(up)
    got = [y.detach(), x.grad, w.grad] + ([b.grad] if b is not None else [])
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    b64 = b.detach().double().requires_grad_() if b is not None else None
    y64 = F.linear(x64, w64, b64)
    y64.backward(up.double())
    want = [y64.detach(), x64.grad, w64.grad] + ([b64.grad] if b64 is not None else [])
    for a, r in zip(got, want, strict=True):
        assert a is not None and r is not None
        assert float((a.double() - r).abs().max()) <= 2e-6 * float(r.abs().max())


def test_only_large_float32_cpu_weights_are_routed() -> None:
    x = torch.randn(4, 64)
    assert K.usable(torch.randn(4, 576), torch.randn(1536, 576))
    assert not K.usable(x, torch.randn(256, 64))  # the tiny model's MLP: 16,384 < MIN_WEIGHT
    assert not K.usable(x.double(), torch.randn(2048, 64).double())
    assert not K.usable(x.bfloat16(), torch.randn(2048, 64).bfloat16())
    assert not K.usable(torch.zeros(0, 576), torch.randn(1536, 576))  # no rows: F.linear
    lin = torch.nn.Linear(576, 1536)
    with K.training_kernels():
        y = lin(torch.randn(3, 576))
        small = torch.nn.Linear(64, 256)(x)
        with K.training_kernels(enabled=False):
            pass
    assert type(y.grad_fn).__name__ == "OneDnnLinearBackward"
    assert type(small.grad_fn).__name__ == "AddmmBackward0"


def test_blocked_attention_equals_dense_attention_under_the_block_mask() -> None:
    g = torch.Generator().manual_seed(3)
    blocks = [(0, 5), (5, 12), (12, 13), (13, 20)]
    n = blocks[-1][1]
    mask = torch.zeros(n, n, dtype=torch.bool)
    for a, b in blocks:  # causal within each block, a key row missing here and there
        mask[a:b, a:b] = torch.ones(b - a, b - a).tril().bool()
    mask[8, 6] = False
    mask = mask[None, None]
    q, k, v = (torch.randn(1, 4, n, 8, generator=g).requires_grad_() for _ in range(3))
    up = torch.randn(1, 4, n, 8, generator=g)
    dense = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
    grads = torch.autograd.grad(dense, (q, k, v), up)
    with K.training_kernels(), K.attention_blocks(blocks):
        blocked = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
        other = F.scaled_dot_product_attention(q[:, :, :7], k[:, :, :7], v[:, :, :7])  # not the pack: as is
    grads_b = torch.autograd.grad(blocked, (q, k, v), up)
    assert type(blocked.grad_fn).__name__ == "BlockedAttentionBackward"
    assert type(other.grad_fn).__name__ != "BlockedAttentionBackward"
    assert torch.allclose(blocked, dense, atol=1e-6)
    for want, got in zip(grads, grads_b, strict=True):
        assert torch.allclose(want, got, atol=1e-6)


def test_pack_blocks_are_the_units_and_the_mask_never_crosses_them() -> None:
    rows = _rows()
    pack = pack_rows(rows, row_starts(rows), share_prefix=True)
    assert pack.attend is not None
    assert [b - a for a, b in pack.blocks] == [7 + 2 + 5 + 12, 8 + 2 + 5 + 12]  # prompt + each tail
    inside = torch.zeros_like(pack.attend[0, 0])
    for a, b in pack.blocks:
        inside[a:b, a:b] = True
    assert not bool((pack.attend[0, 0] & ~inside).any())


def _reference(model: Any, rows: list[Row], temperature: float) -> list[torch.Tensor]:
    """log π of every scored token, each row alone: full logits, plain ``F.linear``, dense attention."""
    out = []
    for r in rows:
        ids = torch.tensor([r.ids])
        logits = model(input_ids=ids, use_cache=False).logits[0, :-1] / temperature
        logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[0, 1:, None])[:, 0]
        out.append(logp[r.mask.index(1) - 1 :])
    return out


def _grads(model: Any, loss: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]


def test_the_new_path_equals_a_plain_full_logits_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "MIN_WEIGHT", 1)  # every layer of the tiny model through oneDNN
    model = _tiny().train()
    rows = _rows(seed=4)
    weights = [
        torch.randn(len(r.ids), generator=torch.Generator().manual_seed(i)) for i, r in enumerate(rows)
    ]
    ref = _reference(model, rows, 0.8)
    ref_loss = sum(
        (lp * w[-len(lp) :] * torch.tensor(r.mask[-len(lp) :])).sum()
        for lp, w, r in zip(ref, weights, rows, strict=True)
    )
    g_ref = _grads(model, ref_loss)  # type: ignore[arg-type]
    with K.training_kernels():
        fwd = forward_packed(model, rows, 0.8, share_prefix=True)
    routed = {type(fn).__name__ for fn in _graph(fwd.logp.grad_fn)}
    assert "OneDnnLinearBackward" in routed and "BlockedAttentionBackward" in routed  # both kernels were used
    loss = torch.zeros(())
    for i, (r, lp, w) in enumerate(zip(rows, ref, weights, strict=True)):
        n = len(lp)
        got = fwd.logp[i, :n]
        assert got.detach().tolist() == pytest.approx(lp.detach().tolist(), abs=2e-5)
        loss = loss + (got * w[-n:] * torch.tensor(r.mask[-n:])).sum()
    for a, b in zip(g_ref, _grads(model, loss), strict=True):
        assert float((a - b).abs().max()) <= 1e-4 * max(float(a.abs().max()), 1e-6)


def _graph(fn: Any) -> list[Any]:
    seen, todo = [], [fn]
    while todo:
        f = todo.pop()
        if f is None or f in seen:
            continue
        seen.append(f)
        todo.extend(n for n, _ in f.next_functions)
    return seen


def test_a_packed_update_with_the_kernels_equals_one_without(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "MIN_WEIGHT", 1)
    base = _tiny()
    rows = _rows(seed=1)
    results = []
    for on in (False, True):
        model = copy.deepcopy(base)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        state = UpdateState(opt, make_scheduler(opt, "constant", 0, 100), torch.Generator().manual_seed(0))
        cfg = build_config({"rl": {"preset": "dapo", "packing": True, "grad_accum": 2}}).rl
        with monkeypatch.context() as mp:
            if not on:
                mp.setattr(
                    "verigym.train._update.training_kernels", lambda *_, **__: K.training_kernels(False)
                )
            metrics = policy_update(
                model, copy.deepcopy(rows), cfg, state, pad_id=0, temperature=1.0, max_len=16
            )
        results.append((metrics, [p.detach().clone() for p in model.parameters()]))
    (m0, p0), (m1, p1) = results
    for k in ("loss", "nll", "entropy", "ratio_mean", "grad_norm"):
        assert m0[k] == pytest.approx(m1[k], rel=1e-5, abs=1e-6), k
    for a, b in zip(p0, p1, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_tiny_models_keep_the_old_kernels_and_optimizer() -> None:
    model = _tiny()
    assert K.on_cpu(model) and not K.on_cpu(torch.nn.Module())
    ids = torch.tensor([[5, 17, 11, 82, 90, 2, 6]])
    plain = model(input_ids=ids).logits
    with K.training_kernels():
        routed = model(input_ids=ids).logits
    assert torch.equal(plain, routed)  # bit for bit: no layer of the tiny model is routed
    cfg = build_config({}).rl
    opt, _ = make_optimizer(model.parameters(), cfg, 10, foreach=True)
    assert sum(p.numel() for p in model.parameters()) < FUSED_MIN
    assert opt.defaults["foreach"] is True and not opt.defaults.get("fused")
    big, _ = make_optimizer([torch.nn.Parameter(torch.zeros(FUSED_MIN))], cfg, 10, foreach=True)
    assert big.defaults.get("fused") is True
    default, _ = make_optimizer([torch.nn.Parameter(torch.zeros(FUSED_MIN))], cfg, 10)  # SFT: as before
    assert not default.defaults.get("fused")


@pytest.mark.slow
def test_the_new_path_on_smollm2_equals_the_plain_reference() -> None:
    """SmolLM2-135M-Instruct (float32, 30 layers, 49,152-token head): every layer is above
    ``MIN_WEIGHT``, so the packed forward inside ``training_kernels(model=...)`` is the update's real
    path (oneDNN products, attention by block, the lean layers and the chunked head)."""
    from verigym.policies.catalogue import pull
    from verigym.train import load_model
    from verigym.train.config import ModelConfig

    pull("smollm2-135m-instruct")
    model, tok = load_model(ModelConfig(path="smollm2-135m-instruct", tiny=None, dtype="float32"))
    model.train()
    g = torch.Generator().manual_seed(5)
    rows = []
    for k, q in enumerate(("Compute 12 + 34.", "What is 7 times 8? Answer briefly.")):
        prompt = list(tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                              tokenize=True, return_dict=False))  # fmt: skip
        for n in (3, 6):
            comp = torch.randint(100, 49_000, (n,), generator=g).tolist()
            rows.append(Row(ids=prompt + comp, mask=[0] * len(prompt) + [1] * n, logprobs=[0.0] * (len(prompt) + n),
                            advantage=float(k) - 0.5))  # fmt: skip
    ref = _reference(model, rows, 1.0)
    g_ref = _grads(model, sum((lp * (r.advantage + 1.0)).sum() for lp, r in zip(ref, rows, strict=True)))  # type: ignore[arg-type]
    with K.training_kernels(model=model):  # the update's path: lean layers and the chunked head too
        fwd = forward_packed(model, rows, 1.0, share_prefix=True, entropy_grad=False)
    names = {type(fn).__name__ for fn in _graph(fwd.logp.grad_fn)}
    assert {"OneDnnLinearBackward", "SwiGLUMLPBackward", "RMSNormFnBackward", "HeadLogprobsBackward"} <= names
    loss = torch.zeros(())
    for i, (r, lp) in enumerate(zip(rows, ref, strict=True)):
        got = fwd.logp[i, : len(lp)]
        assert got.detach().tolist() == pytest.approx(lp.detach().tolist(), abs=1e-4)
        loss = loss + (got * (r.advantage + 1.0)).sum()
    for a, b in zip(g_ref, _grads(model, loss), strict=True):
        assert float((a - b).abs().max()) <= 1e-3 * max(float(a.abs().max()), 1e-6)
