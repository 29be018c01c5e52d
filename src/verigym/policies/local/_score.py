"""Prompt scoring: the log-probability a model gives each token of given sequences (the ``echo``
logprobs of ``/v1/completions``; a served teacher's half of on-policy distillation)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Scored", "prompt_logprobs"]


@dataclass
class Scored:
    """For tokens 1..n−1 of one sequence: log π(ids[j] | ids[:j]), and the ``top`` most likely ids and
    their logprobs at each of those positions (empty lists when ``top`` is 0)."""

    logprobs: list[float]
    top_ids: list[list[int]]
    top_logprobs: list[list[float]]


def prompt_logprobs(
    model: Any,
    prompts: Sequence[Sequence[int]],
    *,
    temperature: float = 1.0,
    top: int = 0,
    pad_id: int = 0,
    max_rows: int = 64,
) -> list[Scored]:
    """Score ``prompts`` under ``log_softmax(logits / T)`` in float32 (T = 1 when ``temperature`` is 0),
    the distribution ``LocalPolicy`` reports sampled tokens' logprobs from; right-padded batches of at
    most ``max_rows`` rows, without gradient. The caller holds the model (lock, adapter, eval mode)."""
    import torch

    t = temperature if temperature > 0 else 1.0
    device = next(model.parameters()).device
    out: list[Scored] = []
    for start in range(0, len(prompts), max_rows):
        part = [list(p) for p in prompts[start : start + max_rows]]
        width = max(len(p) for p in part)
        ids = torch.full((len(part), width), pad_id, dtype=torch.long)
        att = torch.zeros((len(part), width), dtype=torch.long)
        for i, p in enumerate(part):
            ids[i, : len(p)] = torch.tensor(p, dtype=torch.long)
            att[i, : len(p)] = 1
        with torch.no_grad():
            logits = model(input_ids=ids.to(device), attention_mask=att.to(device), use_cache=False).logits
            logp = torch.log_softmax(logits[:, :-1].float() / t, dim=-1)
            got = logp.gather(-1, ids[:, 1:].to(device).unsqueeze(-1)).squeeze(-1)
            best = logp.topk(top, dim=-1) if top else None
        for i, p in enumerate(part):
            n = len(p) - 1
            out.append(
                Scored(
                    got[i, :n].tolist(),
                    [] if best is None else best.indices[i, :n].tolist(),
                    [] if best is None else best.values[i, :n].tolist(),
                )
            )
    return out
