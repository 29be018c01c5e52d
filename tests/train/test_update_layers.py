"""The RL update's lean decoder layers (``train._cpu_layers``), the head's in-place gradient and the
malloc settings (``train._malloc``), issue 43 item 2 (peak RSS).

Each autograd Function on a hand-checked small case and on random shapes against autograd of the
plain operations in float64; the lean forward's values bit for bit equal to the routed plain forward;
the packed forward with the lean layers against the plain full-logits reference of
``test_update_kernels`` (grouped-query attention included); a packed ``policy_update`` with them
equal to one without; the tiny models keep every original module forward.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from test_update_kernels import _grads, _graph, _reference, _rows, _tiny

from verigym.train import _cpu_kernels as K
from verigym.train import _cpu_layers as CL
from verigym.train import _malloc
from verigym.train._update import UpdateState, policy_update
from verigym.train.config import build_config
from verigym.train.optim import make_scheduler
from verigym.train.packing import forward_packed

torch.set_num_threads(1)


def _close(got: torch.Tensor | None, want: torch.Tensor | None, rel: float = 2e-6) -> None:
    assert got is not None and want is not None
    got, want = got.detach(), want.detach()
    assert float((got.double() - want.double()).abs().max()) <= rel * max(float(want.abs().max()), 1e-12)


def test_rms_norm_on_a_hand_checked_case() -> None:
    x = torch.tensor([[1.0, 1.0], [3.0, 4.0]], requires_grad=True)
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    y = CL.RMSNormFn.apply(x, w, 0.0)
    r = 1 / math.sqrt(12.5)
    assert y.flatten().tolist() == pytest.approx([1.0, 2.0, 3 * r, 8 * r])
    y.backward(torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    assert x.grad is not None and w.grad is not None
    assert x.grad.flatten().tolist() == pytest.approx([0.5, -0.5, 0.0, 0.0])  # rstd·(g·w − h·mean(g·w·h))
    assert w.grad.tolist() == pytest.approx([1.0, 0.0])  # Σ g·h


@pytest.mark.parametrize("shape", [(3, 8), (2, 5, 64), (1, 7, 576)])
def test_rms_norm_equals_the_plain_ops(shape: tuple[int, ...]) -> None:
    g = torch.Generator().manual_seed(shape[-1])
    x = torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_()
    w = torch.randn(shape[-1], generator=g, dtype=torch.float64).requires_grad_()
    up = torch.randn(*shape, generator=g, dtype=torch.float64)
    y = CL.RMSNormFn.apply(x, w, 1e-5)
    got = torch.autograd.grad(y, (x, w), up)
    ref = w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))  # HF's LlamaRMSNorm
    want = torch.autograd.grad(ref, (x, w), up)
    _close(y, ref, 1e-14)
    for a, b in zip(got, want, strict=True):
        _close(a, b, 1e-12)
    x32, w32 = x.detach().float(), w.detach().float()
    plain = w32 * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5))
    assert torch.equal(CL.RMSNormFn.apply(x32, w32, 1e-5), plain)  # the same float32 ops: bit for bit


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    return torch.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)


def test_rotary_on_a_hand_checked_case() -> None:
    q = torch.tensor([[[[1.0, 2.0, 3.0, 4.0]]]], requires_grad=True)  # (1, 1 head, 1 position, 4)
    k = torch.tensor([[[[0.0, 1.0, 0.0, 0.0]]]], requires_grad=True)
    cos = torch.tensor([[[0.5, 0.5, 0.5, 0.5]]])
    sin = torch.tensor([[[1.0, 1.0, 1.0, 1.0]]])
    qo, ko = CL.RotaryFn.apply(q, k, cos, sin)
    assert qo.tolist() == [[[[0.5 - 3.0, 1.0 - 4.0, 1.5 + 1.0, 2.0 + 2.0]]]]  # q·cos + [−q₂, q₁]·sin
    assert ko.tolist() == [[[[0.0, 0.5, 0.0, 1.0]]]]
    (qo.sum() + 0 * ko.sum()).backward()
    assert q.grad is not None
    assert q.grad.tolist() == [[[[1.5, 1.5, -0.5, -0.5]]]]  # cos + [s₂, −s₁]


@pytest.mark.parametrize("heads", [(4, 4), (9, 3), (2, 1)])
def test_rotary_equals_the_plain_ops(heads: tuple[int, int]) -> None:
    g = torch.Generator().manual_seed(sum(heads))
    q = torch.randn(1, heads[0], 11, 16, generator=g, dtype=torch.float64).requires_grad_()
    k = torch.randn(1, heads[1], 11, 16, generator=g, dtype=torch.float64).requires_grad_()
    cos, sin = (
        torch.randn(1, 11, 16, generator=g, dtype=torch.float64),
        torch.randn(1, 11, 16, generator=g, dtype=torch.float64),
    )
    uq, uk = torch.randn_like(q), torch.randn_like(k)
    qo, ko = CL.RotaryFn.apply(q, k, cos, sin)
    got = torch.autograd.grad((qo, ko), (q, k), (uq, uk))
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    rq, rk = q * c + _rotate_half(q) * s, k * c + _rotate_half(k) * s  # HF's apply_rotary_pos_emb
    want = torch.autograd.grad((rq, rk), (q, k), (uq, uk))
    assert torch.equal(qo, rq) and torch.equal(ko, rk)
    for a, b in zip(got, want, strict=True):
        _close(a, b, 1e-14)


def test_swiglu_mlp_on_a_hand_checked_case() -> None:
    x = torch.tensor([[1.0, 0.0]], requires_grad=True)
    wg = torch.tensor([[0.0, 0.0], [2.0, 0.0]], requires_grad=True)  # gate = [0, 2]
    wu = torch.tensor([[3.0, 0.0], [1.0, 0.0]], requires_grad=True)  # up = [3, 1]
    wd = torch.tensor([[1.0, 1.0]], requires_grad=True)
    y = CL.SwiGLUMLP.apply(x, wg, wu, wd)
    s2 = 1 / (1 + math.exp(-2.0))
    assert y.flatten().tolist() == pytest.approx([2 * s2])  # silu(0)·3 + silu(2)·1
    y.backward(torch.ones(1, 1))
    dsilu2 = s2 * (1 + 2 * (1 - s2))
    assert wd.grad is not None and wu.grad is not None and wg.grad is not None and x.grad is not None
    assert wd.grad.flatten().tolist() == pytest.approx([0.0, 2 * s2])  # g·prod
    assert wu.grad.flatten().tolist() == pytest.approx([0.0, 0.0, 2 * s2, 0.0])  # (g·wd·silu(gate))ᵀ x
    assert wg.grad.flatten().tolist() == pytest.approx([1.5, 0.0, dsilu2, 0.0])  # (g·wd·up·silu')ᵀ x
    assert x.grad.flatten().tolist() == pytest.approx(
        [2 * dsilu2 + 2 * s2, 0.0], rel=1e-6
    )  # ggate·wg + gup·wu


@pytest.mark.parametrize("shape", [(7, 64, 256), (3, 5, 96, 200), (1, 506, 576, 1536)])
def test_swiglu_mlp_equals_the_plain_ops_in_float64(shape: tuple[int, ...]) -> None:
    g = torch.Generator().manual_seed(sum(shape))
    *lead, d, h = shape
    x = torch.randn(*lead, d, generator=g)
    ws = [
        torch.randn(h, d, generator=g) / d**0.5,
        torch.randn(h, d, generator=g) / d**0.5,
        torch.randn(d, h, generator=g) / h**0.5,
    ]
    up = torch.randn(*lead, d, generator=g)
    ins = [t.clone().requires_grad_() for t in (x, *ws)]
    y = CL.SwiGLUMLP.apply(*ins)
    got = torch.autograd.grad(y, ins, up)
    r = [t.double().requires_grad_() for t in (x, *ws)]
    ref = F.linear(F.silu(F.linear(r[0], r[1])) * F.linear(r[0], r[2]), r[3])
    want = torch.autograd.grad(ref, r, up.double())
    _close(y, ref)
    for a, b in zip(got, want, strict=True):
        _close(a, b)


def test_head_gradient_is_added_in_place_by_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "IN_PLACE_MIN", 1)
    monkeypatch.setattr(K, "IN_PLACE_ROWS", 3)  # 10 output rows: blocks of 3, 3, 3, 1
    g = torch.Generator().manual_seed(0)
    w = torch.nn.Parameter(torch.randn(10, 6, generator=g))
    xs = [torch.randn(4, 6, generator=g) for _ in range(2)]
    ups = [torch.randn(4, 10, generator=g) for _ in range(2)]
    for x, up in zip(xs, ups, strict=True):
        K.OneDnnLinear.apply(x, w, None).backward(up)
    assert w.grad is not None
    want = sum(u.double().t() @ x.double() for x, u in zip(xs, ups, strict=True))
    _close(w.grad, want)  # type: ignore[arg-type]
    grad = w.grad
    K.OneDnnLinear.apply(xs[0], w, None).backward(ups[0])
    assert w.grad is grad  # the same tensor, added into
    hooked = torch.nn.Parameter(w.detach().clone())
    hooked.grad = torch.zeros_like(hooked)
    seen: list[bool] = []
    hooked.register_post_accumulate_grad_hook(lambda p: seen.append(True))
    K.OneDnnLinear.apply(xs[0], hooked, None).backward(ups[0])
    assert seen == [True]  # a parameter with gradient hooks goes through autograd as before


def _gqa_model() -> Any:
    """A 2-layer Llama with 4 query heads over 2 key/value heads (grouped-query attention)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=True)  # fmt: skip
    model = LlamaForCausalLM(cfg).float()
    model.set_attn_implementation("sdpa")
    return model


def _all_lean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "MIN_WEIGHT", 1)  # every layer of a small model through oneDNN ...
    monkeypatch.setattr(CL, "MIN_HIDDEN", 1)  # ... and through the lean layers


def test_lean_forward_values_equal_the_routed_plain_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    _all_lean(monkeypatch)
    model = _gqa_model().train()
    rows = _rows(seed=2)
    with K.training_kernels():
        plain = forward_packed(model, rows, 1.0, share_prefix=True)
    with K.training_kernels(model=model):
        lean = forward_packed(model, rows, 1.0, share_prefix=True)
    names = {type(fn).__name__ for fn in _graph(lean.logp.grad_fn)}
    assert {"RMSNormFnBackward", "SwiGLUMLPBackward", "RotaryFnBackward", "NormLinearsBackward"} <= names
    assert not {"RMSNormFnBackward", "SwiGLUMLPBackward"} & {
        type(fn).__name__ for fn in _graph(plain.logp.grad_fn)
    }
    assert torch.equal(plain.logp, lean.logp)  # the same float32 operations, GQA without repeated keys
    assert all("forward" not in m.__dict__ for m in model.modules())  # swapped back on exit


@pytest.mark.parametrize("build", [_gqa_model, _tiny])
def test_lean_path_equals_a_plain_full_logits_reference(build: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _all_lean(monkeypatch)
    model = build().train()
    rows = _rows(seed=4)
    ref = _reference(model, rows, 0.8)
    g_ref = _grads(model, sum((lp * (i + 1.0)).sum() for i, lp in enumerate(ref)))  # type: ignore[arg-type]
    with K.training_kernels(model=model):
        fwd = forward_packed(model, rows, 0.8, share_prefix=True)
    assert "SwiGLUMLPBackward" in {type(fn).__name__ for fn in _graph(fwd.logp.grad_fn)}
    loss = torch.zeros(())
    for i, lp in enumerate(ref):
        got = fwd.logp[i, : len(lp)]
        assert got.detach().tolist() == pytest.approx(lp.detach().tolist(), abs=2e-5)
        loss = loss + (got * (i + 1.0)).sum()
    for a, b in zip(g_ref, _grads(model, loss), strict=True):
        assert float((a - b).abs().max()) <= 1e-4 * max(float(a.abs().max()), 1e-6)


def test_a_packed_update_with_the_lean_layers_equals_one_without(monkeypatch: pytest.MonkeyPatch) -> None:
    _all_lean(monkeypatch)
    base = _gqa_model()
    rows = _rows(seed=1)
    results = []
    for lean in (False, True):
        model = copy.deepcopy(base)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        state = UpdateState(opt, make_scheduler(opt, "constant", 0, 100), torch.Generator().manual_seed(0))
        cfg = build_config({"rl": {"preset": "dapo", "packing": True, "grad_accum": 2}}).rl
        with monkeypatch.context() as mp:
            if not lean:
                mp.setattr(CL, "_swaps", lambda *_: [])
            metrics = policy_update(
                model, copy.deepcopy(rows), cfg, state, pad_id=0, temperature=1.0, max_len=16
            )
        results.append((metrics, [p.detach().clone() for p in model.parameters()]))
    (m0, p0), (m1, p1) = results
    for k in ("loss", "nll", "entropy", "ratio_mean", "grad_norm"):
        assert m0[k] == pytest.approx(m1[k], rel=1e-5, abs=1e-6), k
    for a, b in zip(p0, p1, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_tiny_models_keep_every_module_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def tune() -> bool:
        calls.append("tune")
        return True

    monkeypatch.setattr(_malloc, "tune_for_training", tune)
    monkeypatch.setattr(_malloc, "release", lambda at_exit=False: calls.append("release"))
    model = _tiny()
    assert CL._swaps(model, K.MIN_WEIGHT) == []  # 64-wide: below MIN_WEIGHT and MIN_HIDDEN
    ids = torch.tensor([[5, 17, 11, 82, 90, 2, 6]])
    plain = model(input_ids=ids).logits
    with K.training_kernels(model=model):
        routed = model(input_ids=ids).logits
    assert torch.equal(plain, routed)
    assert calls == []  # malloc left alone for the tiny models
    with K.training_kernels(model=torch.nn.Linear(576, 1536)):  # a real model's weight size
        pass
    assert calls == ["tune", "release", "release"]


def test_malloc_settings_are_glibc_only(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _malloc.tune_for_training() is (_malloc.glibc() is not None)
    _malloc.release()  # malloc_trim(0) on glibc, nothing elsewhere
    monkeypatch.setattr("sys.platform", "darwin")
    assert _malloc.glibc() is None
    monkeypatch.setattr(_malloc, "_DONE", [])
    monkeypatch.setattr(_malloc, "_LIBC", [])
    assert _malloc.tune_for_training() is False
    _malloc.release()  # a no-op off glibc


def test_chunked_head_on_a_hand_checked_case() -> None:
    from verigym.train._cpu_head import HeadLogprobs

    h = torch.tensor([[math.log(3.0), 0.0]], requires_grad=True)
    w = torch.nn.Parameter(torch.tensor([[0.0, 0.0], [1.0, 0.0]]))  # logits [0, log 3]: p = [1/4, 3/4]
    logp, ent = HeadLogprobs.apply(h, w, torch.tensor([0]), torch.tensor([1]), 1.0)
    assert logp.tolist() == pytest.approx([math.log(0.75)])
    assert ent.tolist() == pytest.approx([-(0.25 * math.log(0.25) + 0.75 * math.log(0.75))])
    logp.sum().backward()
    assert h.grad is not None and w.grad is not None
    assert h.grad.flatten().tolist() == pytest.approx([0.25, 0.0])  # (onehot − p) @ W
    assert w.grad.flatten().tolist() == pytest.approx([-math.log(3) / 4, 0.0, math.log(3) / 4, 0.0])


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_head_equals_the_full_log_softmax_in_float64(
    temperature: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verigym.train import _cpu_head as H

    monkeypatch.setattr(H, "CHUNK", 5)  # 13 rows: chunks of 5, 5, 3
    monkeypatch.setattr(K, "IN_PLACE_MIN", 1)
    g = torch.Generator().manual_seed(int(temperature * 10))
    h, w = torch.randn(13, 16, generator=g), torch.randn(50, 16, generator=g) / 4
    pos = torch.tensor([0, 0, 3, 7, 12, 12, 5, 4, 5])  # a row scoring several targets (a shared prompt)
    tgt = torch.tensor([1, 2, 3, 49, 0, 7, 7, 7, 8])
    ups = [torch.randn(9, generator=g) for _ in range(2)]
    hh, ww = h.clone().requires_grad_(), torch.nn.Parameter(w.clone())
    h64, w64 = h.double().requires_grad_(), w.double().requires_grad_()
    for up in ups:  # the second pass adds into ww.grad in place
        logp, ent = H.HeadLogprobs.apply(hh, ww, pos, tgt, temperature)
        logp.backward(up)
        full = torch.log_softmax(h64 @ w64.t() / temperature, dim=-1)
        full[pos, tgt].backward(up.double())
        _close(logp, full[pos, tgt].detach(), 1e-6)
        _close(ent, -(full.exp() * full).sum(-1).detach(), 1e-6)
    _close(hh.grad, h64.grad, 1e-6)
    _close(ww.grad, w64.grad, 1e-6)


def _plain_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def test_norm_linears_on_a_hand_checked_case() -> None:
    x = torch.tensor([[3.0, 4.0]], requires_grad=True)  # rstd = 1/sqrt(12.5) at eps 0
    wn = torch.tensor([1.0, 1.0], requires_grad=True)
    a, b = (
        torch.tensor([[1.0, 0.0]], requires_grad=True),
        torch.tensor([[0.0, 1.0], [1.0, 1.0]], requires_grad=True),
    )
    ya, yb = CL.NormLinears.apply(x, wn, 0.0, a, b)
    r = 1 / math.sqrt(12.5)
    assert ya.flatten().tolist() == pytest.approx([3 * r])
    assert yb.flatten().tolist() == pytest.approx([4 * r, 7 * r])
    (ya.sum() + yb[:, 1].sum()).backward()
    assert a.grad is not None and b.grad is not None and wn.grad is not None and x.grad is not None
    assert a.grad.flatten().tolist() == pytest.approx([3 * r, 4 * r])  # g·y
    assert b.grad.flatten().tolist() == pytest.approx([0.0, 0.0, 3 * r, 4 * r])
    assert wn.grad.flatten().tolist() == pytest.approx([2 * 3 * r, 4 * r])  # gy·h, gy = [2, 1]
    gy, h = torch.tensor([2.0, 1.0]), torch.tensor([3 * r, 4 * r])
    assert x.grad.flatten().tolist() == pytest.approx((r * (gy - h * (gy * h).mean())).tolist())


@pytest.mark.parametrize("shape", [(7, 64, (64, 32)), (1, 506, 576, (576, 192, 192))])
def test_norm_linears_and_normed_swiglu_equal_the_plain_ops_in_float64(shape: tuple[Any, ...]) -> None:
    *lead, d, outs = shape
    g = torch.Generator().manual_seed(d)
    x = torch.randn(*lead, d, generator=g)
    wn = 1 + 0.1 * torch.randn(d, generator=g)
    ws = [torch.randn(o, d, generator=g) / d**0.5 for o in outs]
    ups = [torch.randn(*lead, o, generator=g) for o in outs]
    ins = [t.clone().requires_grad_() for t in (x, wn, *ws)]
    got_out = CL.NormLinears.apply(ins[0], ins[1], 1e-5, *ins[2:])
    got = torch.autograd.grad(got_out, ins, ups)
    r = [t.double().requires_grad_() for t in (x, wn, *ws)]
    y = _plain_norm(r[0], r[1], 1e-5)
    ref_out = [F.linear(y, w) for w in r[2:]]
    want = torch.autograd.grad(ref_out, r, [u.double() for u in ups])
    for a, b in zip((*got_out, *got), (*ref_out, *want), strict=True):
        _close(a, b, 5e-6)
    h = 3 * d  # the MLP with its norm inside
    mw = [
        torch.randn(h, d, generator=g) / d**0.5,
        torch.randn(h, d, generator=g) / d**0.5,
        torch.randn(d, h, generator=g) / h**0.5,
    ]
    up = torch.randn(*lead, d, generator=g)
    ins = [t.clone().requires_grad_() for t in (x, *mw, wn)]
    out = CL.SwiGLUMLP.apply(*ins[:4], ins[4], 1e-5)
    got = torch.autograd.grad(out, ins, up)
    r = [t.double().requires_grad_() for t in (x, *mw, wn)]
    y = _plain_norm(r[0], r[4], 1e-5)
    ref = F.linear(F.silu(F.linear(y, r[1])) * F.linear(y, r[2]), r[3])
    want = torch.autograd.grad(ref, r, up.double())
    for a, b in zip((out, *got), (ref, *want), strict=True):
        _close(a, b, 5e-6)


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_blocked_attention_equals_sdpa_block_by_block_bit_for_bit(kv_heads: int) -> None:
    """``BlockedAttention`` (one output buffer, torch's CPU flash kernel) against what it replaced:
    ``F.scaled_dot_product_attention`` per block and a ``cat``; grouped heads with ``enable_gqa``."""
    g = torch.Generator().manual_seed(kv_heads)
    blocks = [(0, 5), (5, 12), (12, 13), (13, 20)]
    mask = torch.zeros(20, 20, dtype=torch.bool)
    for a, b in blocks:
        mask[a:b, a:b] = torch.ones(b - a, b - a).tril().bool()
    mask[8, 6] = False
    mask = mask[None, None]
    q = torch.randn(1, 4, 20, 8, generator=g).requires_grad_()
    k, v = (torch.randn(1, kv_heads, 20, 8, generator=g).requires_grad_() for _ in range(2))
    up = torch.randn(1, 4, 20, 8, generator=g)
    kw = {"enable_gqa": True} if kv_heads != 4 else {}
    per = torch.cat(
        [F.scaled_dot_product_attention(q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], attn_mask=mask[..., a:b, a:b], scale=0.3, **kw) for a, b in blocks],
        dim=-2,
    )  # fmt: skip
    with K.training_kernels(), K.attention_blocks(blocks):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3, **kw)
    assert type(out.grad_fn).__name__ == "BlockedAttentionBackward"
    assert out.transpose(1, 2).is_contiguous()  # the output product reads it without a copy
    assert torch.equal(out, per)
    for got, want in zip(
        torch.autograd.grad(out, (q, k, v), up), torch.autograd.grad(per, (q, k, v), up), strict=True
    ):
        assert torch.equal(got, want)
