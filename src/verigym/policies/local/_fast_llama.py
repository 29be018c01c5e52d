"""A lean decode path for plain Llama-architecture models (the tiny models, Llama-family checkpoints).

It computes what ``LlamaForCausalLM.forward`` computes (same RMSNorm, rotary embedding module, SDPA
attention; the matmuls round differently in the last bits, see ``_Weights``), from the model's live
weights, but without the per-module Python machinery: q/k/v and gate/up projections are fused into one
matmul each on copies of the weights made once (``_products``: packed for oneDNN where a weight is
large, transposed for MKL where small; cached, and rebuilt when a parameter changes, e.g. after an
optimizer step), each decode step runs on the thread count ``_products.ThreadChoice`` picks, and keys/values go into preallocated buffers written in place instead of a
cache that is concatenated at every step; rows can join a running batch (``append``). Anything it does not cover
(LoRA adapters, biases, other activations, other architectures) uses the ordinary ``transformers``
forward instead (``supported`` says which).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from verigym.policies.local._products import Product, ThreadChoice, threads

__all__ = ["FastLlama", "release", "supported"]


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


class _Weights(NamedTuple):
    """A model's matmul weights as this path uses them: q/k/v and gate/up fused, each a ``Product``
    (oneDNN on a packed copy for the large weights of real models, MKL's ``x @ w`` on a transposed
    [in, out] copy for small ones: ``_products``)."""

    layers: list[tuple[Product, Product, Product, Product]]  # qkv, o, gate_up, down
    head: Product
    packed: bool  # any weight runs through oneDNN (then ``ThreadChoice`` picks each step's threads)


_CACHE: weakref.WeakKeyDictionary[Any, tuple[tuple[tuple[int, int], ...], _Weights]] = (
    weakref.WeakKeyDictionary()
)


def _weights(model: Any) -> _Weights:
    """The model's ``_Weights``, rebuilt only when a parameter's storage or version changed (e.g. after
    an optimizer step or a weight swap)."""
    layers = model.model.layers
    params = [p for layer in layers for p in (*layer.self_attn.parameters(), *layer.mlp.parameters())]
    params.append(model.lm_head.weight)
    key = tuple((p.data_ptr(), p._version) for p in params)
    hit = _CACHE.get(model)
    if hit is not None and hit[0] == key:
        return hit[1]
    out = []
    with torch.no_grad():
        for layer in layers:
            a, m = layer.self_attn, layer.mlp
            qkv = Product(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
            gu = Product(torch.cat([m.gate_proj.weight, m.up_proj.weight]))
            out.append((qkv, Product(a.o_proj.weight), gu, Product(m.down_proj.weight)))
        head = Product(model.lm_head.weight)
    packed = head.packed is not None or any(p.packed is not None for layer in out for p in layer)
    weights = _Weights(out, head, packed)
    _CACHE[model] = (key, weights)
    return weights


def release(model: Any) -> None:
    """Drop ``model``'s decode copies (about its weights' size again). The trainer calls it before an
    update: the optimizer step makes them stale, so the next generation rebuilds them anyway, and
    holding them through the update's peak cost a SmolLM2 training process ~650 MB (issue 43 item 2).
    A decoder still running keeps its own reference until it finishes."""
    _CACHE.pop(model, None)


_CHOICES: weakref.WeakKeyDictionary[Any, ThreadChoice] = weakref.WeakKeyDictionary()


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dtype == torch.float32:  # the fused kernel; same arithmetic as LlamaRMSNorm in float32
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, signed: bool = False) -> torch.Tensor:
    """x·cos + rotate_half(x)·sin; ``signed``: ``sin`` already carries rotate_half's minus sign."""
    half = x.shape[-1] // 2
    if signed:  # rolling by half swaps the halves: the same values as the cat below, in one op
        return x * cos + x.roll(half, -1) * sin
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class FastLlama:
    """Prefill + per-step decode of a ``LlamaForCausalLM`` with in-place KV buffers of ``capacity`` tokens."""

    def __init__(self, model: Any, batch: int, capacity: int) -> None:
        cfg = model.config
        self.model = model
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.weights = _weights(model)
        self._threads = _CHOICES.setdefault(model, ThreadChoice())  # kept across passes
        self._timed = False  # inside ``timed_step``
        weight = model.model.embed_tokens.weight
        shape = (batch, self.kv_heads, capacity, self.head_dim)
        self.k = [torch.empty(shape, dtype=weight.dtype, device=weight.device) for _ in self.weights.layers]
        self.v = [torch.empty(shape, dtype=weight.dtype, device=weight.device) for _ in self.weights.layers]
        # the storage ``k``/``v`` are views of: ``keep`` narrows them, ``append`` fills spare rows
        self._rows = (self.k, self.v)
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

    def append(self, ids: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """Prefill new rows into the running batch and return their last logits. ``ids`` [N, W] holds
        their prompts left-padded to the longest of them (W <= ``length``); they are placed right-aligned
        at the cache's current length, so only their W tokens are computed (positions before them are
        zeros that ``key_mask`` [N, length] masks out). Rows go into spare storage rows when there are
        any (``keep`` leaves them behind), else the storage doubles: the running rows are not copied at
        each join."""
        n, width = ids.shape
        if width > self.length:
            raise ValueError(f"joining prompts of {width} tokens exceed the cache length {self.length}")
        batch = self.k[0].shape[0]
        if batch + n > self._rows[0][0].shape[0]:
            self._grow(max(2 * batch, batch + n))
        start = self.length - width
        ks = [store[batch : batch + n] for store in self._rows[0]]
        vs = [store[batch : batch + n] for store in self._rows[1]]
        for t in (*ks, *vs):
            t[:, :, :start].zero_()
        with threads(self._prefill_threads()):
            logits = self._forward(ids, positions, key_mask, ks, vs, start)
        self.k = [store[: batch + n] for store in self._rows[0]]
        self.v = [store[: batch + n] for store in self._rows[1]]
        return logits

    def trim(self, first: int) -> None:
        """Drop cache positions before ``first``, which no live row uses (rows that joined late are
        right-aligned behind empty positions; once the rows that filled those finish, every step would
        still read them). Positions are RoPE positions, not cache indices, so the numbers are unchanged;
        the caller drops the same columns of its key mask."""
        end = self.length
        for t in (*self.k, *self.v):
            t[:, :, : end - first] = t[:, :, first:end].clone()  # overlapping ranges: copy via a clone
        self.length = end - first

    def _grow(self, rows: int) -> None:
        """New storage of ``rows`` rows holding the running rows' filled positions."""
        batch, end = self.k[0].shape[0], self.length

        def grown(t: torch.Tensor) -> torch.Tensor:
            new = t.new_empty((rows, *t.shape[1:]))
            new[:batch, :, :end] = t[:, :, :end]
            return new

        self._rows = ([grown(k) for k in self.k], [grown(v) for v in self.v])

    def select(self, index: torch.Tensor) -> None:
        """Keep (or repeat) batch rows ``index`` of the cache: new buffers, of which only the filled
        positions are copied (``index_select`` copies whole rows; indexing ``k[index]`` gathered element
        by element, several times slower)."""
        end = self.length

        def pick(t: torch.Tensor) -> torch.Tensor:
            new = t.new_empty((index.shape[0], *t.shape[1:]))
            torch.index_select(t[:, :, :end], 0, index, out=new[:, :, :end])
            return new

        self.k = [pick(k) for k in self.k]
        self.v = [pick(v) for v in self.v]
        self._rows = (self.k, self.v)

    def keep(self, order: list[int]) -> None:
        """Keep batch rows ``order`` (distinct; row ``j`` of the result is row ``order[j]``) in place: only
        the rows whose position changes are copied (the caller fills the holes that finished rows left
        with rows from the end), then the buffers are narrowed to ``len(order)`` rows."""
        moved = [j for j, o in enumerate(order) if o != j]
        end = self.length
        if moved:
            dst = torch.tensor(moved, dtype=torch.long, device=self.k[0].device)
            src = torch.tensor([order[j] for j in moved], dtype=torch.long, device=self.k[0].device)
            for t in (*self.k, *self.v):
                used = t[:, :, :end]
                used.index_copy_(0, dst, used.index_select(0, src))
        n = len(order)
        self.k = [k[:n] for k in self.k]
        self.v = [v[:n] for v in self.v]

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """Logits of the last position for ``ids`` [B, T] appended to the cache; ``key_mask`` [B, S] is
        1 for real tokens over the whole sequence so far (S = cached + T)."""
        if ids.shape[1] == 1 and self._rope is not None:
            if self._timed or not self.weights.packed:
                return self._decode(ids[:, 0], positions[:, 0], key_mask)
            with self.timed_step(ids.shape[0]):
                return self._decode(ids[:, 0], positions[:, 0], key_mask)
        with threads(self._prefill_threads()):
            logits = self._forward(ids, positions, key_mask, self.k, self.v, self.length)
        self.length += ids.shape[1]
        return logits

    @contextlib.contextmanager
    def timed_step(self, rows: int) -> Iterator[None]:
        """One decode step of ``rows`` rows on the thread count ``ThreadChoice`` picks (packed weights
        only), timed for the next choice; a decode call inside is not timed again. The engine wraps
        the whole step (sampling and bookkeeping too) in it."""
        if not self.weights.packed or self._timed:
            yield
            return
        with self._threads.step(rows):
            self._timed = True
            try:
                yield
            finally:
                self._timed = False

    def _prefill_threads(self) -> int:
        """Threads of a prefill: the steps' current choice (``ThreadChoice``)."""
        return self._threads.threads() if self.weights.packed else torch.get_num_threads()

    def _forward(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        key_mask: torch.Tensor,
        ks: list[torch.Tensor],
        vs: list[torch.Tensor],
        start: int,
    ) -> torch.Tensor:
        """Last-position logits of ``ids`` [B, T] written into caches ``ks``/``vs`` at ``start``."""
        inner = self.model.model
        batch, steps = ids.shape
        end = start + steps
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
            w_qkv, w_o, w_gu, w_down = self.weights.layers[i]
            attn = layer.self_attn
            h = _rms(x, layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon)
            qkv = w_qkv(h).view(batch, steps, self.heads + 2 * self.kv_heads, self.head_dim)
            qk = _rotate(qkv[:, :, : self.heads + self.kv_heads].transpose(1, 2), cos, sin, signed)
            q = qk[:, : self.heads]
            ks[i][:, :, start:end] = qk[:, self.heads :]
            vs[i][:, :, start:end] = qkv[:, :, self.heads + self.kv_heads :].transpose(1, 2)
            out = F.scaled_dot_product_attention(
                q,
                ks[i][:, :, :end],
                vs[i][:, :, :end],
                attn_mask=bias,
                scale=attn.scaling,
                enable_gqa=gqa,
            )
            x = x + w_o(out.transpose(1, 2).reshape(batch, steps, q_size))
            post = layer.post_attention_layernorm
            gate, up = w_gu(_rms(x, post.weight, post.variance_epsilon)).chunk(2, dim=-1)
            x = x + w_down(F.silu(gate) * up)
        last = _rms(x[:, -1], inner.norm.weight, inner.norm.variance_epsilon)
        return self._head(last)

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        bias = self.model.lm_head.bias
        logits = self.weights.head(h)
        return logits if bias is None else logits + bias

    def _decode(self, ids: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """One new token per row: ``__call__``'s arithmetic on [B, hidden] rows (the same matmuls, row
        for row, and the same element-wise ops; attention over one query per row as two batched matmuls
        instead of SDPA), without the [B, 1, ...] views, transposes and module calls around them, which
        cost more than the math on the tiny models."""
        inner = self.model.model
        batch = ids.shape[0]
        start = self.length
        end = start + 1
        x = F.embedding(ids, inner.embed_tokens.weight)
        assert self._rope is not None
        cos = F.embedding(positions, self._rope[0])[:, None]
        sin = F.embedding(positions, self._rope[1])[:, None]
        masked = key_mask[:, :end] == 0
        bias = None  # no masked key (a lone row): adding zeros would change nothing
        if bool(masked.any()):
            bias = torch.zeros((batch, 1, 1, end), dtype=x.dtype, device=x.device)
            bias.masked_fill_(masked[:, None, None], float("-inf"))
        same_dtype = x.dtype == torch.float32
        heads, kv = self.heads, self.kv_heads
        q_size = heads * self.head_dim
        for i, layer in enumerate(inner.layers):
            w_qkv, w_o, w_gu, w_down = self.weights.layers[i]
            attn = layer.self_attn
            norm = layer.input_layernorm
            qkv = w_qkv(_rms(x, norm.weight, norm.variance_epsilon)).view(
                batch, heads + 2 * kv, self.head_dim
            )
            qk = _rotate(qkv[:, : heads + kv], cos, sin, True)
            k_cache, v_cache = self.k[i], self.v[i]
            k_cache[:, :, start] = qk[:, heads:]
            v_cache[:, :, start] = qkv[:, heads + kv :]
            # one query per row: two batched matmuls beat the CPU SDPA kernel (1.3-1.6x at 100-1500 keys)
            q = qk[:, :heads].reshape(batch, kv, heads // kv, self.head_dim)  # [B, KV, group, D]
            scores = (q @ k_cache[:, :, :end].transpose(-1, -2)).mul_(attn.scaling)
            if bias is not None:
                scores.add_(bias)
            probs = scores.softmax(-1, dtype=torch.float32)  # [B, KV, group, S]
            if not same_dtype:
                probs = probs.to(v_cache.dtype)
            out = probs @ v_cache[:, :, :end]
            x = x + w_o(out.reshape(batch, q_size))
            post = layer.post_attention_layernorm
            gate, up = w_gu(_rms(x, post.weight, post.variance_epsilon)).chunk(2, dim=-1)
            x = x + w_down(F.silu(gate) * up)
        self.length = end
        return self._head(_rms(x, inner.norm.weight, inner.norm.variance_epsilon))
