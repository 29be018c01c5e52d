"""Sequence packing for the RL update: a micro-batch's rows as one sequence, without padding.

Rows of different lengths are padded to the longest in ``collate``; packed, they are laid end to end
in one sequence of at most ``rl.pack_tokens`` tokens, each row's position ids restarting at 0 and its
attention confined to itself by a block-diagonal causal 4D mask (verl, NeMo-RL and prime-rl pack the
same way; TRL's ``padding_free`` flattens a batch with restarting position ids for flash-attention's
varlen kernel). Token-budget micro-batches bound memory by tokens, not rows.

With ``share_prefix`` a group's shared prompt is laid down once and each of its rows' continuations
follows it, attending to the prompt and to itself only (positions continue from the prompt's end):
the G samples of a GRPO group cost one prompt, as in the padded path's shared-prefix forward, and no
continuation is padded. The logprobs, entropies, loss and gradients equal the padded forward's up to
float round-off (``tests/train/test_train_packing.py``). Logits are projected to the vocabulary only
at the positions that score a row's tokens (``logits_to_keep`` with an index tensor).

A 4D mask is supported by transformers' ``sdpa`` and ``eager`` attention; with other implementations
(flash-attention) the rows are packed without a shared prompt and the mask is left to transformers,
which finds the rows from the restarting position ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from verigym.train._cpu_head import HeadLogprobs, head_of
from verigym.train._cpu_kernels import attention_blocks
from verigym.train._forward import Forward, keeps_logits, prefix_len

__all__ = ["Pack", "forward_packed", "pack_rows", "plan_micro_batches", "row_starts"]


@dataclass
class _Unit:
    """A prompt laid down once (``prefix`` ids) and the rows that continue it (their indices)."""

    prefix: tuple[int, ...]
    rows: list[int]
    size: int


def _units(rows: Sequence[Any], starts: Sequence[int], share_prefix: bool) -> list[_Unit]:
    units: list[_Unit] = []
    by_prefix: dict[tuple[int, ...], _Unit] = {}
    for i, (r, s) in enumerate(zip(rows, starts, strict=True)):
        prefix = tuple(r.ids[:s])
        unit = by_prefix.get(prefix) if share_prefix else None
        if unit is None:
            unit = _Unit(prefix, [], len(prefix))
            units.append(unit)
            if share_prefix:
                by_prefix[prefix] = unit
        unit.rows.append(i)
        unit.size += len(r.ids) - s
    return units


def _split(unit: _Unit, rows: Sequence[Any], starts: Sequence[int], budget: int) -> list[_Unit]:
    """A unit larger than the budget: its rows in several units, each repeating the prompt."""
    out: list[_Unit] = []
    cur = _Unit(unit.prefix, [], len(unit.prefix))
    for i in unit.rows:
        tail = len(rows[i].ids) - starts[i]
        if cur.rows and cur.size + tail > budget:
            out.append(cur)
            cur = _Unit(unit.prefix, [], len(unit.prefix))
        cur.rows.append(i)
        cur.size += tail
    out.append(cur)
    return out


def plan_micro_batches(
    rows: Sequence[Any], starts: Sequence[int], *, share_prefix: bool, budget: int, at_least: int = 1
) -> list[list[int]]:
    """Row indices of each packed micro-batch: units (a row, or a group's prompt and its rows) placed
    first-fit decreasing into sequences of at most ``budget`` tokens (a longer unit is split by rows;
    a single longer row gets a sequence of its own). ``at_least``: shrink the budget so there are at
    least this many micro-batches (``grad_accum``) when there are enough units."""
    units = _units(rows, starts, share_prefix)
    total = sum(u.size for u in units)
    budget = max(1, min(budget, -(-total // max(at_least, 1))))
    pieces = [p for u in units for p in (_split(u, rows, starts, budget) if u.size > budget else [u])]
    bins: list[list[_Unit]] = []
    used: list[int] = []
    for u in sorted(pieces, key=lambda u: -u.size):
        for j, size in enumerate(used):
            if size + u.size <= budget:
                bins[j].append(u)
                used[j] += u.size
                break
        else:
            bins.append([u])
            used.append(u.size)
    return [sorted(i for u in b for i in u.rows) for b in bins]


@dataclass
class Pack:
    """One packed sequence and where each row's scored tokens are.

    ``ids``/``pos`` (1, N); ``attend`` (1, 1, N, N) bool or None (transformers builds it from ``pos``);
    ``keep`` (K,) the positions projected to the vocabulary; ``src`` (B, W) indexes ``keep`` for the
    logits that score ``targets`` (B, W), token ``starts[i] + s`` of row i (0 past a row's end).
    ``blocks``: each unit's half-open range of positions; ``attend`` never crosses them.
    """

    ids: torch.Tensor
    pos: torch.Tensor
    attend: torch.Tensor | None
    keep: torch.Tensor
    src: torch.Tensor
    targets: torch.Tensor
    blocks: list[tuple[int, int]]


def pack_rows(
    rows: Sequence[Any], starts: Sequence[int], *, share_prefix: bool, build_mask: bool = True
) -> Pack:
    """Lay ``rows`` out as one sequence (see the module docstring)."""
    ids: list[int] = []
    pos: list[int] = []
    unit_of: list[int] = []
    tail_of: list[int] = []
    scorer: dict[int, list[int]] = {}  # row -> flat positions whose logits score its tokens from starts
    blocks: list[tuple[int, int]] = []
    for u, unit in enumerate(_units(rows, starts, share_prefix)):
        first = len(ids)
        p = len(unit.prefix)
        ids += unit.prefix
        pos += range(p)
        unit_of += [u] * p
        tail_of += [0] * p
        last_prompt = len(ids) - 1
        for k, i in enumerate(unit.rows, start=1):
            tail = list(rows[i].ids[p:])
            at = len(ids)
            ids += tail
            pos += range(p, p + len(tail))
            unit_of += [u] * len(tail)
            tail_of += [k] * len(tail)
            scorer[i] = [last_prompt, *range(at, at + len(tail) - 1)]
        blocks.append((first, len(ids)))
    keep = sorted({f for fs in scorer.values() for f in fs})
    where = {f: j for j, f in enumerate(keep)}
    width = max(len(fs) for fs in scorer.values())
    src = torch.zeros((len(rows), width), dtype=torch.long)
    targets = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        fs = scorer[i]
        src[i, : len(fs)] = torch.tensor([where[f] for f in fs], dtype=torch.long)
        targets[i, : len(fs)] = torch.tensor(r.ids[starts[i] : starts[i] + len(fs)], dtype=torch.long)
    pos_t = torch.tensor(pos, dtype=torch.long)
    attend = None
    if build_mask:
        unit_t, tail_t = torch.tensor(unit_of), torch.tensor(tail_of)
        attend = (
            (unit_t[:, None] == unit_t[None, :])
            & ((tail_t[None, :] == 0) | (tail_t[None, :] == tail_t[:, None]))
            & (pos_t[None, :] <= pos_t[:, None])
        )[None, None]
    return Pack(
        torch.tensor(ids, dtype=torch.long)[None],
        pos_t[None],
        attend,
        torch.tensor(keep, dtype=torch.long),
        src,
        targets,
        blocks,
    )


def row_starts(rows: Sequence[Any]) -> list[int]:
    """Where each row's scored part starts: its first model token (the prompt before it is shared)."""
    return [prefix_len(r) for r in rows]


def _attn_impl(model: Any) -> str:
    return str(getattr(getattr(model, "config", None), "_attn_implementation", None) or "sdpa")


def forward_packed(
    model: Any, rows: Sequence[Any], temperature: float, *, share_prefix: bool, entropy_grad: bool = True
) -> Forward:
    """The training forward of ``rows`` packed into one sequence: the same ``Forward`` as
    ``_forward.forward_rows`` (position s of row i scores token ``starts[i] + s``), without padding."""
    device = next(model.parameters()).device
    impl = _attn_impl(model)
    own_mask = impl in ("sdpa", "eager")
    starts = row_starts(rows)
    pack = pack_rows(rows, starts, share_prefix=share_prefix and own_mask, build_mask=own_mask)
    mask = pack.attend
    if mask is not None and impl == "eager":  # eager attention adds the mask to the scores
        dtype = next(model.parameters()).dtype
        mask = torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)
    keep = pack.keep.to(device)
    src, targets = pack.src.to(device), pack.targets.to(device)
    head = None if entropy_grad else head_of(model)
    if head is not None:  # inside training_kernels(model=...): the head by chunks (train._cpu_head)
        with attention_blocks(pack.blocks if mask is not None else None):
            hidden = (
                head[0](
                    input_ids=pack.ids.to(device),
                    position_ids=pack.pos.to(device),
                    attention_mask=None if mask is None else mask.to(device),
                    use_cache=False,
                )
                .last_hidden_state[0]
                .index_select(0, keep)
            )
        flat, ent_k = HeadLogprobs.apply(
            hidden, head[1], src.flatten(), targets.flatten(), float(temperature)
        )
        return Forward.of_rows(flat.view(src.shape), ent_k[src], rows, starts, device)
    with attention_blocks(pack.blocks if mask is not None else None):  # by unit on a CPU (train._cpu_kernels)
        out = model(
            input_ids=pack.ids.to(device),
            position_ids=pack.pos.to(device),
            attention_mask=None if mask is None else mask.to(device),
            use_cache=False,
            **({"logits_to_keep": keep} if keeps_logits(model) else {}),
        )
    logits = out.logits[0] if keeps_logits(model) else out.logits[0].index_select(0, keep)
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    del out, logits  # the backward reads the log-softmax's output only: [K, V] less at the peak
    logp = logp_all[src, targets]
    if entropy_grad and torch.is_grad_enabled():
        ent = (-(logp_all.exp() * logp_all).sum(-1))[src]
    else:  # logged only: a few positions at a time, not two more [K, V] temporaries
        with torch.no_grad():
            ent = torch.cat([-(c.exp() * c).sum(-1) for c in logp_all.split(_ENTROPY_ROWS)])[src]
    return Forward.of_rows(logp, ent, rows, starts, device)


_ENTROPY_ROWS = 32
"""Positions per chunk of the logged (no-grad) entropy in ``forward_packed``."""
