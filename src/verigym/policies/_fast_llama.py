"""A lean decode path for plain Llama-architecture models (the tiny models, Llama-family checkpoints).

It computes exactly what ``LlamaForCausalLM.forward`` computes (same RMSNorm, rotary embedding module,
SDPA attention), reading the model's live weights, but without the per-module Python machinery:
q/k/v and gate/up projections are fused into one matmul each (fused weights are cached and rebuilt
when a parameter changes, e.g. after an optimizer step), and keys/values go into preallocated buffers
written in place instead of a cache that is concatenated at every step. Anything it does not cover
(LoRA adapters, biases, other activations, other architectures) uses the ordinary ``transformers``
forward instead (``supported`` says which).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["FastLlama", "supported"]


def supported(model: Any) -> bool:
    """Whether ``model`` is a plain ``LlamaForCausalLM`` this path reproduces exactly."""
    if type(model).__name__ != "LlamaForCausalLM" or getattr(model, "_hf_peft_config_loaded", False):
        return False
    cfg = model.config
    return (
        not getattr(cfg, "attention_bias", False)
        and not getattr(cfg, "mlp_bias", False)
        and getattr(cfg, "hidden_act", "silu") == "silu"
        and getattr(cfg, "pretraining_tp", 1) == 1
    )


_FUSED: weakref.WeakKeyDictionary[
    Any, tuple[tuple[tuple[int, int], ...], list[tuple[torch.Tensor, torch.Tensor]]]
] = weakref.WeakKeyDictionary()


def _fused(model: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer (W_qkv, W_gate_up), rebuilt only when a parameter's storage or version changed."""
    layers = model.model.layers
    params = [p for layer in layers for p in (*layer.self_attn.parameters(), *layer.mlp.parameters())]
    key = tuple((p.data_ptr(), p._version) for p in params)
    hit = _FUSED.get(model)
    if hit is not None and hit[0] == key:
        return hit[1]
    out = []
    for layer in layers:
        a, m = layer.self_attn, layer.mlp
        qkv = torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).detach()
        gu = torch.cat([m.gate_proj.weight, m.up_proj.weight]).detach()
        out.append((qkv, gu))
    _FUSED[model] = (key, out)
    return out


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dtype == torch.float32:  # the fused kernel; same arithmetic as LlamaRMSNorm in float32
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, signed: bool = False) -> torch.Tensor:
    """x·cos + rotate_half(x)·sin; ``signed``: ``sin`` already carries rotate_half's minus sign."""
    half = x.shape[-1] // 2
    if signed:
        return x * cos + torch.cat((x[..., half:], x[..., :half]), dim=-1) * sin
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class FastLlama:
    """Prefill + per-step decode of a ``LlamaForCausalLM`` with in-place KV buffers of ``capacity`` tokens."""

    def __init__(self, model: Any, batch: int, capacity: int) -> None:
        cfg = model.config
        self.model = model
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.fused = _fused(model)
        weight = model.model.embed_tokens.weight
        shape = (batch, self.kv_heads, capacity, self.head_dim)
        self.k = [torch.empty(shape, dtype=weight.dtype, device=weight.device) for _ in self.fused]
        self.v = [torch.empty(shape, dtype=weight.dtype, device=weight.device) for _ in self.fused]
        self.length = 0
        self.capacity = capacity
        self._rope: tuple[torch.Tensor, torch.Tensor] | None = None
        self._rope_table()

    def _rope_table(self) -> None:
        """cos/sin of every position up to ``capacity``, computed once by the model's own rotary module
        (plain RoPE only; the same values as calling it per step) and looked up per step."""
        rotary = self.model.model.rotary_emb
        if getattr(rotary, "rope_type", None) != "default":
            return
        weight = self.model.model.embed_tokens.weight
        probe = torch.zeros(1, 1, 1, dtype=weight.dtype, device=weight.device)
        cos, sin = rotary(probe, torch.arange(self.capacity, device=weight.device)[None, :])
        half = sin.shape[-1] // 2  # the sign of rotate_half folded into sin: (-x2)·s = x2·(-s) exactly
        self._rope = (cos[0], torch.cat((-sin[0, :, :half], sin[0, :, half:]), dim=-1))

    def join(self, other: FastLlama) -> None:
        """Append the rows of ``other`` (same cache length) to this batch, growing capacity if needed."""
        if other.length != self.length:
            raise ValueError(f"cannot join a cache of length {other.length} to one of length {self.length}")
        size = max(self.capacity, other.capacity)

        def grow(t: torch.Tensor) -> torch.Tensor:
            return t if t.shape[2] == size else F.pad(t, (0, 0, 0, size - t.shape[2]))

        self.k = [torch.cat([grow(a), grow(b)]) for a, b in zip(self.k, other.k, strict=True)]
        self.v = [torch.cat([grow(a), grow(b)]) for a, b in zip(self.v, other.v, strict=True)]
        self.capacity = size
        if self._rope is not None and self._rope[0].shape[0] < size:
            self._rope_table()

    def select(self, index: torch.Tensor) -> None:
        """Keep (or repeat) batch rows ``index`` of the cache (``index_select`` copies whole rows; indexing
        ``k[index]`` gathered element by element, several times slower)."""
        self.k = [k.index_select(0, index) for k in self.k]
        self.v = [v.index_select(0, index) for v in self.v]

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """Logits of the last position for ``ids`` [B, T] appended to the cache; ``key_mask`` [B, S] is
        1 for real tokens over the whole sequence so far (S = cached + T)."""
        inner = self.model.model
        batch, steps = ids.shape
        start, end = self.length, self.length + steps
        x = F.embedding(ids, inner.embed_tokens.weight)
        signed = self._rope is not None
        if self._rope is not None:
            cos, sin = F.embedding(positions, self._rope[0]), F.embedding(positions, self._rope[1])
        else:
            cos, sin = inner.rotary_emb(x, positions)
        cos, sin = cos[:, None], sin[:, None]
        allowed = key_mask[:, None, None, :end].bool()
        if steps > 1:
            causal = torch.ones(steps, end, dtype=torch.bool, device=ids.device).tril(diagonal=start)
            own = torch.zeros(steps, end, dtype=torch.bool, device=ids.device)
            own[torch.arange(steps), torch.arange(start, end)] = True  # pad queries see themselves: no NaN
            allowed = (allowed & causal) | own
        bias = torch.zeros(allowed.shape, dtype=x.dtype, device=x.device).masked_fill_(
            ~allowed, float("-inf")
        )
        q_size = self.heads * self.head_dim
        gqa = self.kv_heads != self.heads
        for i, layer in enumerate(inner.layers):
            w_qkv, w_gu = self.fused[i]
            attn = layer.self_attn
            h = _rms(x, layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon)
            qkv = F.linear(h, w_qkv).view(batch, steps, self.heads + 2 * self.kv_heads, self.head_dim)
            qk = _rotate(qkv[:, :, : self.heads + self.kv_heads].transpose(1, 2), cos, sin, signed)
            q = qk[:, : self.heads]
            self.k[i][:, :, start:end] = qk[:, self.heads :]
            self.v[i][:, :, start:end] = qkv[:, :, self.heads + self.kv_heads :].transpose(1, 2)
            out = F.scaled_dot_product_attention(
                q,
                self.k[i][:, :, :end],
                self.v[i][:, :, :end],
                attn_mask=bias,
                scale=attn.scaling,
                enable_gqa=gqa,
            )
            x = x + F.linear(out.transpose(1, 2).reshape(batch, steps, q_size), attn.o_proj.weight)
            post = layer.post_attention_layernorm
            gate, up = F.linear(_rms(x, post.weight, post.variance_epsilon), w_gu).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer.mlp.down_proj.weight)
        self.length = end
        last = _rms(x[:, -1], inner.norm.weight, inner.norm.variance_epsilon)
        logits: torch.Tensor = self.model.lm_head(last)
        return logits
