"""The RL update's matrix products and packed attention on a CPU, without the work torch's defaults do.

**Products through oneDNN.** torch's float32 ``F.linear`` on a CPU runs MKL's sgemm. On AMD processors
MKL takes its AVX2 code path even where the core has AVX-512, while oneDNN (also inside every torch CPU
build, reached through ``torch.ops.mkldnn._linear_pointwise``) picks its kernels by the instructions
the core has: on this project's AMD EPYC (Zen 5) it does 2.0-2.5x MKL's float32 FLOP/s per CPU second
at the shapes of a 135M model's training step (``benchmarks/RESULTS.md``, "The RL update, cheaper").
The results are float32 products summed in another order: equal to MKL's within float32 round-off
(relative ~1e-6), not bitwise. Inside ``training_kernels()`` every ``F.linear`` (so every
``nn.Linear``, the lm head included) on plain float32 CPU tensors whose weight has at least
``MIN_WEIGHT`` entries runs as ``OneDnnLinear``: the forward and both products of the backward (input
and weight gradients) through oneDNN, saving what ``F.linear`` saves. Smaller layers (the built-in
tiny models' 64-wide ones, where a product costs microseconds and both libraries are as fast) keep
the ordinary path, and so do other dtypes, devices and tensor subclasses.

**Packed attention by block.** A packed micro-batch (``train.packing``) is one sequence whose 4D mask
is block-diagonal: a group's prompt and its continuations never see another group's tokens. SDPA
with that mask computes every query against every key of the whole pack and throws most away. Inside
``attention_blocks(blocks)`` (set by ``packing.forward_packed``), a CPU ``F.scaled_dot_product_attention``
over exactly that sequence runs once per block on the block's queries, keys, values and mask: the
same sums without the masked-out cross terms (a pack of 4 groups: ~1/4 of the attention work).

**The head's gradient in place.** A weight of at least ``IN_PLACE_MIN`` entries (a 135M model's tied
lm head / embedding) whose ``.grad`` already holds an earlier micro-batch's sum gets its gradient
added into ``.grad`` by blocks of rows inside ``OneDnnLinear.backward`` (``grad_in_place``), instead
of a second full-size gradient that autograd then adds (113 MB for SmolLM2, at the update's peak).

**With ``model=``** (``training_kernels(cpu, model=net)`` in ``_update.policy_update``), the model's
large Llama-family layers save less for backward (``train._cpu_layers``), ``packing.forward_packed``
projects to the vocabulary by chunks (``train._cpu_head``), and glibc's malloc is set to hand freed
memory back (``train._malloc``): together the update's peak RSS on SmolLM2-135M-Instruct goes from
3.9 GB to under 3 GB (``benchmarks/RESULTS.md``, "The RL update's peak memory under 3 GB").

Backward passes run outside the contexts (autograd calls ``OneDnnLinear.backward`` and SDPA's own
backward on each block), so only the forward needs to be inside.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from verigym._onednn import MIN_WEIGHT, available
from verigym._onednn import mm as _mm

__all__ = [
    "MIN_WEIGHT",
    "OneDnnLinear",
    "attention_blocks",
    "available",
    "lean_training",
    "on_cpu",
    "training_kernels",
    "usable",
]

IN_PLACE_MIN = 1 << 22
"""Weights with at least this many entries (a 135M model's 49,152 × 576 lm head) have their gradient
added into an existing ``.grad`` by blocks inside ``OneDnnLinear.backward`` (``_accumulated``)."""
IN_PLACE_ROWS = 8192
FLASH_BLOCKS = True
"""Packed attention by block through ``BlockedAttention`` (False: SDPA per block and a ``cat``)."""

_PLAIN = (torch.Tensor, torch.nn.Parameter)
_BLOCKS: ContextVar[tuple[tuple[int, int], ...] | None] = ContextVar("verigym_attention_blocks", default=None)


def usable(x: Any, weight: Any, bias: Any = None) -> bool:
    """Whether ``F.linear(x, weight, bias)`` runs through oneDNN inside ``training_kernels()``."""
    return (
        type(x) in _PLAIN
        and type(weight) in _PLAIN
        and (bias is None or (type(bias) in _PLAIN and bias.dtype == torch.float32))
        and x.dtype == torch.float32
        and weight.dtype == torch.float32
        and x.device.type == "cpu"
        and weight.device.type == "cpu"
        and weight.dim() == 2
        and x.dim() >= 1
        and x.numel() > 0  # oneDNN has no weight-gradient product over zero rows
        and weight.numel() >= MIN_WEIGHT
        and x.shape[-1] == weight.shape[1]
        and available()
    )


class OneDnnLinear(torch.autograd.Function):
    """``F.linear`` whose three products (forward, input gradient, weight gradient) run through oneDNN."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        if not flat.is_contiguous():
            flat = flat.contiguous()
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(flat, weight, bias, "none", [], "")
        ctx.save_for_backward(flat, weight)
        ctx.in_shape = x.shape
        ctx.has_bias = bias is not None
        return out.view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        flat, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])
        if not g.is_contiguous():
            g = g.contiguous()
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = _mm(g, weight.t()).view(ctx.in_shape)
        if ctx.needs_input_grad[1] and not _accumulated(weight, g, flat):
            gw = _mm(g.t(), flat.t())
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g.sum(0)
        return gx, gw, gb


def grad_in_place(weight: torch.Tensor) -> bool:
    """Whether a weight's gradient may be added into its existing ``.grad`` inside a backward (instead
    of returned whole for autograd to add, which holds a second full-size gradient at the update's
    peak): at least ``IN_PLACE_MIN`` entries (the lm head / tied embedding), a leaf without gradient
    hooks whose ``.grad`` already holds an earlier micro-batch's sum."""
    grad = weight.grad
    return not (
        weight.numel() < IN_PLACE_MIN
        or not weight.is_leaf
        or grad is None
        or type(grad) is not torch.Tensor
        or grad.shape != weight.shape
        or grad.dtype != weight.dtype
        or not grad.is_contiguous()
        or grad.requires_grad
        or weight._backward_hooks
        or getattr(weight, "_post_accumulate_grad_hooks", None)
    )


def _accumulated(weight: torch.Tensor, g: torch.Tensor, flat: torch.Tensor) -> bool:
    """``g.T @ flat`` added into ``weight.grad`` by blocks of ``IN_PLACE_ROWS`` rows when
    ``grad_in_place(weight)``; False (nothing done) otherwise."""
    if not grad_in_place(weight):
        return False
    grad = weight.grad
    assert grad is not None
    with torch.no_grad():
        for a in range(0, weight.shape[0], IN_PLACE_ROWS):
            b = min(a + IN_PLACE_ROWS, weight.shape[0])
            grad[a:b] += _mm(g[:, a:b].t(), flat.t())
    return True


class BlockedAttention(torch.autograd.Function):
    """SDPA by block through torch's CPU flash kernel (what ``F.scaled_dot_product_attention`` runs for
    these inputs, with the boolean mask made additive as it does), every block writing into one
    ``[1, tokens, heads, dim]`` output: the tensor saved for backward is the one the output product
    reads (``transpose(1, 2).reshape``, no copy), where per-block SDPA calls and a ``cat`` kept two."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor,
        blocks: tuple[tuple[int, int], ...],
        scale: float | None,
    ) -> torch.Tensor:
        out = q.new_empty(q.shape[0], q.shape[2], q.shape[1], v.shape[3])
        lses = []
        for a, b in blocks:
            o, lse = _flash(
                q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], _additive(mask[..., a:b, a:b], q.dtype), scale
            )
            out[:, a:b] = o.transpose(1, 2)
            lses.append(lse)
        ctx.save_for_backward(q, k, v, mask, out, *lses)
        ctx.blocks, ctx.scale = blocks, scale
        return out.transpose(1, 2)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        q, k, v, mask, out, *lses = ctx.saved_tensors
        gq, gk, gv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        for (a, b), lse in zip(ctx.blocks, lses, strict=True):
            dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
                grad[:, :, a:b], q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], out[:, a:b].transpose(1, 2), lse,
                0.0, False, attn_mask=_additive(mask[..., a:b, a:b], q.dtype), scale=ctx.scale,
            )  # fmt: skip
            gq[:, :, a:b], gk[:, :, a:b], gv[:, :, a:b] = dq, dk, dv
        return gq, gk, gv, None, None, None


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask as SDPA passes it to its kernels: 0 where attended, −inf elsewhere."""
    return torch.zeros(mask.shape, dtype=dtype).masked_fill_(~mask, float("-inf"))


def _flash(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, 0.0, False, attn_mask=mask, scale=scale
    )
    return o, lse


def _blocked_sdpa(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """SDPA once per block of the packed sequence, or None when the call is not over that sequence."""
    blocks = _BLOCKS.get()
    if blocks is None or len(args) < 3:
        return None
    q, k, v = args[:3]
    mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
    rest = dict(kwargs)
    rest.pop("attn_mask", None)
    n = blocks[-1][1]
    if (
        len(args) > 4
        or not all(type(t) in _PLAIN and t.device.type == "cpu" and t.dim() == 4 for t in (q, k, v))
        or not isinstance(mask, torch.Tensor)
        or mask.dim() != 4
        or q.shape[0] != 1
        or not (q.shape[2] == k.shape[2] == v.shape[2] == mask.shape[-1] == mask.shape[-2] == n)
        or rest.get("is_causal", False)
        or rest.get("dropout_p", 0.0) != 0.0
    ):
        return None
    if (
        FLASH_BLOCKS
        and set(rest) <= {"scale", "enable_gqa", "is_causal", "dropout_p"}
        and q.dtype == k.dtype == v.dtype == torch.float32
        and mask.dtype == torch.bool
        and mask.shape[:2] == (1, 1)
        and (q.shape[1] == k.shape[1] == v.shape[1] or (rest.get("enable_gqa") and k.shape[1] == v.shape[1]))
    ):
        out: torch.Tensor = BlockedAttention.apply(q, k, v, mask, blocks, rest.get("scale"))
        return out
    sizes = [b - a for a, b in blocks]
    outs = [
        F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask[..., a:b, a:b], **rest)
        for (a, b), qb, kb, vb in zip(
            blocks, q.split(sizes, -2), k.split(sizes, -2), v.split(sizes, -2), strict=True
        )
    ]
    return torch.cat(outs, dim=-2)


class _Mode(TorchFunctionMode):
    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is F.linear and len(args) >= 2:
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if usable(args[0], args[1], bias):
                return OneDnnLinear.apply(args[0], args[1], bias)
        elif func is F.scaled_dot_product_attention:
            out = _blocked_sdpa(args, kwargs)
            if out is not None:
                return out
        return func(*args, **kwargs)


def on_cpu(model: Any) -> bool:
    """Whether ``model``'s first parameter is on the CPU (where ``training_kernels`` is worth entering:
    elsewhere every op of the forward would pay the mode's Python hop for nothing)."""
    first = next(iter(model.parameters()), None)
    return first is not None and first.device.type == "cpu"


@contextlib.contextmanager
def training_kernels(enabled: bool = True, model: Any = None) -> Iterator[None]:
    """Inside, large float32 CPU ``F.linear`` calls run as ``OneDnnLinear`` and SDPA over a packed
    sequence runs by block (see the module doc); ``enabled=False``: nothing changes. ``model``: its
    large Llama-family norms, MLPs and attentions also save less for backward (``train._cpu_layers``),
    and, for a model with weights of at least ``MIN_WEIGHT`` entries, glibc's malloc is set to hand
    large freed blocks back (``train._malloc``)."""
    if not enabled:
        yield
        return
    if model is None:
        with _Mode():
            yield
        return
    from verigym.train import _malloc
    from verigym.train._cpu_layers import lean_layers

    large = _large(model)  # the tiny models' training leaves malloc alone
    if large:
        _malloc.tune_for_training()
        _malloc.release()  # what the last backward and optimizer step freed
    try:
        with _Mode(), lean_layers(model, MIN_WEIGHT):
            yield
    finally:
        if large:
            _malloc.release(at_exit=True)  # the forward's temporaries, before the backward's peak


def lean_training(model: Any) -> bool:
    """Whether ``training_kernels(model=model)`` changes how ``model`` trains: a CPU model with a
    float32 weight of at least ``MIN_WEIGHT`` entries (a real model; the built-in tiny ones keep their
    original modules and numbers bit for bit)."""
    return on_cpu(model) and _large(model)


def _large(model: Any) -> bool:
    """Whether ``model`` has a float32 CPU weight of at least ``MIN_WEIGHT`` entries (a real model)."""
    return any(
        p.numel() >= MIN_WEIGHT and p.dtype == torch.float32 and p.device.type == "cpu"
        for p in model.parameters()
    )


@contextlib.contextmanager
def attention_blocks(blocks: Sequence[tuple[int, int]] | None) -> Iterator[None]:
    """Within ``training_kernels()``: attention over a sequence of ``blocks[-1][1]`` tokens whose mask
    never crosses the half-open ``blocks`` (consecutive, from 0) runs block by block."""
    token = _BLOCKS.set(None if not blocks else tuple((int(a), int(b)) for a, b in blocks))
    try:
        yield
    finally:
        _BLOCKS.reset(token)
