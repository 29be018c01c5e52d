"""Training samples: token ids of a whole trajectory, a loss mask, the sampling logprobs.

Token in, token out: the ids are the ones the policy produced (``Completion.prompt_token_ids`` +
``completion_token_ids``), never a re-tokenisation of the text. A multi-turn trajectory becomes
one sequence when each turn's prompt extends the previous sequence (environment tokens are
spliced in with mask 0); when a chat template re-renders history differently it falls back to one
sequence per model turn (each carries the trajectory's advantage). A turn extends the newest row whose
ids its prompt starts with, so an agent program's branches (a sub-agent, a compaction) are rows of their
own while its main conversation stays one row around them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from verigym.types import Trajectory

__all__ = ["Batch", "NotTrainable", "Row", "collate", "trajectory_sequences"]


class NotTrainable(ValueError):
    """A trajectory without exact token ids (a remote server that does not return them)."""


@dataclass
class Row:
    """One training row: ``ids``, ``mask`` (1 on model tokens) and ``logprobs`` aligned with ``ids``
    (the sampling logprob on model tokens, 0 elsewhere; None when the policy gave none).

    ``weights``: per-token loss weights aligned with ``ids``, a public hook for whoever corrects
    off-policy samples (``verigym.scale``'s truncated importance weights); None: weight 1. The update
    applies them to a micro-batch when its first row has them (so give every row of a batch some).
    """

    ids: list[int]
    mask: list[int]
    logprobs: list[float] | None
    advantage: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    weights: list[float] | None = None

    @property
    def model_tokens(self) -> int:
        return sum(self.mask)


def trajectory_sequences(trajectory: Trajectory) -> list[Row]:
    """The training rows of one trajectory (model tokens masked in, prompt/environment tokens out)."""
    completions = trajectory.completions
    if not completions:
        raise NotTrainable(f"trajectory {trajectory.task_id} has no model turn")
    out: list[Row] = []
    for c in completions:
        if c.prompt_token_ids is None or c.completion_token_ids is None or not c.token_ids_exact:
            raise NotTrainable(f"trajectory {trajectory.task_id}: the policy returned no exact token ids")
        prompt, comp = list(c.prompt_token_ids), list(c.completion_token_ids)
        lps = list(c.logprobs) if c.logprobs is not None and len(c.logprobs) == len(comp) else None
        # the newest row this call extends (an agent program's main conversation goes on after a
        # sub-agent's or a compaction's calls: it joins its own row again)
        cur = next((r for r in reversed(out) if prompt[: len(r.ids)] == r.ids), None)
        if cur is not None:
            extra = prompt[len(cur.ids) :]
            cur.ids += extra + comp
            cur.mask += [0] * len(extra) + [1] * len(comp)
            if cur.logprobs is not None and lps is not None:
                cur.logprobs += [0.0] * len(extra) + lps
            else:
                cur.logprobs = None
            continue
        out.append(
            Row(
                ids=prompt + comp,
                mask=[0] * len(prompt) + [1] * len(comp),
                logprobs=None if lps is None else [0.0] * len(prompt) + lps,
            )
        )
    return out


@dataclass
class Batch:
    """Padded tensors for one forward pass, already shifted for next-token prediction.

    ``input_ids``/``attention_mask`` (B, T); ``targets``, ``mask``, ``old_logprobs`` (B, T−1) where
    position t scores token t+1; ``advantages`` (B,).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    old_logprobs: torch.Tensor | None
    advantages: torch.Tensor

    def to(self, device: torch.device | str) -> Batch:
        return Batch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.targets.to(device),
            self.mask.to(device),
            None if self.old_logprobs is None else self.old_logprobs.to(device),
            self.advantages.to(device),
        )


def collate(rows: Sequence[Row], pad_id: int) -> Batch:
    """Right-pad rows into a ``Batch``."""
    width = max(len(r.ids) for r in rows)
    n = len(rows)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    att = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.float32)
    have_lp = all(r.logprobs is not None for r in rows)
    lps = torch.zeros((n, width), dtype=torch.float32)
    for i, r in enumerate(rows):
        k = len(r.ids)
        ids[i, :k] = torch.tensor(r.ids, dtype=torch.long)
        att[i, :k] = 1
        mask[i, :k] = torch.tensor(r.mask, dtype=torch.float32)
        if have_lp and r.logprobs is not None:
            lps[i, :k] = torch.tensor(r.logprobs, dtype=torch.float32)
    adv = torch.tensor([r.advantage for r in rows], dtype=torch.float32)
    return Batch(ids, att, ids[:, 1:], mask[:, 1:], lps[:, 1:] if have_lp else None, adv)
