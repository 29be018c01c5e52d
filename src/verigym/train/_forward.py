"""The training forward of rows: per-token logprobs and entropies, padded, or with a group's shared
prompt run once and its keys/values reused by every completion (``forward_rows``).

``Forward`` is the layout the loss code reads (``_update.policy_update``); ``train.packing`` makes the
same from one unpadded sequence.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from verigym.train import losses as L
from verigym.train.samples import Batch, Row, collate

__all__ = ["Forward", "forward_logprobs", "forward_rows", "keeps_logits", "prefix_len"]


def forward_logprobs(
    model: Any, batch: Batch, temperature: float, *, entropy: bool = False, entropy_grad: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log π of each target (B, T−1), entropy per position (B, T−1) or None)."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
    logits = out.logits[:, :-1]
    if entropy and not entropy_grad:
        return _logp_and_entropy(logits, batch.targets, temperature)
    logp = L.token_logprobs(logits, batch.targets, temperature)
    ent = L.token_entropy(logits, temperature) if entropy else None
    return logp, ent


def _logp_and_entropy(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``token_logprobs`` and a no-grad ``token_entropy`` from one log-softmax: the same values (the
    entropy is only logged, so nothing of it enters the backward pass)."""
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        ent = -(logp_all.exp() * logp_all).sum(-1)
    return logp, ent


@dataclass
class Forward:
    """One micro-batch's forward: per-token tensors (B, W) and how they align with each row's ids.

    Position s of row i scores token ``starts[i] + s`` of ``rows[i].ids``; ``align`` maps any per-row
    array aligned with the ids (logprobs, ``meta`` values) onto that layout.
    """

    logp: torch.Tensor
    ent: torch.Tensor
    mask: torch.Tensor
    old: torch.Tensor
    adv: torch.Tensor
    starts: list[int]
    logits: torch.Tensor | None = None  # (B, W, V), kept only when asked (``keep_logits``)

    @classmethod
    def of_rows(
        cls, logp: torch.Tensor, ent: torch.Tensor, rows: Sequence[Row], starts: list[int], device: Any
    ) -> Forward:
        """The forward of ``rows`` from its per-token logprobs and entropies: their advantages, and
        masks and sampling logprobs aligned to the layout."""
        adv = torch.tensor([r.advantage for r in rows], dtype=torch.float32, device=device)
        fwd = cls(logp, ent, torch.zeros(0), torch.zeros(0), adv, starts)
        fwd.mask = fwd.align([r.mask for r in rows])  # 0/1 ints: the same float32 values
        fwd.old = fwd.align([r.logprobs or [] for r in rows])
        return fwd

    def align(self, values: Sequence[Sequence[float]]) -> torch.Tensor:
        width = self.logp.shape[1]
        padded = []
        for v, s in zip(values, self.starts, strict=True):
            chunk = list(v[s : s + width])
            padded.append(chunk + [0.0] * (width - len(chunk)))
        return torch.tensor(padded, dtype=torch.float32).reshape(len(values), width).to(self.logp.device)


def prefix_len(row: Row) -> int:
    try:
        first = row.mask.index(1)  # the first model token (masks hold 0/1)
    except ValueError:
        first = next((i for i, m in enumerate(row.mask) if m), len(row.ids) - 1)
    return max(1, min(first, len(row.ids) - 1))


_KEEPS_LOGITS: dict[type, bool] = {}


def keeps_logits(model: Any) -> bool:
    """Whether ``model``'s forward takes ``logits_to_keep`` (transformers' causal LMs): the prompt
    forward then projects only its last position to the vocabulary (bitwise the same logprobs and
    gradients; the other positions' logits were computed and dropped)."""
    cls = type(model)
    hit = _KEEPS_LOGITS.get(cls)
    if hit is None:
        try:
            hit = "logits_to_keep" in inspect.signature(cls.forward).parameters
        except (TypeError, ValueError, AttributeError):
            hit = False
        _KEEPS_LOGITS[cls] = hit
    return hit


def forward_rows(
    model: Any,
    rows: Sequence[Row],
    pad_id: int,
    temperature: float,
    *,
    share_prefix: bool,
    entropy_grad: bool = True,
    keep_logits: bool = False,
) -> Forward:
    """The training forward of ``rows``; ``entropy_grad=False``: the entropy is for logging only;
    ``keep_logits``: ``Forward.logits`` holds the logits too (on-policy distillation's JSD term).

    With ``share_prefix`` the prompt each group shares is run once and its keys/values are reused (with
    gradient) by every completion of the group: the samples of a GRPO group cost one prompt forward,
    not G. The logprobs equal those of the plain forward up to float round-off.
    """
    device = next(model.parameters()).device
    for r in rows:
        assert r.logprobs is not None
    if not share_prefix:
        batch = collate(rows, pad_id).to(device)
        if keep_logits:
            out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
            fwd = _of_logits(
                out.logits[:, :-1], batch.targets, rows, [1] * len(rows), temperature, entropy_grad
            )
            fwd.logits = out.logits[:, :-1]
            return fwd
        logp, ent = forward_logprobs(model, batch, temperature, entropy=True, entropy_grad=entropy_grad)
        assert ent is not None and batch.old_logprobs is not None
        return Forward(logp, ent, batch.mask, batch.old_logprobs, batch.advantages, [1] * len(rows))
    starts = [prefix_len(r) for r in rows]
    uniq: dict[tuple[int, ...], int] = {}
    which = [uniq.setdefault(tuple(r.ids[:p]), len(uniq)) for r, p in zip(rows, starts, strict=True)]
    lp = max(len(k) for k in uniq)
    pids = torch.tensor([[pad_id] * (lp - len(k)) + list(k) for k in uniq], dtype=torch.long)
    pmask = torch.tensor([[0] * (lp - len(k)) + [1] * len(k) for k in uniq], dtype=torch.long)
    ppos = (pmask.cumsum(-1) - 1).clamp(min=0)
    out = model(
        input_ids=pids.to(device),
        attention_mask=pmask.to(device),
        position_ids=ppos.to(device),
        use_cache=True,
        **({"logits_to_keep": 1} if keeps_logits(model) else {}),  # only the last is used
    )
    cache = out.cache
    idx = torch.tensor(which, dtype=torch.long, device=device)
    _repeat_rows(cache, idx)
    width = max(len(r.ids) - s for r, s in zip(rows, starts, strict=True))
    tails = [r.ids[s:] for r, s in zip(rows, starts, strict=True)]
    sids = torch.tensor([[*t, *[pad_id] * (width - len(t))] for t in tails], dtype=torch.long)
    smask = torch.tensor([[1] * len(t) + [0] * (width - len(t)) for t in tails], dtype=torch.long)
    spos = torch.tensor(starts, dtype=torch.long)[:, None] + torch.arange(width)[None, :]
    att = torch.cat([pmask.to(device)[idx], smask.to(device)], dim=1)
    out2 = model(
        input_ids=sids.to(device),
        attention_mask=att,
        position_ids=spos.to(device),
        cache=cache,
        use_cache=True,
    )
    logits = torch.cat([out.logits[:, -1:][idx], out2.logits[:, :-1]], dim=1)
    fwd = _of_logits(logits, sids.to(device), rows, starts, temperature, entropy_grad)
    if keep_logits:
        fwd.logits = logits
    return fwd


def _of_logits(
    logits: torch.Tensor,
    targets: torch.Tensor,
    rows: Sequence[Row],
    starts: list[int],
    temperature: float,
    entropy_grad: bool,
) -> Forward:
    if entropy_grad:
        logp, ent = L.token_logprobs(logits, targets, temperature), L.token_entropy(logits, temperature)
    else:
        logp, ent = _logp_and_entropy(logits, targets, temperature)
    return Forward.of_rows(logp, ent, rows, starts, logits.device)


def _repeat_rows(cache: Any, idx: torch.Tensor) -> None:
    """``cache.batch_select_indices(idx)`` with ``index_select`` (whole rows copied; plain indexing gathers
    element by element, ~4x slower); same values and the same gradients."""
    layers = getattr(cache, "layers", None)
    if layers is None or any(type(layer).__name__ != "DynamicLayer" for layer in layers):
        cache.batch_select_indices(idx)
        return
    for layer in layers:
        if layer.get_seq_length() > 0:
            layer.keys = layer.keys.index_select(0, idx)
            layer.values = layer.values.index_select(0, idx)
