"""The RL update's decoder layers on a CPU, saving less for the backward pass (issue 43 item 2).

A transformers decoder layer run through autograd keeps, for its backward, more than the gradients
need: HF's RMSNorm saves its input, the normalised input and the scaled output (three
``[tokens × hidden]`` tensors), the rotary embedding saves the queries and keys before and after
``rotate_half``, grouped-query attention saves keys and values repeated to every query head, and the
SwiGLU MLP saves the gate, the up projection, the SiLU and the product (four ``[tokens ×
intermediate]`` tensors). On SmolLM2-135M-Instruct at the recipe's 506-token pack that is most of
the ~780 MB of saved activations at the update's peak. Inside ``training_kernels(model=...)``
(``train._cpu_kernels``) the modules of a Llama-family model whose products are routed through oneDNN
(weights of at least ``MIN_WEIGHT`` entries; the built-in tiny models are below it and keep every
original forward, bit for bit) run these instead:

- ``RMSNormFn``: the same forward ops; saves the input and the per-row ``rstd`` only, and recomputes
  the normalised input in backward.
- ``SwiGLUMLP``: gate, up and down products through oneDNN; saves the input, the gate and the up
  projection, and recomputes SiLU and the product in backward (two ``[tokens × intermediate]``
  tensors less a layer).
- ``RotaryFn``: ``q·cos + rotate_half(q)·sin`` for queries and keys with the same forward ops; saves
  ``cos`` and ``sin`` only (the backward is linear).
- The attention forward (``LlamaAttention`` only) calls SDPA with ``enable_gqa=True`` (torch's CPU
  flash kernel reads each key/value head for its group of query heads), so no repeated copy of the
  keys and values is made or saved.

Forward values equal the plain modules' (the same float32 operations; SDPA with grouped heads gives
the same outputs as with repeated ones); gradients are the same sums in another order (float32
round-off; ``tests/train/test_update_layers.py`` checks them against autograd in float64). A module
is swapped only for the duration of ``training_kernels(model=...)`` in the thread that entered it:
its ``forward`` is an instance attribute that defers to the class's own forward everywhere else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["RMSNormFn", "RotaryFn", "SwiGLUMLP", "active", "lean_layers", "rms_norm_backward"]

NORMS = frozenset({"LlamaRMSNorm", "Qwen2RMSNorm", "MistralRMSNorm"})
MLPS = frozenset({"LlamaMLP", "Qwen2MLP", "MistralMLP"})
ATTENTIONS = frozenset({"LlamaAttention"})
MIN_HIDDEN = 256
"""RMSNorms over fewer features keep their own forward (the tiny models' 64)."""

_ACTIVE: ContextVar[bool] = ContextVar("verigym_lean_layers", default=False)
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def active() -> bool:
    """Whether this thread is inside ``lean_layers`` (``training_kernels(model=...)``)."""
    return _ACTIVE.get()


def _mm(a: torch.Tensor, b_t: torch.Tensor) -> torch.Tensor:
    from verigym.train._cpu_kernels import _mm as mm

    return mm(a, b_t)


def rms_norm_backward(
    g: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(input gradient, weight gradient) of ``w · x · rstd`` with ``rstd = 1/sqrt(mean(x²) + eps)``."""
    h = x * rstd
    gw = (g * h).reshape(-1, h.shape[-1]).sum(0)
    gh = g * w
    gx = rstd * (gh - h * (gh * h).mean(-1, keepdim=True))
    return gx, gw


class RMSNormFn(torch.autograd.Function):
    """HF's float32 RMSNorm (``w · x · rsqrt(mean(x²) + eps)``) saving ``x`` and ``rstd`` only."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, w, rstd)
        out: torch.Tensor = w * (x * rstd)
        return out

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        x, w, rstd = ctx.saved_tensors
        gx, gw = rms_norm_backward(g, x, w, rstd)
        return (gx if ctx.needs_input_grad[0] else None), (gw if ctx.needs_input_grad[1] else None), None


def _rotate(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rotate_t(u: torch.Tensor) -> torch.Tensor:
    """The transpose of ``_rotate`` (its gradient): ``[u₂, −u₁]``."""
    half = u.shape[-1] // 2
    return torch.cat((u[..., half:], -u[..., :half]), dim=-1)


class RotaryFn(torch.autograd.Function):
    """HF's ``apply_rotary_pos_emb`` (``unsqueeze_dim=1``) for queries and keys, saving cos and sin only."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        ctx.save_for_backward(cos, sin)
        return (q * cos) + (_rotate(q) * sin), (k * cos) + (_rotate(k) * sin)

    @staticmethod
    def backward(ctx: Any, gq: torch.Tensor, gk: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        cos, sin = ctx.saved_tensors
        out: list[torch.Tensor | None] = []
        for i, g in enumerate((gq, gk)):
            out.append(g * cos + _rotate_t(g * sin) if ctx.needs_input_grad[i] else None)
        return out[0], out[1], None, None


class SwiGLUMLP(torch.autograd.Function):
    """``down(silu(gate(x)) · up(x))`` with oneDNN products, saving ``x``, the gate and the up projection."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, x: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor, wd: torch.Tensor
    ) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        if not flat.is_contiguous():
            flat = flat.contiguous()
        gate, up = _mm(flat, wg), _mm(flat, wu)
        out = _mm(F.silu(gate) * up, wd)
        ctx.save_for_backward(flat, wg, wu, wd, gate, up)
        ctx.in_shape = x.shape
        return out.view(*x.shape[:-1], wd.shape[0])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        flat, wg, wu, wd, gate, up = ctx.saved_tensors
        need_x, need_g, need_u, need_d = ctx.needs_input_grad
        g = grad.reshape(-1, grad.shape[-1])
        if not g.is_contiguous():
            g = g.contiguous()
        sig = torch.sigmoid(gate)
        act = gate * sig  # F.silu's value
        gwd = _mm(g.t(), (act * up).t()) if need_d else None
        gprod = _mm(g, wd.t())
        gup = gprod * act
        del act
        ggate = gprod * up * (sig * (1 + gate * (1 - sig)))
        del gprod, sig
        gx = (_mm(ggate, wg.t()) + _mm(gup, wu.t())).view(ctx.in_shape) if need_x else None
        gwg = _mm(ggate.t(), flat.t()) if need_g else None
        gwu = _mm(gup.t(), flat.t()) if need_u else None
        return gx, gwg, gwu, gwd


def _plain_f32(*ts: Any) -> bool:
    return all(type(t) in _PLAIN and t.dtype == torch.float32 and t.device.type == "cpu" for t in ts)


def _norm_forward(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
    if _ACTIVE.get() and torch.is_grad_enabled() and _plain_f32(hidden_states, self.weight):
        out: torch.Tensor = RMSNormFn.apply(hidden_states, self.weight, float(self.variance_epsilon))
        return out
    return type(self).forward(self, hidden_states)  # type: ignore[no-any-return]


def _mlp_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    ws = (self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight)
    if _ACTIVE.get() and torch.is_grad_enabled() and x.numel() > 0 and _plain_f32(x, *ws):
        out: torch.Tensor = SwiGLUMLP.apply(x, *ws)
        return out
    return type(self).forward(self, x)  # type: ignore[no-any-return]


def _attention_forward(
    self: Any,
    hidden_states: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
    attention_mask: torch.Tensor | None = None,
    cache: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    lean = (
        _ACTIVE.get()
        and torch.is_grad_enabled()
        and cache is None
        and kwargs.get("past_key_values") is None
        and position_embeddings is not None
        and isinstance(attention_mask, torch.Tensor)
        and attention_mask.dtype == torch.bool
        and getattr(self.config, "_attn_implementation", None) == "sdpa"
        and not (self.training and self.attention_dropout)
        and _plain_f32(hidden_states, *position_embeddings)
        and not any(t.requires_grad for t in position_embeddings)
    )
    if not lean:
        return type(self).forward(  # type: ignore[no-any-return]
            self, hidden_states, position_embeddings, attention_mask, cache, **kwargs
        )
    shape = (*hidden_states.shape[:-1], -1, self.head_dim)
    q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
    k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
    v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
    assert position_embeddings is not None
    cos, sin = position_embeddings
    q, k = RotaryFn.apply(q, k, cos, sin)
    gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask, scale=self.scaling, **gqa)
    out = out.transpose(1, 2).reshape(*hidden_states.shape[:-1], -1).contiguous()
    return self.o_proj(out), None


def _swaps(model: Any, min_weight: int) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for m in model.modules():
        name = type(m).__name__
        if name in NORMS and hasattr(m, "variance_epsilon") and m.weight.numel() >= MIN_HIDDEN:
            out.append((m, _norm_forward))
        elif name in MLPS and all(
            type(getattr(m, p, None)) is torch.nn.Linear and getattr(m, p).bias is None
            for p in ("gate_proj", "up_proj", "down_proj")
        ):
            if m.gate_proj.weight.numel() >= min_weight and getattr(m.config, "hidden_act", None) == "silu":
                out.append((m, _mlp_forward))
        elif name in ATTENTIONS and hasattr(m, "q_proj") and m.q_proj.weight.numel() >= min_weight:
            out.append((m, _attention_forward))
    return out


@contextlib.contextmanager
def lean_layers(model: Any, min_weight: int) -> Iterator[None]:
    """Within: ``model``'s large Llama-family norms, MLPs and attentions run as above, in this thread."""
    swaps = [(m, fn) for m, fn in _swaps(model, min_weight) if "forward" not in m.__dict__]
    for m, fn in swaps:
        m.forward = fn.__get__(m)
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
        for m, _ in swaps:
            m.__dict__.pop("forward", None)
