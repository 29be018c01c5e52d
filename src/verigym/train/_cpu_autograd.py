"""Autograd Functions of the RL update's lean decoder layers (``train._cpu_layers``), issue 43 item 2.

Each computes the same float32 forward values as the plain transformers operations it stands for and
saves less for backward, recomputing the rest there (cheap element-wise work; products through oneDNN,
``train._cpu_kernels._mm``). ``SwiGLUMLP`` and ``NormLinears`` optionally take the RMSNorm before
them (its weight and epsilon): they then save the norm's input and ``rstd`` instead of its output and
recompute the output in backward. Checked against autograd of the plain operations in float64 by
``tests/train/test_update_layers.py``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from verigym._onednn import mm as _mm

__all__ = ["NormLinears", "RMSNormFn", "RotaryFn", "SwiGLUMLP", "rms_norm_backward"]


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


def _rows(x: torch.Tensor) -> torch.Tensor:
    flat = x.reshape(-1, x.shape[-1])
    return flat if flat.is_contiguous() else flat.contiguous()


def _normed(
    flat: torch.Tensor, wn: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(RMSNorm of ``flat`` with weight ``wn``, its rstd), HF's operations; ``wn`` None: (flat, None)."""
    if wn is None:
        return flat, None
    rstd = torch.rsqrt(flat.pow(2).mean(-1, keepdim=True) + eps)
    return wn * (flat * rstd), rstd


def _norm_grads(
    ctx: Any, gy: torch.Tensor, flat: torch.Tensor, wn: torch.Tensor | None, rstd: torch.Tensor | None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(input gradient, norm weight gradient) given the gradient at the norm's output (or its input)."""
    if wn is None or rstd is None:
        return gy.view(ctx.in_shape), None
    gx, gwn = rms_norm_backward(gy, flat, wn, rstd)
    return gx.view(ctx.in_shape), gwn


class SwiGLUMLP(torch.autograd.Function):
    """``down(silu(gate(y)) · up(y))`` with oneDNN products, saving ``y``, the gate and the up projection;
    with ``wn``: ``y = RMSNorm(x)``, and ``x`` and ``rstd`` are saved instead of ``y``."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        x: torch.Tensor,
        wg: torch.Tensor,
        wu: torch.Tensor,
        wd: torch.Tensor,
        wn: torch.Tensor | None = None,
        eps: float = 0.0,
    ) -> torch.Tensor:
        flat = _rows(x)
        y, rstd = _normed(flat, wn, eps)
        gate, up = _mm(y, wg), _mm(y, wu)
        del y
        out = _mm(F.silu(gate) * up, wd)
        ctx.save_for_backward(flat, wg, wu, wd, gate, up, wn, rstd)
        ctx.in_shape, ctx.eps = x.shape, eps
        return out.view(*x.shape[:-1], wd.shape[0])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        flat, wg, wu, wd, gate, up, wn, rstd = ctx.saved_tensors
        n_in = len(ctx.needs_input_grad)  # 4, or 6 with the norm
        need_x, need_g, need_u, need_d, need_n, _ = (*ctx.needs_input_grad, False, False)[:6]
        y, _ = _normed(flat, wn, ctx.eps)
        g = grad.reshape(-1, grad.shape[-1])
        if not g.is_contiguous():
            g = g.contiguous()
        sig = torch.sigmoid(gate)
        act = gate * sig  # F.silu's value
        gwd = _mm(g.t(), (act * up).t()) if need_d else None
        gprod = _mm(g, wd.t())
        gup = gprod * act
        del act
        dsilu = torch.sub(1, sig).mul_(gate).add_(1).mul_(sig)  # silu' = σ·(1 + gate·(1 − σ))
        del sig
        ggate = gprod.mul_(up).mul_(dsilu)  # in place: fewer [tokens × intermediate] temporaries
        del gprod, dsilu
        gwg = _mm(ggate.t(), y.t()) if need_g else None
        gwu = _mm(gup.t(), y.t()) if need_u else None
        gx = gwn = None
        if need_x or need_n:
            gx, gwn = _norm_grads(ctx, _mm(ggate, wg.t()) + _mm(gup, wu.t()), flat, wn, rstd)
        return (gx, gwg, gwu, gwd, gwn, None)[:n_in]


class NormLinears(torch.autograd.Function):
    """``(y @ W₁ᵀ, y @ W₂ᵀ, …)`` with ``y = RMSNorm(x)`` (a layer's query, key and value products),
    saving ``x`` and ``rstd``, not ``y``."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, wn: torch.Tensor, eps: float, *ws: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
        flat = _rows(x)
        y, rstd = _normed(flat, wn, eps)
        outs = tuple(_mm(y, w).view(*x.shape[:-1], w.shape[0]) for w in ws)
        ctx.save_for_backward(flat, wn, rstd, *ws)
        ctx.in_shape, ctx.eps = x.shape, eps
        return outs

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        flat, wn, rstd, *ws = ctx.saved_tensors
        y, _ = _normed(flat, wn, ctx.eps)
        gs = [_rows(g) for g in grads]
        gws = [_mm(g.t(), y.t()) if ctx.needs_input_grad[3 + i] else None for i, g in enumerate(gs)]
        del y
        gx = gwn = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            gy = _mm(gs[0], ws[0].t())
            for g, w in zip(gs[1:], ws[1:], strict=True):
                gy += _mm(g, w.t())
            gx, gwn = _norm_grads(ctx, gy, flat, wn, rstd)
        return (gx, gwn, None, *gws)
