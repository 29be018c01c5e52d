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

from verigym.train._cpu_autograd import NormLinears, RMSNormFn, RotaryFn, SwiGLUMLP, rms_norm_backward

__all__ = ["NormLinears", "RMSNormFn", "RotaryFn", "SwiGLUMLP", "active", "lean_layers", "rms_norm_backward"]

NORMS = frozenset({"LlamaRMSNorm", "Qwen2RMSNorm", "MistralRMSNorm"})
MLPS = frozenset({"LlamaMLP", "Qwen2MLP", "MistralMLP"})
ATTENTIONS = frozenset({"LlamaAttention"})
LAYERS = frozenset({"LlamaDecoderLayer"})
MIN_HIDDEN = 256
"""RMSNorms over fewer features keep their own forward (the tiny models' 64)."""

_ACTIVE: ContextVar[bool] = ContextVar("verigym_lean_layers", default=False)
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def active() -> bool:
    """Whether this thread is inside ``lean_layers`` (``training_kernels(model=...)``)."""
    return _ACTIVE.get()


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


def _attention_ok(
    self: Any,
    hidden_states: torch.Tensor,
    position_embeddings: Any,
    attention_mask: Any,
    cache: Any,
    kwargs: dict[str, Any],
) -> bool:
    return bool(
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


def _attend(
    self: Any,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor],
    attention_mask: torch.Tensor,
) -> torch.Tensor:
    """Rotary, SDPA over grouped heads, the output product: the rest of ``LlamaAttention.forward``."""
    lead = q.shape[:-1]
    shape = (*lead, -1, self.head_dim)
    q, k, v = q.view(shape).transpose(1, 2), k.view(shape).transpose(1, 2), v.view(shape).transpose(1, 2)
    cos, sin = position_embeddings
    q, k = RotaryFn.apply(q, k, cos, sin)
    gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask, scale=self.scaling, **gqa)
    out = out.transpose(1, 2).reshape(*lead, -1).contiguous()
    return self.o_proj(out)  # type: ignore[no-any-return]


def _attention_forward(
    self: Any,
    hidden_states: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
    attention_mask: torch.Tensor | None = None,
    cache: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    if not _attention_ok(self, hidden_states, position_embeddings, attention_mask, cache, kwargs):
        return type(self).forward(  # type: ignore[no-any-return]
            self, hidden_states, position_embeddings, attention_mask, cache, **kwargs
        )
    assert position_embeddings is not None and attention_mask is not None
    q, k, v = (self.q_proj(hidden_states), self.k_proj(hidden_states), self.v_proj(hidden_states))
    return _attend(self, q, k, v, position_embeddings, attention_mask), None


def _layer_forward(
    self: Any,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    position_ids: Any = None,
    cache: Any = None,
    use_cache: bool | None = False,
    position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
    **kwargs: Any,
) -> torch.Tensor:
    """``LlamaDecoderLayer.forward`` with each RMSNorm inside the products after it (``NormLinears``
    for the query/key/value products, ``SwiGLUMLP`` for the MLP): the norms' outputs are not kept."""
    attn, mlp = self.self_attn, self.mlp
    n1, n2 = self.input_layernorm, self.post_attention_layernorm
    if not (
        _attention_ok(attn, hidden_states, position_embeddings, attention_mask, cache, kwargs)
        and _plain_f32(n1.weight, n2.weight, mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight)
        and _plain_f32(attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight)
        and hidden_states.numel() > 0
    ):
        return type(self).forward(  # type: ignore[no-any-return]
            self, hidden_states, attention_mask, position_ids, cache, use_cache, position_embeddings, **kwargs
        )
    assert position_embeddings is not None and attention_mask is not None
    ws = (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight)
    q, k, v = NormLinears.apply(hidden_states, n1.weight, float(n1.variance_epsilon), *ws)
    h = hidden_states + _attend(attn, q, k, v, position_embeddings, attention_mask)
    mws = (mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight)
    out: torch.Tensor = h + SwiGLUMLP.apply(h, *mws, n2.weight, float(n2.variance_epsilon))
    return out


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
        elif name in LAYERS and _lean_layer(m, min_weight):
            out.append((m, _layer_forward))
    return out


def _lean_layer(m: Any, min_weight: int) -> bool:
    """A decoder layer whose norms, attention and MLP are all of the kinds above, unbiased and large."""
    attn: Any = getattr(m, "self_attn", None)
    mlp: Any = getattr(m, "mlp", None)
    norms = (getattr(m, "input_layernorm", None), getattr(m, "post_attention_layernorm", None))
    if type(attn).__name__ not in ATTENTIONS or type(mlp).__name__ not in MLPS:
        return False
    if not all(type(n).__name__ in NORMS and hasattr(n, "variance_epsilon") for n in norms):
        return False
    lins = [getattr(attn, p, None) for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
    lins += [getattr(mlp, p, None) for p in ("gate_proj", "up_proj", "down_proj")]
    return (
        all(type(lin) is torch.nn.Linear and lin.bias is None for lin in lins)
        and mlp.gate_proj.weight.numel() >= min_weight
        and attn.q_proj.weight.numel() >= min_weight
        and getattr(mlp.config, "hidden_act", None) == "silu"
    )


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
