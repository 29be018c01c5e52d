"""Rejection sampling into SFT data: keep verified trajectories, optionally the shortest or a
diverse subset, and write SFT-ready JSONL.

Self-distillation by rejection sampling (as in STaR, Zelikman et al. 2022, and the seed
lectures): sample k answers per task from a teacher, keep only those the verifier accepts.
An errored sample is never kept and never counted as a rejection: it is reported apart.

An SFT line is ``{"messages": [...], "loss_mask": [0|1 per message], "task_id", "env",
"reward", "model"}``; the loss mask is 1 on the assistant messages (the model's tokens) and 0
on the prompt and on tool/environment messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from verigym._files import open_atomic
from verigym.types import Record

__all__ = ["RejectionStats", "jaccard", "select_verified", "sft_line", "write_sft"]

Keep = Literal["all", "shortest", "diverse"]
_TOKEN = re.compile(r"\w+|[^\w\s]")


def _ngrams(text: str, n: int = 3) -> set[tuple[str, ...]]:
    tokens = _TOKEN.findall(text.lower())
    return {tuple(tokens[i : i + n]) for i in range(max(len(tokens) - n + 1, 1))}


def jaccard(a: str, b: str, n: int = 3) -> float:
    """Jaccard similarity of the word n-gram sets of two texts."""
    x, y = _ngrams(a, n), _ngrams(b, n)
    return len(x & y) / len(x | y) if x | y else 1.0


def _json_form(rec: Record | Mapping[str, Any]) -> Mapping[str, Any]:
    """A results record as its ``results.jsonl`` line reads (a typed ``Record`` is dumped once)."""
    return rec.model_dump(mode="json") if isinstance(rec, Record) else rec


def _completion_text(rec: Mapping[str, Any]) -> str:
    turns = (rec.get("trajectory") or {}).get("turns", [])
    return "\n".join(
        m.get("content", "") for t in turns for m in t.get("messages", []) if m.get("role") == "assistant"
    )


def _completion_tokens(rec: Mapping[str, Any]) -> int:
    usage = rec.get("usage") or {}
    return int(usage.get("completion_tokens") or len(_completion_text(rec)))


@dataclass
class RejectionStats:
    """Yield per task and overall; cost in completion tokens."""

    sampled: dict[str, int] = field(default_factory=dict)
    accepted: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    completion_tokens: int = 0

    @property
    def yield_rate(self) -> float:
        n = sum(self.sampled.values())
        return sum(self.accepted.values()) / n if n else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": len(self.sampled),
            "tasks_with_a_verified_sample": sum(1 for v in self.accepted.values() if v),
            "samples": sum(self.sampled.values()),
            "accepted": sum(self.accepted.values()),
            "kept": sum(self.kept.values()),
            "errors": self.errors,
            "yield": self.yield_rate,
            "completion_tokens": self.completion_tokens,
            "per_task_yield": {t: self.accepted.get(t, 0) / n for t, n in sorted(self.sampled.items()) if n},
        }


def select_verified(
    records: Iterable[Record | Mapping[str, Any]],
    *,
    threshold: float = 1.0,
    keep: Keep = "all",
    per_task: int | None = None,
    max_similarity: float = 0.7,
) -> tuple[list[Mapping[str, Any]], RejectionStats]:
    """Keep records whose reward is ≥ ``threshold``; per task, all of them, the shortest
    first, or a diverse subset (greedy: skip one whose n-gram Jaccard with a kept one exceeds
    ``max_similarity``). ``per_task`` caps how many are kept per task. ``records`` are typed
    ``Record``s or their JSON form; the kept ones are returned in JSON form."""
    stats = RejectionStats()
    by_task: dict[str, list[Mapping[str, Any]]] = {}
    for rec in map(_json_form, records):
        task = str(rec["task_id"])
        reward = (rec.get("score") or {}).get("reward")
        stats.completion_tokens += _completion_tokens(rec)
        if reward is None or rec.get("error"):
            stats.errors += 1
            continue
        stats.sampled[task] = stats.sampled.get(task, 0) + 1
        if reward >= threshold - 1e-9:
            stats.accepted[task] = stats.accepted.get(task, 0) + 1
            by_task.setdefault(task, []).append(rec)
    kept: list[Mapping[str, Any]] = []
    for task in sorted(by_task):
        group = by_task[task]
        if keep in ("shortest", "diverse"):
            group = sorted(group, key=lambda r: (_completion_tokens(r), r.get("sample_index", 0)))
        if keep == "diverse":
            chosen: list[Mapping[str, Any]] = []
            for rec in group:
                text = _completion_text(rec)
                if all(jaccard(text, _completion_text(c)) <= max_similarity for c in chosen):
                    chosen.append(rec)
            group = chosen
        if keep == "shortest" and per_task is None:
            group = group[:1]
        if per_task is not None:
            group = group[:per_task]
        stats.kept[task] = len(group)
        kept.extend(group)
    return kept, stats


def sft_line(rec: Mapping[str, Any]) -> dict[str, Any]:
    """The SFT line of one results record: its whole conversation with a per-message loss mask. An agent
    program's branch calls (a sub-agent's, a compaction's) and its final answer when it is not the
    model's text are not part of the conversation (``verigym.agents``)."""
    traj = rec.get("trajectory") or {}
    messages: list[dict[str, Any]] = list(traj.get("prompt", []))
    for turn in traj.get("turns", []):
        if turn.get("source") not in ("branch", "answer"):
            messages.extend(turn.get("messages", []))
    mask = [1 if m.get("role") == "assistant" else 0 for m in messages]
    return {
        "messages": messages,
        "loss_mask": mask,
        "task_id": rec.get("task_id"),
        "env": rec.get("env"),
        "model": rec.get("model"),
        "reward": (rec.get("score") or {}).get("reward"),
    }


def write_sft(records: Sequence[Mapping[str, Any]], path: str | Path) -> int:
    """Write SFT lines atomically (a crash leaves no half-written file); returns the count."""
    with open_atomic(path) as f:
        for rec in records:
            f.write(json.dumps(sft_line(rec)) + "\n")
    return len(records)
