"""The RL update's lm head and log-softmax by chunks of positions, recomputed in backward (issue 43 item 2).

``packing.forward_packed`` needs, at the K positions it projects to the vocabulary, the log-probability
of each scored token and (for logging) the entropy. Through the model's head that is a ``[K × V]``
logits tensor, its ``[K × V]`` log-softmax saved for backward, and in backward two more ``[K × V]``
gradients and the head's full ``[V × hidden]`` weight gradient, all at the update's peak (SmolLM2's
49,152-token head: ~53 MB each at the recipe's largest pack, plus 113 MB). ``HeadLogprobs`` instead
projects ``CHUNK`` positions at a time, keeps only their log-sum-exp, and in backward recomputes each
chunk's logits to form its gradient, which goes into the hidden states' gradient and is added into
the head's ``.grad`` in place (``addmm_``) when an earlier micro-batch left one. One more head product
per pack (~+5% of the update's time) for ~150 MB less at the peak.

Used (``head_of``) only inside ``training_kernels(model=...)``, for a transformers Llama, Qwen2 or
Mistral causal LM whose ``lm_head`` is a bias-free ``nn.Linear`` with a plain float32 CPU weight of
at least ``MIN_WEIGHT`` entries (the tiny models' heads are below it), with gradients on and the
entropy only logged. Values equal the full log-softmax's up to float32 round-off (the chunks'
products sum in oneDNN's order for their shape); ``tests/train/test_update_layers.py``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["CHUNK", "HeadLogprobs", "head_of"]

CHUNK = 32
"""Positions projected to the vocabulary at a time (a 32 × 49,152 float32 chunk is 6.3 MB)."""
MODELS = frozenset({"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"})


def head_of(model: Any) -> tuple[Any, torch.Tensor] | None:
    """(the decoder without its head, the head's weight) when ``HeadLogprobs`` applies to ``model``."""
    from verigym.train import _cpu_kernels as K
    from verigym.train._cpu_layers import active

    head = getattr(model, "lm_head", None)
    base = getattr(model, "model", None)
    if not (active() and torch.is_grad_enabled() and type(model).__name__ in MODELS and base is not None):
        return None
    if type(head) is not torch.nn.Linear or head.bias is not None:
        return None
    w = head.weight
    if type(w) is not torch.nn.Parameter or w.dtype != torch.float32 or w.device.type != "cpu":
        return None
    if w.numel() < K.MIN_WEIGHT or getattr(model.config, "final_logit_softcapping", None):
        return None
    return base, w


def _chunks(k: int) -> list[tuple[int, int]]:
    return [(a, min(a + CHUNK, k)) for a in range(0, k, CHUNK)]


class HeadLogprobs(torch.autograd.Function):
    """``log_softmax(h @ Wᵀ / T)[pos, tgt]`` for index pairs (pos, tgt), and the entropy at each of
    h's rows (not differentiable), without keeping any ``[rows × V]`` tensor for backward."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, h: torch.Tensor, w: torch.Tensor, pos: torch.Tensor, tgt: torch.Tensor, temperature: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        from verigym._onednn import mm as _mm

        k = h.shape[0]
        h = h.contiguous()
        lse = torch.empty(k, dtype=h.dtype)
        ent = torch.empty(k, dtype=h.dtype)
        logp = torch.empty(pos.shape[0], dtype=h.dtype)
        for a, b in _chunks(k):
            logits = _mm(h[a:b], w)
            if temperature != 1.0:
                logits = logits / temperature
            lp = torch.log_softmax(logits, dim=-1)
            lse[a:b] = torch.logsumexp(logits, dim=-1)
            ent[a:b] = -(lp.exp() * lp).sum(-1)
            sel = ((pos >= a) & (pos < b)).nonzero().squeeze(1)
            logp[sel] = lp[pos[sel] - a, tgt[sel]]
        ctx.save_for_backward(h, w, pos, tgt, lse)
        ctx.temperature = temperature
        ctx.mark_non_differentiable(ent)
        return logp, ent

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor, _ent: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        from verigym._onednn import mm as _mm
        from verigym.train._cpu_kernels import grad_in_place

        h, w, pos, tgt, lse = ctx.saved_tensors
        t = ctx.temperature
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        gh = torch.empty_like(h) if need_h else None
        gw: torch.Tensor | None = None
        if need_w:
            gw = w.grad if grad_in_place(w) else torch.zeros_like(w)
        g = g.contiguous()
        for a, b in _chunks(h.shape[0]):
            logits = _mm(h[a:b], w)
            if t != 1.0:
                logits = logits / t
            # d logp[pos, tgt] / d logits = onehot(tgt) − softmax, summed over the pairs at each row
            sel = ((pos >= a) & (pos < b)).nonzero().squeeze(1)
            rows = pos[sel] - a
            total = torch.zeros(b - a, dtype=h.dtype).index_add_(0, rows, g[sel])
            grad = torch.exp(logits.sub_(lse[a:b, None])).mul_(-total[:, None])
            grad.index_put_((rows, tgt[sel]), g[sel], accumulate=True)
            if t != 1.0:
                grad = grad / t
            if gh is not None:
                gh[a:b] = _mm(grad, w.t())
            if gw is not None:
                with torch.no_grad():
                    gw.addmm_(grad.t(), h[a:b])
        if gw is not None and gw is w.grad:
            gw = None  # added into .grad in place
        return gh, gw, None, None, None
