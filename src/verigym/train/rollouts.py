"""A bounded sample of each RL step's rollouts, kept for ``verigym view``: ``rollouts_sample.jsonl``.

One JSON line per step holds the first ``logging.rollout_groups`` groups of the step's batch (default
2; 0 turns it off), each with every sample's reward, advantage, grades, stop reason, conversation and,
per model token, its text, the sampler's logprob and the trainer's logprob of the same token under the
same weights (one no-grad forward over those rows, taken before the update). Their difference is the
sampler-vs-trainer gap that importance weights correct. The bound keeps the file small: at the default,
16 samples a step; the cost of the extra forward is measured in ``docs/viewer.md``. After each held-out
eval of the RL loop, ``heldout_sample.jsonl`` gets the first ``HELDOUT_SAMPLES`` (16) records of each
environment's eval (the step page shows the nearest). A resumed run drops the lines of the steps it
redoes from both, as ``metrics.jsonl`` does.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from verigym._files import write_atomic
from verigym._numbers import json_safe
from verigym.train._update import _fill_logprobs
from verigym.train.rewards import StepBatch
from verigym.types import Record

__all__ = ["HELDOUT_FILE", "HELDOUT_SAMPLES", "ROLLOUTS_FILE", "RolloutSample"]

ROLLOUTS_FILE = "rollouts_sample.jsonl"
HELDOUT_FILE = "heldout_sample.jsonl"
HELDOUT_SAMPLES = 16  # held-out records kept per environment and eval (the first, in task order)
_KEY = "rollout_sample_trainer_lp"


def _lp(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 5)


class RolloutSample:
    """Writes ``out_dir/rollouts_sample.jsonl``; ``groups`` per step (0: nothing is written)."""

    def __init__(self, out_dir: str | Path, groups: int, *, tokenizer: Any) -> None:
        self.path = Path(out_dir) / ROLLOUTS_FILE
        self.groups = groups
        self.tokenizer = tokenizer

    def truncate_after(self, step: int) -> None:
        """Drop the lines of steps > ``step`` from both files (a resumed run writes them again)."""
        for path in (self.path, self.path.with_name(HELDOUT_FILE)):
            if not path.is_file():
                continue
            keep = []
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    if int(json.loads(line)["step"]) <= step:
                        keep.append(line + "\n")
                except (ValueError, KeyError, TypeError):
                    continue
            write_atomic(path, "".join(keep))

    def write_heldout(self, step: int, records: dict[str, list[Record]]) -> None:
        """Append the first ``HELDOUT_SAMPLES`` records of each environment's held-out eval after ``step``
        to ``heldout_sample.jsonl`` (as ``results.jsonl`` lines, under ``envs``)."""
        if self.groups <= 0 or not records:
            return
        envs = {
            name: [json.loads(r.model_dump_json()) for r in kept[:HELDOUT_SAMPLES]]
            for name, kept in records.items()
        }
        path = self.path.with_name(HELDOUT_FILE)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"step": step, "envs": envs}) + "\n")

    def _text(self, token: int) -> str:
        try:
            return str(self.tokenizer.decode([token]))
        except Exception:  # a tokenizer without decode: the id stands in
            return f"<{token}>"

    def write(
        self, batch: StepBatch, model: Any, *, pad_id: int, temperature: float, micro: int, version: int
    ) -> None:
        """Record the step's first groups; call after advantages are set and before the update."""
        if self.groups <= 0 or not batch.groups:
            return
        groups = batch.groups[: self.groups]
        rows = [r for g in groups for s in g.samples for r in s.rows]
        sampler = {id(r): r.logprobs is not None for r in rows}
        if rows:
            _fill_logprobs(model, rows, pad_id, temperature, micro, _KEY)
        out_groups = []
        for g in groups:
            samples = []
            for s in g.samples:
                tokens = []
                gaps = []
                for r in s.rows:
                    trainer = r.meta.pop(_KEY, None)
                    for i, (tid, m) in enumerate(zip(r.ids, r.mask, strict=True)):
                        if not m:
                            continue
                        lp_s = r.logprobs[i] if sampler[id(r)] and r.logprobs is not None else None
                        lp_t = trainer[i] if trainer is not None else None
                        if lp_s is not None and lp_t is not None:
                            gaps.append(abs(lp_s - lp_t))
                        tokens.append(
                            {"id": tid, "text": self._text(tid), "sampler": _lp(lp_s), "trainer": _lp(lp_t)}
                        )
                t = s.scored.trajectory
                samples.append(
                    {
                        "reward": s.reward,
                        "advantage": s.rows[0].advantage if s.rows else None,
                        "grades": {
                            n: (None if gr.error else gr.score) for n, gr in s.scored.score.grades.items()
                        },
                        "stop_reason": t.stop_reason,
                        "messages": [m.model_dump(exclude_defaults=True) for m in t.messages],
                        "tokens": tokens,
                        "gap_mean": sum(gaps) / len(gaps) if gaps else None,
                        "gap_max": max(gaps) if gaps else None,
                    }
                )
            out_groups.append({"env": g.env, "task_id": g.task.id, "samples": samples})
        line = {"step": batch.step, "policy_version": version, "groups": out_groups}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(json_safe(line), allow_nan=False) + "\n")
